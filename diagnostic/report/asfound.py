"""The before-and-after the client pays for: the configuration as found (the plan's
`as_found` arm) against the best decided arm after the remedies, per workload, each with the
interval that decided it, and the log line that says why the first was slow. Only the
analysis' own comparisons and verdicts are used; an undecided "after" is said to be so."""

from __future__ import annotations

from dataclasses import dataclass

from diagnostic.engines.edit import changed_flags
from diagnostic.report import fmt as f
from diagnostic.report import select as sel
from diagnostic.report.inputs import Inputs
from diagnostic.report.summary import telling_line
from diagnostic.report.view import AsFound, FindingView
from diagnostic.schema.analysis import Analysis, Comparison

__all__ = ["as_found"]


@dataclass(frozen=True)
class _Pair:
    """One workload: the as-found comparison, and the best WIN (None: none decided)."""

    workload: str
    before: Comparison
    after: Comparison | None
    fastest: Comparison | None  # the fastest other arm, said when no WIN decides "after"


def as_found(inputs: Inputs, problems: list[FindingView]) -> AsFound | None:
    """The before-and-after, or None when the bundle names no as-found arm it measured."""
    a = inputs.analysis
    name = inputs.bundle.manifest.plan.as_found
    if not name or sel.arm_by_id(a, name) is None:
        return None
    pairs = [p for w in sel.workloads(a) if (p := _pair(a, name, w)) is not None]
    afters = {p.after.arm for p in pairs if p.after is not None}
    shared = afters.pop() if len(afters) == 1 and all(p.after for p in pairs) else None
    head = f"As found: {_named(inputs, name)}."
    if shared is not None:
        after = "the configuration as found" if shared == name else _named(inputs, shared, name)
        head += f" After the remedies: {after}."
    used = [c for p in pairs for c in (p.before, p.after) if c is not None and not c.withheld]
    levels = list(dict.fromkeys(c.ci_label for c in used if c.ci_label))
    why = next((p for p in problems if name in p.arm_ids and p.evidence), None)
    slow = any((p.before.ratio or 1.0) < 1 for p in pairs)
    said = "Why as found was slow" if slow else "What the logs found on it"
    return AsFound(
        arm=name,
        after=shared,
        head=head,
        lines=[_line(inputs, a, p, shared) for p in pairs],
        levels=f"Each interval decided its verdict: {'; '.join(levels)}." if levels else "",
        why=f"{said}: {why.title or why.message}" if why else "",
        quote=telling_line(why.evidence) if why else None,
    )


def _pair(a: Analysis, name: str, workload: str) -> _Pair | None:
    comps = sel.spec_comparisons(a, workload)
    before = next((c for c in comps if c.arm == name), None)
    before = before or sel.comparison(a, name, workload, sel.low_level(a))
    if before is None:
        return None
    wins = [c for c in comps if c.verdict == "WIN" and not c.withheld]
    others = [c for c in comps if c.arm != name]
    return _Pair(
        workload=workload,
        before=before,
        after=max(wins, key=lambda c: c.ci_low or 0.0, default=None),
        fastest=max(others, key=lambda c: c.ratio or 0.0, default=None),
    )


def _line(inputs: Inputs, a: Analysis, p: _Pair, shared: str | None) -> str:
    text = f"{p.workload}: as found {_decided(a, p.before)}"
    if p.after is None:
        fastest = p.fastest
        lead = (
            f" (fastest: {_named(inputs, fastest.arm)}, {_decided(a, fastest)})" if fastest else ""
        )
        return f"{text}; after: not decided, no remedy is a WIN yet{lead}."
    if p.after.arm == p.before.arm:
        return f"{text}; after: the configuration as found is the best decided one."
    who = "" if shared else f" {_named(inputs, p.after.arm, p.before.arm)},"
    return f"{text}; after{who} {_decided(a, p.after)}."


def _versus(a: Analysis, c: Comparison) -> str:
    return "no speculation" if c.baseline == a.baseline else c.baseline


def _decided(a: Analysis, c: Comparison) -> str:
    """'0.56× of no speculation [0.37–0.84] LOSS', or the no-verdict words; the interval is
    the one that decided the verdict (its level: AsFound.levels)."""
    if c.withheld:
        why = c.label or "too few restarts"
        return f"{f.ratio(c.ratio)} of {_versus(a, c)}, no verdict ({why})"
    interval = f.span(c.ci_low, c.ci_high, "ratio", a.noise_band.delta)
    return f"{f.ratio(c.ratio)} of {_versus(a, c)} [{interval}] {c.verdict}".replace(" [] ", " ")


def _named(inputs: Inputs, arm_id: str, against: str | None = None) -> str:
    """The arm as the report describes it; with `against` (the as-found arm), also the launch
    flags it changes ('with --attention-backend FLASH_ATTN_MLA')."""
    arm = sel.arm_by_id(inputs.analysis, arm_id)
    described = inputs.describe(arm) if arm else arm_id
    named = described if arm_id in described else f"{described} ({arm_id})"
    launches = {x.name: x.launch for x in inputs.bundle.manifest.plan.arms if x.launch}
    if against is None or arm_id not in launches or against not in launches:
        return named
    changes = changed_flags(launches[against], launches[arm_id])
    return f"{named} with {', '.join(changes)}" if changes else named
