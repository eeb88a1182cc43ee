"""The methodology's account of the design that ran: fixed or adaptive, the restarts and
requests each arm got and why, what the plan estimated against what it took (the manifest's
TimePlan, written by `sweep`); why a comparison stopped for futility."""

from __future__ import annotations

import re

from diagnostic.common.progress import duration
from diagnostic.report import fmt as f
from diagnostic.report.view import KeyValue
from diagnostic.schema.analysis import Analysis, Comparison
from diagnostic.schema.bundle import Manifest, PlanSpec, TimePlan

__all__ = ["COST_ROW", "design_rows", "futility"]


def design_rows(manifest: Manifest, a: Analysis) -> list[KeyValue]:
    """Rows of the methodology's 'What was measured' table on the design and its cost."""
    p, t = manifest.plan, manifest.time_plan
    if p.design.kind == "adaptive":
        design = _adaptive(p)
    else:
        design = f"fixed: every planned restart ({p.restarts} per arm), decided once"
    rows = [("Design", design), ("Restarts per arm (run)", _restarts(a, t))]
    if t is not None:
        why = _COSTS.sub(rf"; on the costs \1 ({SEE_COSTS})", t.requests_why)
        rows.append(("Requests per restart (planned on site)", f"{t.requests}: {why}"))
        took = duration(t.took_s) if t.took_s is not None else "not recorded"
        rows.append(
            (
                "Wall-clock: planned against taken",
                f"planned {duration(t.estimated_s)} at the start, from the costs given "
                f"before measuring; took {took}",
            )
        )
    return [KeyValue(key=k, value=f.text(v)) for k, v in rows]


# The sweep's sizing of requests names the costs it used; the report states the measured
# costs once (COST_ROW) and refers to them, so no second figure for a start reads otherwise.
COST_ROW = "Cost of a restart (measured)"
SEE_COSTS = "the measured costs: Cost of a restart, above"
_COSTS = re.compile(r"; a start costs [\d.]+ s against [\d.]+ s per request, costs ([^;]*)")


def _adaptive(p: PlanSpec) -> str:
    """The adaptive design in words: its looks, when an arm stopped, and, when the manifest
    records them, the futility rule and the pooled reference."""
    d = p.design
    looks = ", ".join(str(n) for n in d.looks)
    stop = "decided (WIN, LOSS or EQUIVALENT)" + (" or futile" if d.target is not None else "")
    parts = [
        f"adaptive (group-sequential): looks after blocks {looks} at the Pocock per-look "
        f"level; an arm whose comparisons were all {stop} got no more restarts, the baseline "
        "and the A/A arm ran while any was open"
    ]
    if d.target is not None:
        parts.append(
            "an undecided comparison stopped at an interim look when a one-sided t test "
            f"rejected a speedup of +{f.pct(d.target, 0)}, the plan's target, at "
            f"{f.pct(d.futility_alpha)}: a futility stop, verdict INCONCLUSIVE"
        )
    if d.pool_aa:
        parts.append(f"each block's reference: {_pooled(p)}")
    return "; ".join(parts)


def _pooled(p: PlanSpec) -> str:
    """'the mean of baseline and baseline-aa, two starts of the same configuration'."""
    repeats: dict[str, list[str]] = {}
    for arm in p.arms:
        if arm.aa_of is not None:
            repeats.setdefault(arm.aa_of, []).append(arm.name)
    groups = [[base, *names] for base, names in repeats.items()]
    if not groups:
        return "the baseline alone (the plan names no A/A repeat)"
    means = "; ".join(f"the mean of {f.join(g)}" for g in groups)
    starts = "two starts" if all(len(g) == 2 for g in groups) else "starts"
    return f"{means}, {starts} of the same configuration"


def futility(c: Comparison) -> str:
    """'stopped at look 1 for futility: +10% unlikely (one-sided p = 0.004)' for a comparison
    the adaptive design stopped for futility; '' for any other."""
    s = c.stopping
    if s is None or not s.futile or s.target is None:
        return ""
    p = f.pvalue(s.futility_p)
    p = f"< {p[1:]}" if p.startswith("<") else f"= {p}"
    return (
        f"stopped at look {s.look_number} for futility: +{f.pct(s.target, 0)} unlikely "
        f"(one-sided p {p})"
    )


def _restarts(a: Analysis, t: TimePlan | None) -> str:
    """Restarts each arm contributed ('baseline 8; ngram-k3 4 (stopped at look 1 (WIN))'),
    or one number when every arm got the same."""
    counts: dict[str, int] = dict(t.restarts) if t is not None else {}
    stopped = t.stopped if t is not None else {}
    if not counts:
        for c in a.comparisons:
            counts.setdefault(c.baseline, c.n_restarts_baseline)
            counts.setdefault(c.arm, c.n_restarts_arm)
    if not counts:
        return f.MISSING
    if len(set(counts.values())) == 1 and not stopped:
        return f"{next(iter(counts.values()))} for every arm"
    parts = []
    for arm, n in counts.items():
        why = f" ({stopped[arm]})" if arm in stopped else ""
        parts.append(f"{arm} {n}{why}")
    return "; ".join(parts)
