"""Speedup ratios vs a baseline: one interval per comparison — the one that decides, at the
level of the bundle's design (STATISTICS.md "Verdicts")."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field

from diagnostic import defaults
from diagnostic.analyse import stats
from diagnostic.analyse.requests import Sample
from diagnostic.analyse.sequential import sequential_alpha
from diagnostic.schema.analysis import (
    WITHIN_PROCESS_LABEL,
    Comparison,
    ComparisonKind,
    IntervalMethod,
    StoppingStatus,
)
from diagnostic.schema.bundle import Design

__all__ = ["Pending", "Side", "decide", "ratio_ci", "start_comparison"]

ALPHA = 0.05


@dataclass(frozen=True)
class Side:
    """One arm's samples on one workload and level, grouped by restart (send order)."""

    name: str
    groups: dict[int, list[Sample]]
    pooled: dict[str, int] = field(default_factory=dict)  # A/A repeats in the groups: restarts

    @property
    def own_restarts(self) -> int:
        """Restarts of the arm itself, its pooled repeats' left out."""
        return len(self.groups) - sum(self.pooled.values())

    def log_means(self) -> dict[int, float]:
        """log of each restart's mean decode tok/s, by restart."""
        return {
            r: math.log(statistics.fmean(s.decode_tps for s in g)) for r, g in self.groups.items()
        }

    def values(self) -> list[float]:
        """Decode tok/s of every request, all restarts pooled."""
        return [s.decode_tps for g in self.groups.values() for s in g]

    def blocks(self) -> dict[int, int]:
        """restart → block, for restarts that carry a block number."""
        return {r: g[0].block for r, g in self.groups.items() if g and g[0].block is not None}

    def block_logs(self) -> dict[int, float]:
        """block → log mean of its restart: the mean of their log means when a block holds
        several (a baseline joined by its A/A repeat)."""
        logs = self.log_means()
        by_block: dict[int, list[float]] = {}
        for r, b in self.blocks().items():
            by_block.setdefault(b, []).append(logs[r])
        return {b: statistics.fmean(v) for b, v in by_block.items()}


@dataclass(frozen=True)
class RatioResult:
    """A ratio interval and how it was formed."""

    ci: stats.RatioCI
    method: IntervalMethod
    n_now: int


def _paired_logs(arm: Side, base: Side) -> tuple[list[float], list[float]] | None:
    a_log, b_log = arm.block_logs(), base.block_logs()
    common = sorted(set(a_log) & set(b_log))
    if len(common) < 2:
        return None
    return [a_log[k] for k in common], [b_log[k] for k in common]


def ratio_ci(arm: Side, base: Side, *, blocked: bool, level: float = 0.95) -> RatioResult:
    """Ratio of geometric means of restart means with its interval: paired on blocks when the
    schedule was blocked, Welch on log restart means otherwise; with one restart on a side,
    the ratio of the two sides' request means with a delta-method interval (within-process:
    restart variance not measured)."""
    if len(arm.groups) < 2 or len(base.groups) < 2:
        return RatioResult(
            stats.means_ratio_ci(arm.values(), base.values(), level), "within-process", 1
        )
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
    """A comparison whose sides are known, waiting for its family (the level it decides at)."""

    arm: Side
    base: Side
    workload: str
    concurrency: int
    kind: ComparisonKind
    k: int | None
    blocked: bool
    matched: bool
    differs: str | None
    result: RatioResult

    @property
    def in_family(self) -> bool:
        """A speculative comparison with restarts on both sides: it gets a verdict that
        shares the bundle's 5% error rate with the others."""
        return self.kind == "spec" and self.result.method != "within-process"


def start_comparison(
    arm: Side,
    base: Side,
    workload: str,
    concurrency: int,
    *,
    kind: ComparisonKind,
    k: int | None,
    blocked: bool,
    matched: bool = True,
    differs: str | None = None,
) -> Pending:
    """First pass: the sides and the 95% interval (p-value, SE) of one comparison."""
    result = ratio_ci(arm, base, blocked=blocked)
    return Pending(arm, base, workload, concurrency, kind, k, blocked, matched, differs, result)


def decide(pending: Sequence[Pending], *, delta: float, design: Design) -> list[Comparison]:
    """Every comparison's deciding interval and verdict. The family is every speculative
    comparison with restarts on both sides (all arms, workloads and levels): their intervals
    are simultaneous at 95% (Bonferroni, level 1 − α/m), and under an adaptive design at the
    Pocock per-look level calibrated for t intervals. A/A and configuration comparisons
    decide at 95% alone; one restart on a side gets no verdict."""
    family = [p for p in pending if p.in_family]
    m = len(family)
    present = [p.result.ci.p_value for p in family if p.result.ci.p_value is not None]
    adjusted = iter(stats.bh_adjust(present))
    p_adj = {id(p): next(adjusted) for p in family if p.result.ci.p_value is not None}
    return [_finish(p, p_adj.get(id(p)), m, delta, design) for p in pending]


def _level(p: Pending, m: int, design: Design) -> tuple[float, str, StoppingStatus | None]:
    """The deciding level, its label, and (adaptive design) the stopping status."""
    if not p.in_family:
        return 1.0 - ALPHA, "95% CI", None
    alpha = design.alpha / m
    over = f" over {m} comparisons" if m > 1 else ""
    if design.kind != "adaptive" or not design.looks:
        level = f"{1 - design.alpha:.0%} CI"
        return 1.0 - alpha, f"simultaneous {level}{over}" if m > 1 else level, None
    looks = design.looks
    alpha_look = sequential_alpha(looks, alpha)
    reached = [i for i, n in enumerate(looks, 1) if n <= p.result.n_now]
    look = reached[-1] if reached else 1
    label = f"Pocock-adjusted {1 - design.alpha:.0%} CI, look {look} of {len(looks)}"
    label += f", simultaneous{over}" if m > 1 else ""
    futility = stats.futility_p(p.result.ci, design.target) if design.target is not None else None
    status = StoppingStatus(
        planned_looks=list(looks),
        n_now=p.result.n_now,
        look_number=look if reached else None,
        per_look_alpha=alpha_look,
        target=design.target,
        futility_p=futility,
    )
    return 1.0 - alpha_look, label, status


def _finish(p: Pending, p_adj: float | None, m: int, delta: float, design: Design) -> Comparison:
    level, label, stopping = _level(p, m, design)
    ci = (
        p.result.ci if level == 0.95 else ratio_ci(p.arm, p.base, blocked=p.blocked, level=level).ci
    )
    within = p.result.method == "within-process"
    verdict = "INCONCLUSIVE" if within else stats.verdict(ci.low, ci.high, delta)
    c = Comparison(
        arm=p.arm.name,
        baseline=p.base.name,
        workload=p.workload,
        concurrency=p.concurrency,
        kind=p.kind,
        matched=p.matched,
        differs=p.differs,
        k=p.k,
        ratio=ci.ratio,
        ci_low=ci.low,
        ci_high=ci.high,
        ci_level=level,
        ci_label=label,
        verdict=verdict,
        withheld=within,
        lean=_lean(ci.ratio) if verdict == "INCONCLUSIVE" else None,
        interval_method=p.result.method,
        paired=p.result.method == "paired-log-block-ratios",
        p_value=p.result.ci.p_value,
        p_adjusted=p_adj,
        family_size=m if p.in_family else 1,
        n_restarts_arm=len(p.arm.groups),
        n_restarts_baseline=p.base.own_restarts,
        pooled_with=", ".join(p.base.pooled) or None,
        within_process_only=within,
        label=WITHIN_PROCESS_LABEL if within else None,
        more_restarts_needed=_more_restarts(p.result, verdict, delta, level, within),
    )
    if stopping is not None:
        c.stopping = _stopping(stopping, verdict, design.futility_alpha)
    return c


def _lean(ratio: float) -> str | None:
    return "faster" if ratio > 1 else "slower" if ratio < 1 else None


def _more_restarts(
    result: RatioResult, verdict: str, delta: float, level: float, within: bool
) -> int | None:
    """Restarts per arm (in all, not added) likely to decide an INCONCLUSIVE comparison; with
    one restart on a side, the floor a verdict needs."""
    if within:
        return defaults.MIN_RESTARTS
    ci = result.ci
    if verdict != "INCONCLUSIVE" or not ci.se_log:
        return None
    return stats.restarts_to_decide(ci.se_log, result.n_now, ci.ratio, delta, level=level)


def _stopping(status: StoppingStatus, verdict: str, futility_alpha: float) -> StoppingStatus:
    """Whether the comparison may stop at this look: decided (WIN, LOSS, EQUIVALENT), the
    last look, or futile — undecided at an interim look while a one-sided t test rejects the
    target speedup (non-binding: it only ever ends a comparison INCONCLUSIVE)."""
    looks, look = status.planned_looks, status.look_number
    decided = verdict != "INCONCLUSIVE"
    last = status.n_now >= looks[-1]
    p = status.futility_p
    interim = look is not None and not decided and not last
    status.futile = interim and p is not None and p < futility_alpha
    status.verdict_at_look = verdict  # type: ignore[assignment]
    status.can_stop = look is not None and (decided or last or status.futile)
    if look is None:
        status.reason = f"before the first look: next look at {looks[0]} restarts per arm"
    elif decided:
        status.reason = f"decided at look {look}: {verdict}"
    elif last:
        status.reason = "last planned look reached: stop, INCONCLUSIVE"
    elif status.futile:
        status.reason = (
            f"futility stop at look {look}: one-sided p = {p:.2g} < {futility_alpha:g} against "
            f"a speedup of {status.target:+.0%} (the plan's target); stop, INCONCLUSIVE"
        )
    else:
        status.reason = f"look {look} does not decide: continue to {looks[look]}"
    return status
