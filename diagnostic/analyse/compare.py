"""Speedup ratios vs the baseline: restart-aware intervals, verdicts, BH, Pocock stopping."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from diagnostic.analyse import stats
from diagnostic.analyse.requests import Sample
from diagnostic.schema.analysis import (
    WITHHELD_LABEL,
    WITHIN_PROCESS_LABEL,
    Comparison,
    IntervalMethod,
    StoppingStatus,
)
from diagnostic.schema.bundle import PlanSpec

__all__ = [
    "DEFAULT_LOOKS",
    "Side",
    "bundle_looks",
    "finish_family",
    "ratio_ci",
    "start_comparison",
]

DEFAULT_LOOKS = tuple(stats.planned_looks(12))
"""Planned looks (restarts or blocks per arm) when the bundle does not give its maximum:
those of a 12-block plan, 4, 8, 12 (stats.planned_looks)."""
ALPHA = 0.05


@dataclass(frozen=True)
class Side:
    """One arm's samples on one workload and level, grouped by restart (send order)."""

    name: str
    groups: dict[int, list[Sample]]

    def log_means(self) -> dict[int, float]:
        """log of each restart's mean decode tok/s, by restart."""
        return {
            r: math.log(statistics.fmean(s.decode_tps for s in g)) for r, g in self.groups.items()
        }

    def blocks(self) -> dict[int, int]:
        """restart → block, for restarts that carry a block number."""
        return {r: g[0].block for r, g in self.groups.items() if g and g[0].block is not None}


def bundle_looks(plan: PlanSpec) -> tuple[int, ...]:
    """The looks `sweep --adaptive` plans for this bundle: equally spaced up to the plan's
    restarts for a blocked schedule (sweep.adaptive_looks), else DEFAULT_LOOKS."""
    return tuple(stats.planned_looks(plan.restarts)) if plan.order == "blocks" else DEFAULT_LOOKS


@dataclass(frozen=True)
class RatioResult:
    """A ratio interval and how it was formed."""

    ci: stats.RatioCI
    method: IntervalMethod
    n_now: int


def _paired_logs(arm: Side, base: Side) -> tuple[list[float], list[float]] | None:
    a_blocks, b_blocks = arm.blocks(), base.blocks()
    a_by_block = {b: r for r, b in a_blocks.items()}
    b_by_block = {b: r for r, b in b_blocks.items()}
    common = sorted(set(a_by_block) & set(b_by_block))
    if len(common) < 2:
        return None
    a_log, b_log = arm.log_means(), base.log_means()
    return [a_log[a_by_block[k]] for k in common], [b_log[b_by_block[k]] for k in common]


def ratio_ci(arm: Side, base: Side, *, blocked: bool, level: float = 0.95) -> RatioResult:
    """Ratio of geometric means of restart means with its interval: paired on blocks when the
    schedule was blocked, Welch on log restart means otherwise; with < 2 restarts on a side,
    Welch on log request values of the one process (within-process only)."""
    if len(arm.groups) < 2 or len(base.groups) < 2:
        a = [math.log(s.decode_tps) for g in arm.groups.values() for s in g]
        b = [math.log(s.decode_tps) for g in base.groups.values() for s in g]
        return RatioResult(stats.welch_ratio_ci(a, b, level), "within-process", 1)
    pairs = _paired_logs(arm, base) if blocked else None
    if pairs is not None:
        return RatioResult(
            stats.paired_ratio_ci(*pairs, level), "paired-log-block-ratios", len(pairs[0])
        )
    a_means, b_means = list(arm.log_means().values()), list(base.log_means().values())
    n_now = min(len(a_means), len(b_means))
    return RatioResult(
        stats.welch_ratio_ci(a_means, b_means, level), "welch-log-restart-means", n_now
    )


@dataclass
class Pending:
    """A comparison whose 95% interval is known, waiting for its family's adjustment."""

    arm: Side
    base: Side
    workload: str
    concurrency: int
    kind: str
    k: int | None
    blocked: bool
    result: RatioResult


def start_comparison(
    arm: Side,
    base: Side,
    workload: str,
    concurrency: int,
    *,
    kind: str,
    k: int | None,
    blocked: bool,
) -> Pending:
    """First pass: the 95% ratio interval of one arm vs the baseline."""
    return Pending(
        arm, base, workload, concurrency, kind, k, blocked, ratio_ci(arm, base, blocked=blocked)
    )


def finish_family(
    family: Sequence[Pending], *, delta: float, looks: Sequence[int] = DEFAULT_LOOKS
) -> list[Comparison]:
    """Second pass over comparisons sharing a baseline, workload and level: BH-adjusted
    p-values, verdicts on Bonferroni-widened intervals (level 1 − α/m), stopping status."""
    m = len(family)
    p_raw = [p.result.ci.p_value for p in family]
    present = [p for p in p_raw if p is not None]
    adjusted = iter(stats.bh_adjust(present))
    p_adj = [next(adjusted) if p is not None else None for p in p_raw]
    return [_finish(p, padj, m, delta, looks) for p, padj in zip(family, p_adj, strict=True)]


def _finish(
    p: Pending, p_adj: float | None, m: int, delta: float, looks: Sequence[int]
) -> Comparison:
    level = 1.0 - ALPHA / m
    vci = p.result.ci if m == 1 else ratio_ci(p.arm, p.base, blocked=p.blocked, level=level).ci
    decision = stats.verdict(vci.low, vci.high, delta)
    ci = p.result.ci
    within = p.result.method == "within-process"
    c = Comparison(
        arm=p.arm.name,
        baseline=p.base.name,
        workload=p.workload,
        concurrency=p.concurrency,
        kind="aa" if p.kind == "aa" else "spec",
        k=p.k,
        ratio=ci.ratio,
        ci_low=ci.low,
        ci_high=ci.high,
        verdict=decision,
        verdict_ci_low=vci.low,
        verdict_ci_high=vci.high,
        verdict_level=level,
        interval_method=p.result.method,
        paired=p.result.method == "paired-log-block-ratios",
        p_value=ci.p_value,
        p_adjusted=p_adj,
        family_size=m,
        n_restarts_arm=len(p.arm.groups),
        n_restarts_baseline=len(p.base.groups),
        within_process_only=within,
        label=WITHIN_PROCESS_LABEL if within else None,
        more_restarts_needed=_more_restarts(p.result, decision, delta, level),
        stopping=None if within else _stopping(p, m, delta, looks),
    )
    if c.verdict_withheld:
        # One restart against a side whose restarts vary: the request-level interval omits
        # the restart variance the bundle shows elsewhere, so it must not decide anything.
        c.verdict, c.label = "INCONCLUSIVE", WITHHELD_LABEL
    return c


def _more_restarts(result: RatioResult, decision: str, delta: float, level: float) -> int | None:
    """Restarts per arm (in all, not added) likely to decide an INCONCLUSIVE comparison."""
    ci = result.ci
    if decision != "INCONCLUSIVE" or result.method == "within-process" or not ci.se_log:
        return None
    return stats.restarts_to_decide(ci.se_log, result.n_now, ci.ratio, delta, level=level)


def _stopping(p: Pending, m: int, delta: float, looks: Sequence[int]) -> StoppingStatus:
    n_now = p.result.n_now
    # Pocock: one level at every look, calibrated for t intervals (and Bonferroni over m).
    alpha = stats.sequential_alpha(looks, ALPHA / m)
    look = stats.look_number(n_now, looks)
    status = StoppingStatus(
        planned_looks=list(looks), n_now=n_now, look_number=look, per_look_alpha=alpha
    )
    if look is None and n_now < looks[-1]:
        upcoming = next(n for n in looks if n > n_now)
        status.reason = f"between looks: next look at {upcoming} restarts per arm"
        return status
    ci = ratio_ci(p.arm, p.base, blocked=p.blocked, level=1.0 - alpha).ci
    status.ci_low, status.ci_high = ci.low, ci.high
    status.verdict_at_look = stats.verdict(ci.low, ci.high, delta)
    decided = status.verdict_at_look != "INCONCLUSIVE"
    last = look is None or look == len(looks)
    status.can_stop = decided or last
    status.reason = (
        f"decided at look {look}: {status.verdict_at_look}"
        if decided and look
        else "past the last planned look"
        if look is None
        else "last planned look reached: stop, INCONCLUSIVE"
        if last
        else f"look {look} does not decide: continue to {looks[look]}"
    )
    return status
