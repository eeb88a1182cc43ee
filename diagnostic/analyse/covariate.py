"""Restart means adjusted by an arm-free covariate (issue 45; docs/statistics.md "Covariate
adjustment"), before any comparison: the same decision code then takes raw or adjusted means.

Pre-declared, CUPED-style: per workload and level, the log restart means are regressed on the
covariate with one slope pooled across arms from within-arm deviations (an arm's own level
never enters the slope), and each restart's log mean loses slope × (its covariate − the mean
covariate of every run). A comparison's ratio then moves only by slope × the covariate's
difference between its two sides, and its interval narrows by what the covariate explains.

The covariate must not be moved by the arm, or the adjustment takes away part of the arm's own
effect. It is measured where no arm can move it (the quiet window before each run's first
request, measure/telemetry/quiet.py), and checked: the covariate's difference between each arm
and its reference is tested (paired on blocks, else Welch), Bonferroni over the pairs at
family-wise BALANCE_ALPHA; one difference past its level withholds the adjustment everywhere,
and the raw verdicts stand."""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from scipy import stats as sps

from diagnostic import defaults
from diagnostic.analyse.compare import decide
from diagnostic.analyse.context import Context, Key
from diagnostic.analyse.matching import all_pending
from diagnostic.bundle.store import Bundle
from diagnostic.bundle.telemetry import read_telemetry
from diagnostic.schema.analysis import Comparison
from diagnostic.schema.bundle import Design, RunInfo
from diagnostic.schema.covariate import (
    CovariateAnalysis,
    CovariateBalance,
    CovariateEstimate,
    CovariateSlope,
)
from diagnostic.schema.telemetry import steal_reported

__all__ = [
    "BALANCE_ALPHA",
    "Covariate",
    "Fit",
    "adjust_by_covariate",
    "arm_shifts",
    "balance_test",
    "failing",
    "pooled_fit",
    "run_covariate",
    "telemetry_covariate",
]

BALANCE_ALPHA = defaults.COVARIATE_BALANCE_ALPHA
# A slope is fitted only on a covariate with 3 levels or more, values within 5% of its range
# being one level: two levels (a tick of steal or none) fit noise, not the host.
MIN_LEVELS = 3
LEVEL_TOLERANCE = 0.05
RunKey = tuple[str, int]  # (arm, restart)


@dataclass(frozen=True)
class Covariate:
    """One value per run, and what it is."""

    name: str
    description: str
    arm_free: bool  # measured where no arm can move it: only such a covariate adjusts verdicts
    values: Mapping[RunKey, float]


@dataclass(frozen=True)
class Fit:
    """The pooled within-arm slope and the within-arm spread before and after it."""

    slope: float
    points: int
    sd_raw: float
    sd_adjusted: float


def run_covariate(runs: Sequence[RunInfo]) -> Covariate | None:
    """The pre-declared covariate of a bundle: the quiet window's VM steal (cores) where the
    host reports steal, else the share of wall-clock its spinning probe lost; None unless every
    run has a quiet window (a bundle recorded before them, or without local telemetry)."""
    windows = {(r.arm, r.restart): r.quiet for r in runs}
    if not windows or any(w is None for w in windows.values()):
        return None
    quiet = {k: w for k, w in windows.items() if w is not None}
    why = steal_reported(list(quiet.values()))
    before = "in the quiet window before each run's first request"
    if why is None:
        return Covariate(
            "quiet.steal_cores",
            f"VM steal in cores {before}",
            True,
            {k: w.steal_cores or 0.0 for k, w in quiet.items()},
        )
    return Covariate(
        "quiet.lost_share",
        f"the share of wall-clock a spinning probe thread lost {before} (steal itself is not "
        f"available: {why})",
        True,
        {k: 1.0 - w.spin_share for k, w in quiet.items()},
    )


def telemetry_covariate(bundle: Bundle, runs: Sequence[RunInfo], column: str) -> Covariate | None:
    """A study covariate, never used for a verdict: the median of one host telemetry column
    over each run (steal_pct: the host's steal counter during the run, which a busier server
    moves). None unless every run recorded it."""
    values: dict[RunKey, float] = {}
    for run in runs:
        frame = read_telemetry(bundle.run_dir(run.arm, run.restart), run).get("host")
        if frame is None or column not in frame or frame[column].dropna().empty:
            return None
        values[(run.arm, run.restart)] = float(frame[column].dropna().median())
    if not values:
        return None
    return Covariate(
        f"host.{column}", f"the host's {column} during the run (median)", False, values
    )


def pooled_fit(arms: Sequence[Sequence[tuple[float, float]]]) -> Fit | None:
    """The slope of y on x pooled from within-arm deviations, over arms given as (y, x)
    points (an arm with one point adds nothing); None when x does not vary within any arm or
    no degree of freedom is left for the spread after it."""
    sxx = sxy = syy = 0.0
    points = dof = 0
    for pts in arms:
        if len(pts) < 2:
            continue
        my = statistics.fmean(y for y, _ in pts)
        mx = statistics.fmean(x for _, x in pts)
        sxx += sum((x - mx) ** 2 for _, x in pts)
        sxy += sum((x - mx) * (y - my) for y, x in pts)
        syy += sum((y - my) ** 2 for y, _ in pts)
        points += len(pts)
        dof += len(pts) - 1
    if sxx <= 0 or dof < 2 or _levels([x for pts in arms for _, x in pts]) < MIN_LEVELS:
        return None
    slope = sxy / sxx
    residual = max(0.0, syy - slope * sxy)
    return Fit(slope, points, math.sqrt(syy / dof), math.sqrt(residual / (dof - 1)))


def _levels(xs: Sequence[float]) -> int:
    """How many distinct values the covariate takes, values closer than LEVEL_TOLERANCE of its
    range counted as one (a steal counter read in whole ticks: one tick or none in every run
    is two levels, float noise apart)."""
    if not xs:
        return 0
    tolerance = LEVEL_TOLERANCE * (max(xs) - min(xs))
    levels, last = 0, -math.inf
    for x in sorted(xs):
        if x - last > tolerance:
            levels, last = levels + 1, x
    return levels


def balance_test(
    arm: Mapping[int, float], ref: Mapping[int, float], *, paired: bool
) -> tuple[float, float | None, int]:
    """The covariate's mean difference arm − reference, its two-sided p-value and the pairs
    (paired: values by block, on the blocks both have) or runs (Welch: values by restart) it
    rests on; p is None with fewer than 2 a side, or with no spread at all."""
    if paired:
        common = sorted(set(arm) & set(ref))
        diffs = [arm[b] - ref[b] for b in common]
        if len(diffs) < 2:
            return (statistics.fmean(diffs) if diffs else 0.0), None, len(diffs)
        if statistics.pstdev(diffs) == 0:
            return statistics.fmean(diffs), None, len(diffs)
        return statistics.fmean(diffs), float(sps.ttest_1samp(diffs, 0.0).pvalue), len(diffs)
    a, b = list(arm.values()), list(ref.values())
    n = len(a) + len(b)
    diff = (statistics.fmean(a) - statistics.fmean(b)) if a and b else 0.0
    if len(a) < 2 or len(b) < 2 or (statistics.pstdev(a) == 0 and statistics.pstdev(b) == 0):
        return diff, None, n
    return diff, float(sps.ttest_ind(a, b, equal_var=False).pvalue), n


def adjust_by_covariate(
    ctx: Context, *, delta: float, design: Design, covariate: Covariate | None = None
) -> tuple[Context, CovariateAnalysis | None]:
    """The context the comparisons are decided on (adjusted when the covariate is arm-free,
    fitted, and balanced; else as measured) and what the adjustment found; None when the
    bundle has no covariate (the analysis stays as it was before issue 45)."""
    cov = covariate if covariate is not None else run_covariate(ctx.loaded.runs)
    if cov is None:
        return ctx, None
    shifts, slopes = _shifts(ctx, cov)
    adjusted = replace(ctx, shifts=shifts)
    raw = decide(all_pending(ctx), delta=delta, design=design)
    adj = decide(all_pending(adjusted), delta=delta, design=design)
    pairs = sorted({(c.arm, c.baseline) for c in raw if not c.derived})
    balance = [_balance(ctx, cov, arm, ref) for arm, ref in pairs]
    failed, each = failing(balance)
    tested = [b for b in balance if b.p_value is not None]
    gains = bool(slopes) and all(s.sd_adjusted < s.sd_raw for s in slopes)
    applied = cov.arm_free and gains and bool(tested) and not failed
    analysis = CovariateAnalysis(
        covariate=cov.name,
        description=cov.description,
        arm_free=cov.arm_free,
        runs=len(cov.values),
        balance_alpha=BALANCE_ALPHA,
        balance=balance,
        balanced=bool(tested) and not failed,
        slopes=slopes,
        applied=applied,
        why=_why(cov, slopes, tested, failed, each),
        estimates=[_estimate(r, a) for r, a in zip(raw, adj, strict=True)],
    )
    return (adjusted if applied else ctx), analysis


def arm_shifts(
    points: Mapping[str, Mapping[int, tuple[float, float]]],
    folds: Mapping[str, Mapping[int, int]] | None = None,
) -> tuple[Fit, dict[str, dict[int, float]]] | None:
    """From each arm's (log restart mean, covariate) by restart: the pooled fit and what each
    restart's log mean loses, slope × (its covariate − the mean over every run); None when
    no slope can be fitted.

    Cross-fitted: the slope a restart is shifted with is fitted without the runs of its own
    fold (its block, by `folds`; else its restart index), so that no restart's own noise
    enters the slope that adjusts it and the spread left among the adjusted means is not
    understated (a slope fitted on all runs would take a degree of freedom the intervals do
    not know of). A fold whose leave-out fit fails takes the slope of every run."""
    fit = pooled_fit([list(p.values()) for p in points.values()])
    if fit is None:
        return None
    fold = {(a, r): (folds or {}).get(a, {}).get(r, r) for a, p in points.items() for r in p}
    slopes = {}
    for f in set(fold.values()):
        kept = [[v for r, v in p.items() if fold[(a, r)] != f] for a, p in points.items()]
        out = pooled_fit(kept)
        slopes[f] = out.slope if out is not None else fit.slope
    mean_x = statistics.fmean(x for p in points.values() for _, x in p.values())
    shifts = {
        a: {r: slopes[fold[(a, r)]] * (x - mean_x) for r, (_, x) in p.items()}
        for a, p in points.items()
    }
    return fit, shifts


def failing(
    balance: Sequence[CovariateBalance], alpha: float = BALANCE_ALPHA
) -> tuple[list[CovariateBalance], float]:
    """The pairs whose difference is past its level (Bonferroni over the pairs at family-wise
    `alpha`), and that level."""
    each = alpha / max(1, len(balance))
    return [b for b in balance if b.p_value is not None and b.p_value < each], each


def _shifts(
    ctx: Context, cov: Covariate
) -> tuple[dict[Key, dict[int, float]], list[CovariateSlope]]:
    """Per workload key and level: the pooled slope and each restart's shift."""
    shifts: dict[Key, dict[int, float]] = {}
    slopes = []
    for level in ctx.levels:
        for workload in ctx.keys:
            sides = {arm: ctx.side(arm, workload, level) for arm in ctx.arms}
            points = {
                arm: {
                    r: (y, cov.values[(arm, r)])
                    for r, y in side.log_means().items()
                    if (arm, r) in cov.values
                }
                for arm, side in sides.items()
            }
            found = arm_shifts(points, {arm: side.blocks() for arm, side in sides.items()})
            if found is None:
                continue
            fit, per_arm = found
            shifts |= {(arm, workload, level): v for arm, v in per_arm.items()}
            slopes.append(
                CovariateSlope(
                    workload=workload,
                    concurrency=level,
                    slope=fit.slope,
                    restarts=fit.points,
                    sd_raw=fit.sd_raw,
                    sd_adjusted=fit.sd_adjusted,
                )
            )
    return shifts, slopes


def _balance(ctx: Context, cov: Covariate, arm: str, ref: str) -> CovariateBalance:
    """One pair's balance, on the runs the analysis kept: by block when the schedule was
    blocked and both arms' runs carry blocks, else by restart."""
    runs = {
        name: [r for r in ctx.loaded.runs if r.arm == name and (name, r.restart) in cov.values]
        for name in (arm, ref)
    }
    blocked = ctx.bundle.manifest.plan.order == "blocks" and all(
        r.block is not None for side in runs.values() for r in side
    )

    def values(name: str) -> dict[int, float]:
        out: dict[int, list[float]] = {}
        for r in runs[name]:
            key = r.block if blocked and r.block is not None else r.restart
            out.setdefault(key, []).append(cov.values[(name, r.restart)])
        return {k: statistics.fmean(v) for k, v in out.items()}

    diff, p, n = balance_test(values(arm), values(ref), paired=blocked)
    return CovariateBalance(
        arm=arm,
        reference=ref,
        difference=diff,
        p_value=p,
        method="paired-blocks" if blocked else "welch",
        runs=n,
    )


def _why(
    cov: Covariate,
    slopes: Sequence[CovariateSlope],
    tested: Sequence[CovariateBalance],
    failed: Sequence[CovariateBalance],
    each: float,
) -> str:
    if not cov.arm_free:
        return f"{cov.name} may be moved by the arm: a study, never used for a verdict"
    if not slopes:
        return (
            f"{cov.name} did not vary within the arms over {MIN_LEVELS} levels or more (a tick "
            "of steal or none is noise): nothing to adjust by"
        )
    if any(s.sd_adjusted >= s.sd_raw for s in slopes):
        worse = next(s for s in slopes if s.sd_adjusted >= s.sd_raw)
        return (
            f"{cov.name} explains none of the spread between restart means ({worse.workload}: "
            f"SD {worse.sd_raw:.1%} raw, {worse.sd_adjusted:.1%} adjusted): nothing to gain"
        )
    if not tested:
        return "the balance across arms could not be tested (fewer than 2 runs a side)"
    if failed:
        worst = min(failed, key=lambda b: b.p_value or 1.0)
        return (
            f"{worst.arm} moves {cov.name} against {worst.reference} (difference "
            f"{worst.difference:.3g}, p = {worst.p_value:.2g} < {each:.2g}), so the adjustment "
            "would take away part of its effect: the raw verdicts stand"
        )
    return (
        f"no arm moves {cov.name} against its reference (each p ≥ {each:.2g}, Bonferroni "
        f"over {len(tested)} pairs at {BALANCE_ALPHA:g}): the verdicts use the adjusted means"
    )


def _estimate(raw: Comparison, adj: Comparison) -> CovariateEstimate:
    return CovariateEstimate(
        arm=raw.arm,
        baseline=raw.baseline,
        workload=raw.workload,
        concurrency=raw.concurrency,
        kind=raw.kind,
        raw_ratio=raw.ratio,
        raw_low=raw.ci_low,
        raw_high=raw.ci_high,
        raw_verdict=raw.verdict,
        adjusted_ratio=adj.ratio,
        adjusted_low=adj.ci_low,
        adjusted_high=adj.ci_high,
        adjusted_verdict=adj.verdict,
    )
