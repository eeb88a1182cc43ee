"""Speedup ratios vs a baseline: one interval per comparison — the one that decides, at the
level of the bundle's design (docs/statistics.md "Verdicts")."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field

from diagnostic import defaults
from diagnostic.analyse import stats
from diagnostic.analyse.extension import ASSURANCE, belief, extension
from diagnostic.analyse.family import simultaneous_intervals
from diagnostic.analyse.requests import Sample
from diagnostic.analyse.sequential import sequential_alpha
from diagnostic.schema.analysis import (
    ALL_WORKLOADS,
    WITHIN_PROCESS_LABEL,
    Comparison,
    ComparisonKind,
    ExtensionPoint,
    IntervalMethod,
    Outlook,
    StoppingStatus,
)
from diagnostic.schema.bundle import Design

__all__ = ["Pending", "Side", "decide", "decide_apart", "ratio_ci", "start_comparison"]

ALPHA = 0.05


@dataclass(frozen=True)
class Side:
    """One arm's samples on one workload and level, grouped by restart (send order)."""

    name: str
    groups: dict[int, list[Sample]]
    pooled: dict[str, int] = field(default_factory=dict)  # A/A repeats in the groups: restarts
    # restart → what the covariate adjustment takes off its log mean (covariate.py); empty: raw
    shift: dict[int, float] = field(default_factory=dict)

    @property
    def own_restarts(self) -> int:
        """Restarts of the arm itself, its pooled repeats' left out."""
        return len(self.groups) - sum(self.pooled.values())

    def log_means(self) -> dict[int, float]:
        """log of each restart's mean decode tok/s, by restart (less its covariate shift)."""
        return {
            r: math.log(statistics.fmean(s.decode_tps for s in g)) - self.shift.get(r, 0.0)
            for r, g in self.groups.items()
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
    def derived(self) -> bool:
        """A row pooled over every workload: shown, labelled, never in the family."""
        return self.workload == ALL_WORKLOADS

    @property
    def withheld(self) -> bool:
        """No verdict: fewer than MIN_RESTARTS restarts on a side (one: within-process)."""
        own = min(len(self.arm.groups), self.base.own_restarts)
        return self.result.method == "within-process" or own < defaults.MIN_RESTARTS

    @property
    def in_family(self) -> bool:
        """A declared speculative comparison (arm × workload × level) with enough restarts
        for a verdict: the family whose verdicts share the bundle's 5% error rate."""
        return self.kind == "spec" and not self.derived and not self.withheld

    def block_diffs(self, before: int | None = None) -> dict[int, float]:
        """log(arm) − log(reference) per block both sides have (blocks < `before` when
        given); empty unless the interval is paired on blocks."""
        if self.result.method != "paired-log-block-ratios":
            return {}
        a, b = self.arm.block_logs(), self.base.block_logs()
        both = sorted(set(a) & set(b))
        return {k: a[k] - b[k] for k in both if before is None or k < before}


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


@dataclass(frozen=True)
class Deciding:
    """The interval a family member decides with, its own level and its label."""

    ci: stats.RatioCI
    level: float
    label: str
    size: int  # comparisons in the family it is simultaneous over


def decide(pending: Sequence[Pending], *, delta: float, design: Design) -> list[Comparison]:
    """Every comparison's deciding interval and verdict. The family is the plan's declared
    speculative comparisons (arms × workloads × levels) with ≥ 3 restarts a side; their
    intervals are simultaneous at 95% — Šidák's level over each member's own block
    variance (family.py), Bonferroni for members not paired on ≥ 3 blocks — and,
    under an adaptive design, at the Pocock per-look level calibrated for t intervals.
    The A/A comparisons (the design's check, one per workload and level) are simultaneous at
    95% among themselves, so that a bundle without drift fails the check 5% of the time, not
    1 − 0.95^k with k workloads; configuration comparisons decide at 95% alone (a table
    row); derived rows and withheld ones show a 95% interval and get no verdict."""
    family = [p for p in pending if p.in_family]
    present = [p.result.ci.p_value for p in family if p.result.ci.p_value is not None]
    adjusted = iter(stats.bh_adjust(present))
    p_adj = {id(p): next(adjusted) for p in family if p.result.ci.p_value is not None}
    # One planned look is a fixed design: decided once at α, labelled as such (no "look 1 of 1").
    looks = design.looks if design.kind == "adaptive" and len(design.looks) > 1 else []
    deciding = _by_look(family, design, looks) if looks else _family(family, design.alpha, None)
    checks = [
        p
        for p in pending
        if p.kind == "aa" and not p.derived and p.result.method != "within-process"
    ]
    deciding |= _family(checks, design.alpha, None)
    return [_finish(p, deciding.get(id(p)), p_adj.get(id(p)), delta, design) for p in pending]


def decide_apart(pending: Sequence[Pending], *, delta: float, design: Design) -> list[Comparison]:
    """A family of its own (the before-and-after): simultaneous at the design's level over its
    members with ≥ 3 restarts a side, as the plan's family is, never Pocock-adjusted (no
    stopping rule looks at it); the pooled row shows its 95% interval and gets no verdict."""
    members = [p for p in pending if not p.derived and not p.withheld]
    deciding = _family(members, design.alpha, None)
    fixed = design.model_copy(update={"kind": "fixed"})
    return [_finish(p, deciding.get(id(p)), None, delta, fixed) for p in pending]


def _look_of(p: Pending, looks: Sequence[int]) -> int:
    """The latest planned look the comparison's restarts reach (1 before the first)."""
    return max((i for i, n in enumerate(looks, 1) if n <= p.result.n_now), default=1)


def _by_look(
    family: Sequence[Pending], design: Design, looks: Sequence[int]
) -> dict[int, Deciding]:
    """Adaptive design: each member decides at its own latest look, in the family as it
    stood there — the blocks before that look for an arm that stopped earlier (its interval
    then stays the one its look decided with), every block for the members still open."""
    alpha = sequential_alpha(looks, design.alpha)
    now = max((_look_of(p, looks) for p in family), default=1)
    out: dict[int, Deciding] = {}
    for look in sorted({_look_of(p, looks) for p in family}):
        before = looks[look - 1] if look < now else None
        at = _family(family, alpha, before, f"Pocock-adjusted 95% CI, look {look} of {len(looks)}")
        out |= {id(p): at[id(p)] for p in family if _look_of(p, looks) == look and id(p) in at}
    return out


def _family(
    family: Sequence[Pending], alpha: float, before: int | None, name: str = "95% CI"
) -> dict[int, Deciding]:
    """Simultaneous intervals at family-wise `alpha` over the members with ≥ 3 restarts a
    side (on the blocks before `before`): Šidák for those paired on ≥ 3 blocks, Bonferroni
    for the rest, α split between the two in proportion to their sizes."""
    diffs = {id(p): p.block_diffs(before) for p in family}
    paired = [p for p in family if len(diffs[id(p)]) >= defaults.MIN_RESTARTS]
    # Not paired on 3 blocks: Bonferroni on all their restarts (at an earlier look, only the
    # unpaired ones: a paired member with fewer blocks then had not reached that look).
    kept = {id(p) for p in paired}
    others = [p for p in family if id(p) not in kept and (before is None or not diffs[id(p)])]
    m = len(paired) + len(others)
    if m == 0:
        return {}
    out: dict[int, Deciding] = {}
    if paired:
        share = alpha * len(paired) / m
        intervals = simultaneous_intervals([diffs[id(p)] for p in paired], share)
        for p, iv in zip(paired, intervals, strict=True):
            ci = stats.RatioCI(
                ratio=math.exp(iv.mean),
                low=math.exp(iv.low),
                high=math.exp(iv.high),
                p_value=p.result.ci.p_value,
                se_log=iv.se,
                df=iv.df,
            )
            out[id(p)] = Deciding(ci, iv.level, _label(name, m, iv.level), m)
    for p in others:
        level = 1.0 - alpha / m
        ci = ratio_ci(p.arm, p.base, blocked=p.blocked, level=level).ci
        out[id(p)] = Deciding(ci, level, _label(name, m, level, "Bonferroni"), m)
    return out


def _label(name: str, m: int, level: float, method: str = "") -> str:
    """'95% CI'; 'simultaneous 95% CI over 6 comparisons (each 99.4%)'; 'Pocock-adjusted 95%
    CI, look 1 of 3, simultaneous over 6 comparisons (Bonferroni; each 99.71%)'."""
    if m == 1 and name == "95% CI":
        return name
    own = f"{method}; each {_pct(level)}" if method else f"each {_pct(level)}"
    if m == 1:
        return f"{name} ({_pct(level)})"
    if name == "95% CI":
        return f"simultaneous 95% CI over {m} comparisons ({own})"
    return f"{name}, simultaneous over {m} comparisons ({own})"


def _pct(level: float) -> str:
    """A level with the miss rate to two significant digits: 95%, 99.4%, 99.87%."""
    miss = (1.0 - level) * 100
    if miss <= 0:
        return "100%"
    decimals = max(0, 1 - math.floor(math.log10(miss)))
    text = f"{100 - round(miss, decimals):.{decimals}f}"
    return (text.rstrip("0").rstrip(".") if "." in text else text) + "%"


def _finish(
    p: Pending, deciding: Deciding | None, p_adj: float | None, delta: float, design: Design
) -> Comparison:
    ci = deciding.ci if deciding else p.result.ci
    level = deciding.level if deciding else 1.0 - ALPHA
    # The A/A check and a configuration's table row decide alone, at 95%.
    decides = deciding is not None or p.kind in ("aa", "config")
    withheld = p.withheld or not decides
    verdict = stats.verdict(ci.low, ci.high, delta) if not withheld else "WITHHELD"
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
        ci_label=deciding.label if deciding else "95% CI",
        verdict=verdict,
        withheld=withheld,
        derived=p.derived,
        reference_tps=_reference_tps(p),
        lean=_lean(ci.ratio) if verdict == "INCONCLUSIVE" else None,
        interval_method=p.result.method,
        paired=p.result.method == "paired-log-block-ratios",
        p_value=p.result.ci.p_value,
        p_adjusted=p_adj,
        family_size=deciding.size if deciding else 1,
        n_restarts_arm=len(p.arm.groups),
        n_restarts_baseline=p.base.own_restarts,
        pooled_with=", ".join(p.base.pooled) or None,
        within_process_only=p.result.method == "within-process",
        label=_caveat(p) if withheld else None,
    )
    if p.withheld:
        c.more_restarts_needed = defaults.MIN_RESTARTS
    elif deciding is not None and verdict == "INCONCLUSIVE":
        c.outlook = _outlook(p, ci, level, delta)
        enough = [e for e in c.outlook.extension if e.assurance >= ASSURANCE] if c.outlook else []
        c.more_restarts_needed = enough[0].restarts if enough else None
    if deciding is not None and design.kind == "adaptive" and design.looks:
        c.stopping = _stopping(p, ci, verdict, design)
    return c


def _reference_tps(p: Pending) -> float | None:
    """The reference's geometric mean decode tok/s over the blocks the ratio pairs (all its
    restarts when not paired): the figure the arm's is divided by."""
    logs = p.base.block_logs() if p.result.method == "paired-log-block-ratios" else {}
    common = set(logs) & set(p.arm.block_logs())
    values = [logs[b] for b in common] or list(p.base.log_means().values())
    return math.exp(statistics.fmean(values)) if values else None


def _caveat(p: Pending) -> str:
    """Why a comparison has no verdict."""
    if p.result.method == "within-process":
        return WITHIN_PROCESS_LABEL
    if p.withheld:
        return f"fewer than {defaults.MIN_RESTARTS} restarts on a side: no verdict"
    if p.derived:
        return "derived: every workload pooled; not one of the plan's comparisons, no verdict"
    return "not a speculative comparison of the plan: no verdict"


def _lean(ratio: float) -> str | None:
    return "faster" if ratio > 1 else "slower" if ratio < 1 else None


def _outlook(p: Pending, ci: stats.RatioCI, level: float, delta: float) -> Outlook | None:
    """The confidence distribution of an undecided member and its planned extensions."""
    if not ci.se_log or ci.df is None or ci.ratio <= 0:
        return None
    mean, n = math.log(ci.ratio), p.result.n_now
    now = belief(mean, ci.se_log, ci.df, delta)
    points = extension(mean, ci.se_log, ci.df, n, level, delta)
    return Outlook(
        p_faster=now.p_faster,
        p_slower=now.p_slower,
        low95=now.low95,
        high95=now.high95,
        extension=[ExtensionPoint(restarts=r, added=r - n, assurance=a) for r, a in points],
    )


def _stopping(p: Pending, ci: stats.RatioCI, verdict: str, design: Design) -> StoppingStatus:
    """Whether the comparison may stop at this look: decided (WIN, LOSS, EQUIVALENT), the
    last look, or futile — undecided at an interim look while a one-sided t test rejects the
    target speedup (non-binding: it only ever ends a comparison INCONCLUSIVE)."""
    looks = design.looks
    reached = [i for i, n in enumerate(looks, 1) if n <= p.result.n_now]
    look = reached[-1] if reached else None
    futility = stats.futility_p(ci, design.target) if design.target is not None else None
    status = StoppingStatus(
        planned_looks=list(looks),
        n_now=p.result.n_now,
        look_number=look,
        per_look_alpha=sequential_alpha(looks, design.alpha),
        target=design.target,
        futility_p=futility,
    )
    decided = verdict != "INCONCLUSIVE"
    last = status.n_now >= looks[-1]
    interim = look is not None and not decided and not last
    status.futile = interim and futility is not None and futility < design.futility_alpha
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
            f"futility stop at look {look}: one-sided p = {futility:.2g} < "
            f"{design.futility_alpha:g} against a speedup of {status.target:+.0%} (the plan's "
            "target); stop, INCONCLUSIVE"
        )
    else:
        status.reason = f"look {look} does not decide: continue to {looks[look]}"
    return status
