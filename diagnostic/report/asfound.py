"""The before-and-after the client pays for: the configuration as found (the plan's
`as_found` arm) against the best decided arm after the remedies, per workload, each with the
interval that decided it, and the log line that says why the first was slow. Only the
analysis' own comparisons and verdicts are used; an undecided "after" is said to be so."""

from __future__ import annotations

from diagnostic.report import fmt as f
from diagnostic.report import select as sel
from diagnostic.report.inputs import Inputs
from diagnostic.report.summary import telling_line
from diagnostic.report.view import AsFound, FindingView
from diagnostic.schema.analysis import Analysis, Comparison

__all__ = ["as_found"]


def as_found(inputs: Inputs, problems: list[FindingView]) -> AsFound | None:
    """The before-and-after lines, or None when the bundle names no as-found arm it measured."""
    a = inputs.analysis
    name = inputs.bundle.manifest.plan.as_found
    if not name or sel.arm_by_id(a, name) is None:
        return None
    lines = [_line(inputs, a, name, w) for w in sel.workloads(a)]
    used = [c for w in sel.workloads(a) for c in sel.spec_comparisons(a, w) if not c.withheld]
    levels = list(dict.fromkeys(c.ci_label for c in used if c.ci_label))
    why = next((p for p in problems if name in p.arm_ids and p.evidence), None)
    quote = telling_line(why.evidence) if why else None
    return AsFound(
        arm=name,
        lines=[line for line in lines if line],
        levels="Each interval is the one that decided its verdict: " + "; ".join(levels) + "."
        if levels
        else "",
        why=f"Why as found was slow: {why.title or why.message}" if why else "",
        quote=quote,
    )


def _versus(a: Analysis, c: Comparison) -> str:
    return "no speculation" if c.baseline == a.baseline else f"{c.baseline} (no speculation)"


def _decided(a: Analysis, c: Comparison) -> str:
    """'0.56× of no speculation [0.37–0.84] LOSS', or the no-verdict words; the interval is
    the one that decided the verdict (its level: AsFound.levels)."""
    if c.withheld:
        return (
            f"{f.ratio(c.ratio)} of {_versus(a, c)}, no verdict ({c.label or 'too few restarts'})"
        )
    interval = f.span(c.ci_low, c.ci_high, "ratio", a.noise_band.delta)
    return f"{f.ratio(c.ratio)} of {_versus(a, c)} [{interval}] {c.verdict}".replace(" [] ", " ")


def _line(inputs: Inputs, a: Analysis, name: str, workload: str) -> str:
    comps = sel.spec_comparisons(a, workload)
    level = sel.low_level(a)
    before = next((c for c in comps if c.arm == name), None) or sel.comparison(
        a, name, workload, level
    )
    if before is None:
        return ""
    text = f"{workload}: as found, {_named(inputs, name)}: {_decided(a, before)}"
    wins = [c for c in comps if c.verdict == "WIN" and not c.withheld]
    after = max(wins, key=lambda c: c.ci_low or 0.0, default=None)
    if after is None:
        lead = max((c for c in comps if c.arm != name), key=lambda c: c.ratio or 0.0, default=None)
        undecided = (
            f" (the fastest measured, {_named(inputs, lead.arm)}, {_decided(a, lead)})"
            if lead
            else ""
        )
        return f"{text}; after: not decided, no remedy is a WIN yet{undecided}."
    if after.arm == name:
        return f"{text}; after: the configuration as found is the best decided one."
    return f"{text}; after: {_named(inputs, after.arm)}, {_decided(a, after)}."


def _named(inputs: Inputs, arm_id: str) -> str:
    arm = sel.arm_by_id(inputs.analysis, arm_id)
    described = inputs.describe(arm) if arm else arm_id
    return described if arm_id in described else f"{described} ({arm_id})"
