"""Chapter 1, capture and configuration evidence: check's findings, capture with and without
speculation, nodes and workers, and what each server process ran with."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from diagnostic.logcheck.sources import source_rows
from diagnostic.report import fmt as f
from diagnostic.report import launch, remedied
from diagnostic.report import select as sel
from diagnostic.report.inputs import Inputs, served_method
from diagnostic.report.views.base import Evidence
from diagnostic.report.views.chapters import CaptureRun, ComparisonTable, FindingView
from diagnostic.schema.logfacts import Evidence as LogLine
from diagnostic.schema.logfacts import Finding, LogFacts, draft_length

__all__ = [
    "SAMENESS",
    "capture_note",
    "capture_runs",
    "findings",
    "node_table",
    "problems",
    "spec_pairs",
    "spec_table",
]

_GOOD_CAPTURE = {"FULL_AND_PIECEWISE", "FULL", "CAPTURED"}
_BAD_CAPTURE = {"NONE", "PIECEWISE", "FULL_DECODE_ONLY"}
_SEVERITY_ORDER = {"error": 0, "warning": 1, "info": 2}
MAX_EVIDENCE = 8
# Whether speculation changed the capture mode: a mode unknown on either side is neither.
SAMENESS = {True: "same", False: "CHANGED", None: "unknown"}


def evidence(
    lines: Iterable[LogLine], limit: int = MAX_EVIDENCE, values: dict[str, str] | None = None
) -> list[Evidence]:
    """Log lines in file order, each once, at most `limit`. Line 0 is not a log line but the
    launch command the bundle recorded: no number, its recorded shell variables expanded."""
    unique = {line.line: line for line in lines}
    return [
        Evidence(
            line=f"{n}:" if n else "",
            text=unique[n].text if n else launch.expand(unique[n].text, values or {}),
        )
        for n in sorted(unique)[:limit]
    ]


def spec_text(facts: LogFacts, served: str | None = None) -> str:
    """'n-gram, k=3, drafter X', 'off', or 'not measured' when the log does not say; a
    method the log leaves out is the one the server reported (`served`), else 'not
    recorded'."""
    spec = facts.spec
    if spec.enabled is None and spec.method is None:
        return f.MISSING
    if not spec.enabled:
        return "off"
    text = f.spec_setting(spec.method or served, draft_length(facts.engine, spec.num_draft_tokens))
    return text + (f", drafter {spec.drafter}" if spec.drafter else "")


def _spec(inputs: Inputs, facts: LogFacts) -> str:
    return spec_text(facts, served_method(inputs.run_of(facts)))


def _resolved_class(resolved: str) -> str:
    if resolved in _BAD_CAPTURE:
        return "bad"
    return "ok" if resolved in _GOOD_CAPTURE else "muted"


def _engine(facts: LogFacts) -> str:
    return f.text(" ".join(v for v in (facts.engine, facts.version) if v and v != "unknown"))


def _key(inputs: Inputs, facts: LogFacts) -> tuple[str, ...]:
    cap = facts.capture
    arm = inputs.arm_of(facts) or inputs.run_label(facts)
    return (arm, _engine(facts), _spec(inputs, facts), f.text(cap.configured), cap.resolved)


def _group_label(inputs: Inputs, group: list[LogFacts]) -> str:
    labels = [inputs.run_label(x) for x in group]
    if len(labels) == 1:
        return labels[0]
    return f"{labels[0]} and {len(labels) - 1} more run(s) of {inputs.arm_of(group[0])}, all alike"


def capture_runs(inputs: Inputs) -> list[CaptureRun]:
    """One block per arm and outcome: runs of an arm that resolved alike are shown once."""
    groups: dict[tuple[str, ...], list[LogFacts]] = {}
    for facts in inputs.log_facts:
        groups.setdefault(_key(inputs, facts), []).append(facts)
    out = []
    for group in groups.values():
        first, cap = group[0], group[0].capture
        lines = [*cap.evidence, *first.spec_evidence, *first.fallbacks]
        values = launch.launch_values(inputs.run_of(first))
        out.append(
            CaptureRun(
                run=_group_label(inputs, group),
                engine=_engine(first),
                spec=launch.expand(_spec(inputs, first), values),
                configured=f.text(cap.configured, "not stated in the log"),
                resolved=cap.resolved,
                resolved_class=_resolved_class(cap.resolved),
                reason=cap.reason,
                runner=f.text(first.model_runner, "—"),
                attention=f.text(first.attention_backend, "—"),
                evidence=evidence(lines, values=values),
            )
        )
    return out


def capture_note(inputs: Inputs) -> str:
    """Why the per-run block is empty."""
    if inputs.check is None:
        return "No server log was checked: run `diagnose check BUNDLE` to add the evidence."
    return "check read no server log in this bundle (it was collected without one)."


def spec_pairs(inputs: Inputs) -> ComparisonTable | None:
    """check's spec vs no-spec pairs, one row per speculative arm and outcome: did turning
    speculation on change the capture mode?"""
    if inputs.check is None or not inputs.check.comparisons:
        return None
    by_path = {x.path: x for x in inputs.log_facts}
    groups: dict[tuple[str, ...], list[str]] = {}
    counts: dict[tuple[str, ...], int] = {}
    for c in inputs.check.comparisons:
        spec = by_path.get(c.spec)
        arm = (inputs.arm_of(spec) if spec else None) or c.spec_label or c.spec
        method = c.spec_method or (served_method(inputs.run_of(spec)) if spec else None)
        key = (arm, method or "", c.baseline_resolved, c.spec_resolved, str(c.same))
        counts[key] = counts.get(key, 0) + 1
        groups.setdefault(key, [
            f.text(c.spec_label or c.spec),
            f.method_name(method) if method else f.NOT_RECORDED,
            f.text(c.baseline_label or c.baseline),
            c.baseline_resolved,
            c.spec_resolved,
            SAMENESS[c.same],
        ])  # fmt: skip
    rows = [[*row, str(counts[key])] for key, row in groups.items()]
    headers = ["Speculative run", "Method", "Compared with", "Capture without", "Capture with",
               "Capture", "Runs alike"]  # fmt: skip
    return ComparisonTable(headers=headers, rows=rows)


def node_table(inputs: Inputs) -> ComparisonTable | None:
    """Capture per node (log source) and per worker of every run that has several; a run
    whose nodes or workers disagree is marked in its last column ('unknown' when a mode could
    not be read: nothing says they agree)."""
    check = inputs.check
    rows = source_rows(check.log_sources) if check is not None else []
    if check is None or not rows:
        return None
    split = {f.run for f in check.findings if f.rule == "workers-disagree"}
    groups = check.log_sources
    mixed = {g.run_id for g in groups if g.differences or any(s.path in split for s in g.sources)}
    unread = {r.run_id for r in rows if r.resolved == "UNKNOWN"} - mixed  # agree? unknown
    verdict = {r.run_id: "DIFFERS" if r.run_id in mixed else "agree" for r in rows}
    verdict |= dict.fromkeys(unread, "unknown")
    body = [
        [r.run_id, r.source, r.worker or "—", r.resolved, r.spec, verdict[r.run_id]] for r in rows
    ]
    headers = ["Run", "Node (log source)", "Worker", "Capture resolved", "Speculation", "Run"]
    return ComparisonTable(headers=headers, rows=body)


_FACTS: list[tuple[str, Callable[[Inputs, LogFacts], str]]] = [
    ("Run", lambda i, x: i.run_label(x)),
    ("Engine", lambda i, x: _engine(x)),
    ("Speculation", _spec),
    ("Capture configured", lambda i, x: f.text(x.capture.configured, "not stated in the log")),
    ("Capture resolved", lambda i, x: x.capture.resolved),
    ("Model runner", lambda i, x: f.text(x.model_runner)),
    ("Attention backend", lambda i, x: f.text(x.attention_backend)),
    ("Fallback lines", lambda i, x: str(len(x.fallbacks))),
    (
        "Mean acceptance length (log)",
        lambda i, x: f.num(
            x.acceptance_summary.mean_acceptance_length if x.acceptance_summary else None, 2
        ),
    ),
]


def _pair(inputs: Inputs) -> tuple[LogFacts, LogFacts] | None:
    facts = inputs.log_facts
    by_path = {x.path: x for x in facts}
    for c in inputs.check.comparisons if inputs.check else []:
        if c.baseline in by_path and c.spec in by_path:
            return by_path[c.baseline], by_path[c.spec]
    off = next((x for x in facts if x.spec.enabled is False), None)
    on = next((x for x in facts if x.spec.enabled), None)
    return (off, on) if off is not None and on is not None else None


def spec_table(inputs: Inputs) -> ComparisonTable | None:
    """One run without speculation beside one with it: every fact check read."""
    pair = _pair(inputs)
    if pair is None:
        return None
    off, on = pair
    rows = [[label, get(inputs, off), get(inputs, on)] for label, get in _FACTS]
    return ComparisonTable(headers=["Fact", "Without speculation", "With speculation"], rows=rows)


def findings(inputs: Inputs) -> list[FindingView]:
    """Every finding of check, most severe first; one rule firing alike on several runs
    (the same message) is shown once with every run it concerns."""
    groups: dict[tuple[str, str, str], list[Finding]] = {}
    for x in inputs.check.findings if inputs.check is not None else []:
        groups.setdefault((x.rule, x.severity, x.message), []).append(x)
    views = [_view(inputs, group) for group in groups.values()]
    return sorted(views, key=lambda v: _SEVERITY_ORDER.get(v.severity, 9))


def _view(inputs: Inputs, group: list[Finding]) -> FindingView:
    """One finding as shown, its runs' arms, and its fix as measured on every workload where
    the plan has an arm with it (remedied.twins)."""
    first, arms, a = group[0], _finding_arms(inputs, group), inputs.analysis
    return FindingView(
        severity=first.severity,
        rule=first.rule,
        title=first.title,
        message=first.message,
        evidence=evidence(first.evidence, values=_values(inputs, first)),
        advice=f.text(first.advice, "No advice given."),
        where=_finding_where(inputs, group),
        arms=", ".join(arms),
        arm_ids=arms,
        measured=[
            text
            for twin in remedied.twins(inputs, first.rule, arms)
            for w in sel.workloads(a)
            if (text := remedied.sentence(a, twin, w))
        ],
    )


def _values(inputs: Inputs, finding: Finding) -> dict[str, str]:
    """The recorded launch variables of the run a finding quotes first."""
    path = finding.run or next(iter(finding.runs), None)
    facts = next((x for x in inputs.log_facts if x.path == path), None)
    return launch.launch_values(inputs.run_of(facts)) if facts is not None else {}


def _finding_where(inputs: Inputs, group: list[Finding]) -> str:
    by_path = {x.path: inputs.run_label(x) for x in inputs.log_facts}
    paths = [p for x in group for p in ([x.run] if x.run else x.runs)]
    return ", ".join(dict.fromkeys(by_path.get(p, p) for p in paths))


def _finding_arms(inputs: Inputs, group: list[Finding]) -> list[str]:
    by_path = {x.path: inputs.arm_of(x) or inputs.run_label(x) for x in inputs.log_facts}
    paths = [p for x in group for p in ([x.run] if x.run else x.runs)]
    return list(dict.fromkeys(by_path.get(p, p) for p in paths))


def problems(inputs: Inputs) -> list[FindingView]:
    """Findings worth a root-cause line on the first page (errors and warnings)."""
    return [v for v in findings(inputs) if v.severity in ("error", "warning")]
