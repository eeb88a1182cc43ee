"""`diagnose check`: what the engine really did, read from the server logs."""

from __future__ import annotations

import sys
from pathlib import Path

import click
from rich.markup import escape
from rich.table import Table

from diagnostic.cli._common import console, console_err
from diagnostic.common.resources import checklists_dir
from diagnostic.engines import ENGINES
from diagnostic.logcheck.sources import SourceRow, source_rows
from diagnostic.logcheck.stage import check_paths
from diagnostic.schema.logfacts import CheckReport, Evidence, Finding, LogFacts

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
    sys.exit(report.exit_code())


def _print(report: CheckReport) -> None:
    console.print(_runs_table(report.runs))
    for facts in report.runs:
        console.print(
            f"  [bold]{escape(facts.label or facts.path)}[/]: {escape(facts.capture.reason)}",
            highlight=False,
        )
        if facts.engine != "unknown" and facts.unread:
            console.print(f"    not in the log: {escape('; '.join(facts.unread))}", highlight=False)
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
    for finding in report.findings:
        _print_finding(finding, labels)
    counts = {s: sum(f.severity == s for f in report.findings) for s in _SEVERITY}
    console.print(
        f"{len(report.runs)} run(s): {counts['error']} error(s), {counts['warning']} "
        f"warning(s), {counts['info']} note(s)",
        highlight=False,
    )


def _spec(facts: LogFacts) -> str:
    spec = facts.spec
    if spec.enabled is None:
        return "?"
    source = facts.sources.get("spec.enabled")
    seen = f" ({source.kind})" if source and source.kind != "startup" else ""
    if not spec.enabled:
        return "off" + seen
    k = f" k={spec.num_draft_tokens}" if spec.num_draft_tokens is not None else ""
    return f"{spec.method or 'on'}{k}{seen}"


def _engine(facts: LogFacts) -> str:
    """`vllm 0.32.0 on cpu`: the engine, its version and the platform it ran on."""
    where = f" on {facts.platform}" if facts.platform != "unknown" else ""
    return f"{facts.engine} {facts.version or ''}".strip() + where


def _lines(evidence: list[Evidence], limit: int = 6) -> str:
    numbers = [str(e.line) for e in evidence[:limit]]
    more = f" +{len(evidence) - limit}" if len(evidence) > limit else ""
    return ("L" + ", ".join(numbers) + more) if numbers else "-"


def _runs_table(runs: list[LogFacts]) -> Table:
    table = Table(title="Runs: what the engine resolved", title_justify="left")
    table.add_column("Run", overflow="fold")
    table.add_column("Engine", overflow="fold")
    table.add_column("Spec", overflow="fold")
    table.add_column("Capture: configured → resolved", no_wrap=True)
    table.add_column("Lines", overflow="fold")
    for facts in runs:
        resolved = facts.capture.resolved
        style = "red" if resolved in ("NONE", "PIECEWISE", "UNKNOWN") and facts.spec.enabled else ""
        capture = (
            f"{facts.capture.configured or '?'} → [{style}]{resolved}[/]"
            if style
            else (f"{facts.capture.configured or '?'} → {resolved}")
        )
        table.add_row(
            escape(facts.label or facts.path),
            escape(_engine(facts)),
            escape(_spec(facts)),
            capture,
            _lines(facts.capture.evidence),
        )
    return table


def _sources_table(rows: list[SourceRow]) -> Table:
    table = Table(title="Nodes and workers: capture per log source", title_justify="left")
    for name in ("Run", "Source", "Worker", "Capture", "Spec"):
        table.add_column(name, overflow="fold")
    for r in rows:
        table.add_row(
            *(escape(v) for v in (r.run_id, r.source, r.worker or "-", r.resolved, r.spec))
        )
    return table


def _comparison_table(report: CheckReport) -> Table:
    table = Table(title="Speculation vs no speculation (same engine)", title_justify="left")
    for name, fixed in (
        ("Engine", False),
        ("No-spec run", False),
        ("Resolved", True),
        ("Spec run", False),
        ("Resolved", True),
        ("Same?", True),
    ):
        table.add_column(name, no_wrap=fixed, overflow="fold")
    for c in report.comparisons:
        same = {True: "[green]same[/]", False: "[bold red]DIFFERENT[/]", None: "?"}[c.same]
        table.add_row(
            c.engine,
            escape(c.baseline_label or c.baseline),
            c.baseline_resolved,
            escape(f"{c.spec_label or c.spec} ({c.spec_method or '?'})"),
            c.spec_resolved,
            same,
        )
    return table


def _print_finding(finding: Finding, labels: dict[str, str]) -> None:
    style = _SEVERITY[finding.severity]
    where = labels.get(finding.run or "", finding.run or "")
    console.print(
        f"\n[{style}]{finding.severity.upper()}[/] {escape(finding.rule)} "
        f"[dim]({escape(where)})[/]: {escape(finding.title)}"
    )
    console.print(f"  {escape(finding.message)}", highlight=False)
    for e in finding.evidence[:_SHOWN_EVIDENCE]:
        text = e.text if len(e.text) <= 240 else e.text[:237] + "..."
        console.print(f"  [dim]L{e.line}:[/] {escape(text)}", highlight=False)
    if len(finding.evidence) > _SHOWN_EVIDENCE:
        console.print(f"  [dim]… {len(finding.evidence) - _SHOWN_EVIDENCE} more line(s)[/]")
    if finding.advice:
        console.print(f"  [bold]→[/] {escape(finding.advice)}", highlight=False)
