"""The `check` stage: server logs (files, folders, bundles) -> facts per run, findings, pairs."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from diagnostic.bundle.store import SERVER_LOG, Bundle, run_id
from diagnostic.common.files import readable_path
from diagnostic.common.progress import NullReporter, Reporter
from diagnostic.engines import parse_log
from diagnostic.errors import DiagnosticError
from diagnostic.logcheck.rules import apply_rules, line_patterns, load_rules
from diagnostic.logcheck.sources import run_sources
from diagnostic.schema.bundle import MAIN_SOURCE
from diagnostic.schema.logfacts import EARLIER_ATTEMPT, CheckReport, Evidence, Finding, LogFacts

__all__ = ["FINDINGS_FILE", "STDIN", "check_paths"]

FINDINGS_FILE = "findings.json"
STDIN = Path("-")  # the paste is read from standard input


@dataclass(frozen=True)
class _Log:
    """One log to read, the run name to show, and the bundle it belongs to."""

    path: Path
    label: str
    bundle: Bundle | None = None
    command: str | None = None  # the launch command run.json recorded for this log
    data: bytes | None = None  # text read from standard input instead of a file
    run_id: str | None = None  # the bundle run it belongs to
    source: str | None = None  # its log source in that run (server, node1, …)


def check_paths(
    paths: Sequence[Path],
    *,
    rules_dir: Path | None = None,
    reporter: Reporter | None = None,
    engine: str | None = None,
    stdin: BinaryIO | None = None,
    write: bool = True,
) -> CheckReport:
    """Check every log the paths lead to; write findings.json into each bundle given (unless
    not `write`: `diagnose verify` recomputes the findings and writes nothing).

    A path is a log file, a folder of logs (every *.log below it), a bundle (every log source
    of every run) or `-`: the text on `stdin` (a paste). `engine` overrides detection. Raises
    DiagnosticError when no log can be read at all (exit code 2).
    """
    reporter = reporter or NullReporter()
    if not paths:
        raise DiagnosticError("give at least one log file, folder of logs or bundle to check")
    rules = load_rules(rules_dir)
    patterns = line_patterns(rules)
    logs = _collect(paths, reporter, stdin)
    reporter.start("check", len(logs))
    runs: list[LogFacts] = []
    for log in logs:
        source = log.path if log.data is None else log.data
        facts = parse_log(source, patterns=patterns, command=log.command, engine=engine)
        facts.path, facts.label = ("<stdin>" if log.data is not None else str(log.path)), log.label
        facts.run_id, facts.source = log.run_id, log.source
        runs.append(facts)
        reporter.advance("check", status=f"{log.label}: {facts.engine} {facts.capture.resolved}")
    _require_usable(runs)
    groups = run_sources(runs)
    findings, comparisons = apply_rules(rules, runs, groups)
    findings = [_unusable(r) for r in runs if r.engine == "unknown"] + findings
    report = CheckReport(
        runs=runs, findings=_ordered(findings), comparisons=comparisons, log_sources=groups
    )
    bundles = {log.bundle.path: log.bundle for log in logs if log.bundle and write}
    for bundle in bundles.values():
        path = bundle.write_json(FINDINGS_FILE, _subset(report, bundle.path))
        reporter.note(f"wrote {path}")
    return report


def _collect(paths: Sequence[Path], reporter: Reporter, stdin: BinaryIO | None) -> list[_Log]:
    logs: dict[Path, _Log] = {}
    for path in paths:
        path = Path(path)
        if path == STDIN:
            if stdin is None:
                raise DiagnosticError("'-' reads a paste from standard input, but none was given")
            logs[STDIN] = _Log(STDIN, "stdin", data=stdin.read())
            continue
        if not path.exists():
            raise DiagnosticError(
                f"{path}: no such file or folder; give a log, a folder or a bundle"
            )
        readable_path(path)
        found = _bundle_logs(path, reporter) if (path / "manifest.json").is_file() else _logs(path)
        for log in found:
            logs.setdefault(log.path.resolve(), log)
    return list(logs.values())


def _logs(path: Path) -> list[_Log]:
    if path.is_file():
        return [_Log(path, _label(path))]
    files = sorted(
        p
        for p in path.rglob("*.log")
        if p.is_file() and not any(part.startswith(".") for part in p.relative_to(path).parts)
    )
    if not files:
        raise DiagnosticError(f"{path}: no *.log file in this folder; give log files or a bundle")
    return [_Log(p, _label(p)) for p in files]


def _label(path: Path) -> str:
    """A run name: the folder of a server.log (runs/<arm>-r0/server.log), else the file stem."""
    return path.parent.name if path.name == SERVER_LOG and path.parent.name else path.stem


def _bundle_logs(path: Path, reporter: Reporter) -> list[_Log]:
    bundle = Bundle.open(path, strict=False)
    out: list[_Log] = []
    for run in bundle.runs():
        rid = run_id(run.arm, run.restart)
        sources = bundle.log_sources(run)
        if not sources:
            reporter.note(
                f"{bundle.run_dir(run.arm, run.restart)}: no {SERVER_LOG} or logs/*.log; skipped"
            )
        for source, log in sources.items():
            if len(sources) > 1 and log.stat().st_size == 0:
                # e.g. a launch over ssh that prints nothing: the nodes' logs say it all
                reporter.note(f"{log}: empty, beside the run's other log sources; skipped")
                continue
            main = source == MAIN_SOURCE
            command = run.launch.command if main and run.launch else None
            label = rid if main else f"{rid}/{source}"
            out.append(_Log(log, label, bundle, command, run_id=rid, source=source))
        others = [bundle.run_file(run.arm, run.restart, n) for n in run.logs if n.endswith(".log")]
        for log in others:  # earlier attempts: read and shown, never counted as runs
            if log.is_file() and log not in sources.values():
                out.append(_Log(log, f"{rid}/{log.name}", bundle, source=EARLIER_ATTEMPT))
    if not out:
        raise DiagnosticError(
            f"{path}: no run of this bundle has a {SERVER_LOG} or logs/*.log; copy the server's "
            f"log into runs/<arm>-r<restart>/{SERVER_LOG} or give the log file itself"
        )
    return out


def _require_usable(runs: list[LogFacts]) -> None:
    if any(r.engine != "unknown" for r in runs):
        return
    why = "; ".join(f"{r.path}: {r.notes[-1] if r.notes else 'unreadable'}" for r in runs)
    raise DiagnosticError(
        f"no usable server log: {why}. Give the log of a vLLM, SGLang, llama.cpp or TensorRT-LLM "
        "server (best from its start: the start-up lines say what was captured), an excerpt of "
        "one, or its launch command"
    )


def _unusable(facts: LogFacts) -> Finding:
    why = facts.notes[-1] if facts.notes else "no engine line found"
    return Finding(
        rule="unusable-log",
        severity="warning",
        title="Log could not be read",
        message=f"{facts.path}: {why}; this run is left out of the check.",
        evidence=[Evidence(line=1, text=f"{facts.lines} lines, {facts.bytes} bytes")],
        advice="Give the server's own log from its start (stdout and stderr of the process).",
        run=facts.path,
    )


def _ordered(findings: list[Finding]) -> list[Finding]:
    rank = {"error": 0, "warning": 1, "info": 2}
    return sorted(findings, key=lambda f: rank[f.severity])


def _subset(report: CheckReport, root: Path) -> CheckReport:
    """The part of a report about one bundle's runs."""
    mine = {r.path for r in report.runs if Path(r.path).resolve().is_relative_to(root.resolve())}
    return CheckReport(
        runs=[r for r in report.runs if r.path in mine],
        findings=[f for f in report.findings if f.run in mine and all(p in mine for p in f.runs)],
        comparisons=[c for c in report.comparisons if {c.baseline, c.spec} <= mine],
        log_sources=[g for g in report.log_sources if all(s.path in mine for s in g.sources)],
    )
