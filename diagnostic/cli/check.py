"""`diagnose check`: what the engine really did, read from the server logs."""

from __future__ import annotations

import sys
from collections.abc import Iterable
from pathlib import Path

import click
from rich.markup import escape
from rich.table import Table

from diagnostic.cli._common import console, console_err, fitted_table
from diagnostic.common.resources import checklists_dir
from diagnostic.engines import ENGINES
from diagnostic.logcheck.sources import SourceRow, source_rows
from diagnostic.logcheck.stage import check_paths
from diagnostic.schema.logfacts import (
    EARLIER_ATTEMPT,
    CheckReport,
    Evidence,
    Finding,
    LogFacts,
    draft_length,
)

_SEVERITY = {"error": "bold red", "warning": "yellow", "info": "cyan"}
_SHOWN_EVIDENCE = 4


class _NoteReporter:
    """Prints a stage's notes on stderr; no progress bars (logs are read in seconds)."""

    def start(self, label: str, total: int | None) -> None:
        """Nothing to draw."""

    def advance(self, label: str, steps: int = 1, status: str | None = None) -> None:
        """Nothing to draw."""

    def note(self, message: str) -> None:
        """Print one line on stderr."""
        console_err.print(message, markup=False, highlight=False)


@click.command("check")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the machine-readable report.")
@click.option(
    "--engine",
    type=click.Choice(sorted(ENGINES)),
    default=None,
    help="Read the text as this engine's, whatever it looks like (default: detected).",
)
def command(paths: tuple[Path, ...], as_json: bool, engine: str | None) -> None:
    """Read server logs, excerpts or launch commands and report what the engine resolved.

    PATH is a server log, a folder of logs (every *.log below it), a bundle (every log
    source of every run, one per node: capture per node and per worker side by side;
    findings.json is written into the bundle) or - for text pasted on standard input.
    Excerpts are read too: a lone warning, metrics lines, a pasted launch command (what was
    configured, not resolved). For each run: engine, version, speculation,
    configured -> resolved CUDA-graph capture and the lines that show it; then the findings,
    and the spec vs no-spec comparison when several runs are given. In --json every field's
    source (startup line, command, runtime line or metric) is in each run's `sources`; the
    per-node table of each bundle run in `log_sources`.

    Exit code: 0 no error finding, 1 an error finding, 2 unusable input (nothing recognised).

    \b
    Examples:
      diagnose check bundle/
      diagnose check bundle/runs/*/logs/*.log --json
      pbpaste | diagnose check -
      diagnose check notes.txt --engine vllm
    """
    report = check_paths(
        list(paths),
        rules_dir=checklists_dir() / "rules",
        reporter=_NoteReporter(),
        engine=engine,
        stdin=sys.stdin.buffer,
    )
    if as_json:
        click.echo(report.model_dump_json(indent=2))
    else:
        _print(report)
        bundles = [p for p in paths if (p / "manifest.json").is_file()]
        if bundles and any(f.severity != "info" for f in report.findings):
            console.print(
                f"Next: diagnose plan {escape(str(bundles[0]))} -o next.toml writes the arms "
                "that test the fixes (as found, each remedy, their baselines).",
                highlight=False,
            )
    sys.exit(report.exit_code())


def _print(report: CheckReport) -> None:
    console.print(_runs_table(report.runs))
    every = [f.label or f.path for f in report.runs]
    for reason, names in _grouped((f.capture.reason, f.label or f.path) for f in report.runs):
        shown = _listed(names, every)
        console.print(f"  [bold]{escape(shown)}[/]: {escape(reason)}", highlight=False)
    unread = (
        ("; ".join(f.unread), f.label or f.path)
        for f in report.runs
        if f.engine != "unknown" and f.unread
    )
    for facts_missing, names in _grouped(unread):
        shown = _listed(names, every)
        console.print(
            f"  [bold]{escape(shown)}[/]: not in the log: {escape(facts_missing)}", highlight=False
        )
    rows = source_rows(report.log_sources)
    if rows:
        console.print(_sources_table(rows))
        for group in (g for g in report.log_sources if g.differences):
            console.print(
                f"  [bold]{escape(group.run_id)}[/]: [red]"
                f"{escape('; '.join(group.differences))}[/]",
                highlight=False,
            )
    if report.comparisons:
        console.print(_comparison_table(report))
        for c in report.comparisons:
            pair = f"{c.spec_label or c.spec} vs {c.baseline_label or c.baseline}"
            console.print(f"  {escape(pair)}: paired on {escape(c.matched_on)}", highlight=False)
    labels = {r.path: r.label or r.path for r in report.runs}
    if not report.findings:
        console.print("[green]No findings.[/]")
    for finding, runs in _same_findings(report.findings, labels):
        _print_finding(finding, runs, every)
    counts = {s: sum(f.severity == s for f in report.findings) for s in _SEVERITY}
    attempts = sum(r.source == EARLIER_ATTEMPT for r in report.runs)
    also = f" and {attempts} earlier start attempt(s)" if attempts else ""
    console.print(
        f"{len(report.runs) - attempts} run(s){also}: {counts['error']} error(s), "
        f"{counts['warning']} warning(s), {counts['info']} note(s)",
        highlight=False,
    )


def _grouped(pairs: Iterable[tuple[str, str]]) -> list[tuple[str, list[str]]]:
    """(text, names) pairs with one entry per text, its names in order of appearance."""
    groups: dict[str, list[str]] = {}
    for text, name in pairs:
        groups.setdefault(text, []).append(name)
    return list(groups.items())


def _listed(names: list[str], every: list[str]) -> str:
    """A run, 'all N runs', or 'N runs: a, b, c' (every name, each kept whole when the line
    wraps)."""
    if len(names) == 1:
        return names[0]
    if len(every) > 2 and sorted(names) == sorted(every):
        return f"all {len(names)} runs"
    return f"{len(names)} runs: {', '.join(names)}"


def _same_findings(
    findings: list[Finding], labels: dict[str, str]
) -> list[tuple[Finding, list[str]]]:
    """Each finding once with every run it was found in: the same rule, words and advice in
    several runs (a sweep's restarts) is one finding to read. The evidence shown is the first
    run's; --json has every run's."""
    groups: dict[tuple[str, ...], tuple[Finding, list[str]]] = {}
    for f in findings:
        key = (f.severity, f.rule, f.title, f.message, f.advice or "")
        where = labels.get(f.run or "", f.run or "")
        groups.setdefault(key, (f, []))[1].append(where)
    return list(groups.values())


def _spec(facts: LogFacts) -> str:
    spec = facts.spec
    if spec.enabled is None:
        return "unknown"
    source = facts.sources.get("spec.enabled")
    seen = f" ({source.kind})" if source and source.kind != "startup" else ""
    if not spec.enabled:
        return "off" + seen
    k = draft_length(facts.engine, spec.num_draft_tokens)
    return f"{spec.method or 'on'}{f' k={k}' if k is not None else ''}{seen}"


def _engine(facts: LogFacts) -> str:
    """`vllm 0.32.0 on cpu`: the engine, its version and the platform it ran on."""
    where = f" on {facts.platform}" if facts.platform != "unknown" else ""
    return f"{facts.engine} {facts.version or ''}".strip() + where


def _lines(evidence: list[Evidence], limit: int = 6) -> str:
    numbers = [str(e.line) for e in evidence[:limit]]
    more = f" +{len(evidence) - limit}" if len(evidence) > limit else ""
    return ("L" + ", ".join(numbers) + more) if numbers else "-"


def _runs_table(runs: list[LogFacts]) -> Table:
    rows = []
    for facts in runs:
        resolved = facts.capture.resolved
        bad = resolved in ("NONE", "PIECEWISE", "UNKNOWN") and facts.spec.enabled
        shown = f"[red]{resolved}[/]" if bad else resolved
        rows.append(
            [
                escape(facts.label or facts.path),
                escape(_engine(facts)),
                escape(_spec(facts)),
                f"{escape(facts.capture.configured or 'not stated')} → {shown}",
                _lines(facts.capture.evidence),
            ]
        )
    headers = ["Run", "Engine", "Spec", "Capture: configured → resolved", "Lines"]
    title = "Runs: what the engine resolved"
    return fitted_table(title, headers, rows, console.width, whole=(3,))  # configured → resolved


def _sources_table(rows: list[SourceRow]) -> Table:
    cells = [
        [escape(v) for v in (r.run_id, r.source, r.worker or "-", r.resolved, r.spec)] for r in rows
    ]
    headers = ["Run", "Source", "Worker", "Capture", "Spec"]
    return fitted_table("Nodes and workers: capture per log source", headers, cells, console.width)


def _comparison_table(report: CheckReport) -> Table:
    rows = []
    for c in report.comparisons:
        same = {True: "[green]same[/]", False: "[bold red]DIFFERENT[/]", None: "unknown"}[c.same]
        rows.append(
            [
                escape(c.engine),
                escape(c.baseline_label or c.baseline),
                escape(c.baseline_resolved),
                escape(f"{c.spec_label or c.spec} ({c.spec_method or 'method not recorded'})"),
                escape(c.spec_resolved),
                same,
            ]
        )
    headers = ["Engine", "No-spec run", "Resolved", "Spec run", "Resolved", "Same?"]
    title = "Speculation vs no speculation (same engine)"
    return fitted_table(title, headers, rows, console.width)


def _print_finding(finding: Finding, runs: list[str], every: list[str]) -> None:
    style = _SEVERITY[finding.severity]
    where = f" [dim]({escape(runs[0])})[/]" if len(runs) == 1 and runs[0] else ""
    console.print(
        f"\n[{style}]{finding.severity.upper()}[/] {escape(finding.rule)}{where}: "
        f"{escape(finding.title)}"
    )
    if len(runs) > 1:
        console.print(f"  [bold]in {escape(_listed(runs, every))}[/]", highlight=False)
    console.print(f"  {escape(finding.message)}", highlight=False)
    for e in finding.evidence[:_SHOWN_EVIDENCE]:
        text = e.text if len(e.text) <= 240 else e.text[:237] + "..."
        of = f" of {escape(runs[0])}" if len(runs) > 1 else ""
        console.print(f"  [dim]L{e.line}{of}:[/] {escape(text)}", highlight=False)
    if len(finding.evidence) > _SHOWN_EVIDENCE:
        console.print(f"  [dim]… {len(finding.evidence) - _SHOWN_EVIDENCE} more line(s)[/]")
    if finding.advice:
        console.print(f"  [bold]→[/] {escape(finding.advice)}", highlight=False)
