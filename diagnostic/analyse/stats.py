"""Pure statistics of docs/statistics.md: intervals, verdicts, multiplicity, planning."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt
from scipy import stats as sps

__all__ = [
    "Drift",
    "Interval",
    "MedianCI",
    "RatioCI",
    "bh_adjust",
    "drift_check",
    "futility_p",
    "means_ratio_ci",
    "median_ci",
    "paired_ratio_ci",
    "requests_per_restart",
    "restarts_for_width",
    "t_interval",
    "tukey_fences",
    "tukey_outliers",
    "verdict",
    "welch_ratio_ci",
]

VerdictName = Literal["WIN", "LOSS", "EQUIVALENT", "INCONCLUSIVE"]
Side = Literal["low", "high"]


@dataclass(frozen=True)
class Interval:
    """A point estimate with a two-sided interval (None ends when it cannot be formed)."""

    estimate: float
    low: float | None
    high: float | None
    n: int


@dataclass(frozen=True)
class MedianCI:
    """Median with its order-statistic interval and that interval's exact coverage."""

    median: float
    low: float | None
    high: float | None
    coverage: float | None


@dataclass(frozen=True)
class RatioCI:
    """Ratio (exp of a mean log difference) with interval, p-value and the log-scale SE."""

    ratio: float
    low: float | None
    high: float | None
    p_value: float | None
    se_log: float | None
    df: float | None


@dataclass(frozen=True)
class Drift:
    """First measured requests vs the rest of one restart."""

    n_first: int
    first_mean: float
    rest_mean: float
    ratio: float
    p_value: float | None
    flagged: bool


def _finite(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None


def median_ci(values: Sequence[float], level: float = 0.95) -> MedianCI:
    """Median and distribution-free interval (X_(j), X_(n−j+1)), j the largest index with
    coverage 1 − 2·P(Binomial(n, ½) ≤ j−1) ≥ level. n = 15 → (X_(4), X_(12)); none for n ≤ 5.
    Assumes only independent draws from a continuous distribution (within one process)."""
    x = np.sort(np.asarray(values, dtype=float))
    n = len(x)
    if n == 0:
        raise ValueError("median_ci needs at least one value")
    best: tuple[int, float] | None = None
    for j in range(1, n // 2 + 1):
        coverage = 1.0 - 2.0 * float(sps.binom.cdf(j - 1, n, 0.5))
        if coverage < level:
            break
        best = (j, coverage)
    median = float(np.median(x))
    if best is None:
        return MedianCI(median, None, None, None)
    j, coverage = best
    return MedianCI(median, float(x[j - 1]), float(x[n - j]), coverage)


def t_interval(values: Sequence[float], level: float = 0.95) -> Interval:
    """Mean with a Student t interval (df = n−1): used on restart summaries, one per restart.
    Assumes the restart summaries are independent and roughly normal; None ends for n < 2."""
    x = np.asarray(values, dtype=float)
    n = len(x)
    if n == 0:
        raise ValueError("t_interval needs at least one value")
    mean = float(x.mean())
    if n < 2:
        return Interval(mean, None, None, n)
    half = float(sps.t.ppf(0.5 + level / 2, n - 1)) * float(x.std(ddof=1)) / math.sqrt(n)
    return Interval(mean, mean - half, mean + half, n)


def welch_ratio_ci(log_arm: npt.ArrayLike, log_base: npt.ArrayLike, level: float = 0.95) -> RatioCI:
    """Ratio of geometric means exp(mean log_arm − mean log_base) with the Welch t interval
    on the log difference (scipy ttest_ind, equal_var=False), exponentiated. Inputs are log
    restart means, one per restart; needs ≥ 2 per side."""
    a = np.asarray(log_arm, dtype=float)
    b = np.asarray(log_base, dtype=float)
    diff = float(a.mean() - b.mean())
    if len(a) < 2 or len(b) < 2:
        return RatioCI(math.exp(diff), None, None, None, None, None)
    se = math.sqrt(a.var(ddof=1) / len(a) + b.var(ddof=1) / len(b))
    if _no_spread(se, a, b):
        return _point(diff)
    res = sps.ttest_ind(a, b, equal_var=False)
    ci = res.confidence_interval(confidence_level=level)
    return _ratio(diff, ci.low, ci.high, res.pvalue, se, res.df)


def means_ratio_ci(arm: npt.ArrayLike, base: npt.ArrayLike, level: float = 0.95) -> RatioCI:
    """Ratio of two means (one process each: within-process only) with the delta-method
    interval on its log: se² = s_a²/(n_a·m_a²) + s_b²/(n_b·m_b²), Welch–Satterthwaite df.
    The same centre as the restart-aware ratios (a ratio of restart means), so one restart
    per side shows the number every other table shows."""
    a = np.asarray(arm, dtype=float)
    b = np.asarray(base, dtype=float)
    diff = math.log(float(a.mean())) - math.log(float(b.mean()))
    if len(a) < 2 or len(b) < 2:
        return RatioCI(math.exp(diff), None, None, None, None, None)
    va = float(a.var(ddof=1)) / (len(a) * float(a.mean()) ** 2)
    vb = float(b.var(ddof=1)) / (len(b) * float(b.mean()) ** 2)
    se = math.sqrt(va + vb)
    if _no_spread(se, np.log(a), np.log(b)):
        return _point(diff)
    df = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1))
    half = float(sps.t.ppf(0.5 + level / 2, df)) * se
    p = 2 * float(sps.t.sf(abs(diff) / se, df))
    return _ratio(diff, diff - half, diff + half, p, se, df)


def paired_ratio_ci(
    log_arm: npt.ArrayLike, log_base: npt.ArrayLike, level: float = 0.95
) -> RatioCI:
    """Ratio from paired blocks: t interval on the per-block log ratios (scipy ttest_rel),
    exponentiated. Pairing cancels slow drift shared by the two runs of a block."""
    a = np.asarray(log_arm, dtype=float)
    b = np.asarray(log_base, dtype=float)
    if len(a) != len(b):
        raise ValueError("paired_ratio_ci needs one arm value per baseline value (blocks)")
    diff = float((a - b).mean())
    if len(a) < 2:
        return RatioCI(math.exp(diff), None, None, None, None, None)
    se = float((a - b).std(ddof=1)) / math.sqrt(len(a))
    if _no_spread(se, a, b):
        return _point(diff)
    res = sps.ttest_rel(a, b)
    ci = res.confidence_interval(confidence_level=level)
    return _ratio(diff, ci.low, ci.high, res.pvalue, se, res.df)


def _no_spread(se: float, *samples: np.ndarray) -> bool:
    # Values identical up to rounding: a t statistic would divide by ~0 (scipy warns of
    # catastrophic cancellation), so the interval is the point itself.
    scale = max(float(np.abs(x).max()) for x in samples)
    return se <= 1e-12 * max(1.0, scale)


def _point(diff: float) -> RatioCI:
    ratio = math.exp(diff)
    return RatioCI(ratio, ratio, ratio, 0.0 if abs(diff) > 1e-12 else 1.0, 0.0, None)


def _ratio(diff: float, low: float, high: float, p: float, se: float, df: float) -> RatioCI:
    lo, hi = _finite(low), _finite(high)
    return RatioCI(
        ratio=math.exp(diff),
        low=math.exp(lo) if lo is not None else None,
        high=math.exp(hi) if hi is not None else None,
        p_value=_finite(p),
        se_log=_finite(se),
        df=_finite(df),
    )


def verdict(low: float | None, high: float | None, delta: float) -> VerdictName:
    """Decision of a ratio interval [L, U] against the noise band δ: WIN if L > 1+δ, LOSS if
    U < 1/(1+δ), EQUIVALENT if [L, U] lies inside [1/(1+δ), 1+δ], else INCONCLUSIVE."""
    if low is None or high is None:
        return "INCONCLUSIVE"
    upper, lower = 1.0 + delta, 1.0 / (1.0 + delta)
    if low > upper:
        return "WIN"
    if high < lower:
        return "LOSS"
    if lower <= low and high <= upper:
        return "EQUIVALENT"
    return "INCONCLUSIVE"


def futility_p(ci: RatioCI, target: float) -> float | None:
    """One-sided p-value of the t test of H: ratio ≥ 1 + target (the speedup a plan is powered
    to find), on the interval's own log ratio, SE and df (paired: blocks − 1; Welch:
    Welch-Satterthwaite). Below α exactly when the two-sided 1 − 2α interval's upper end lies
    below 1 + target. None without a standard error (one restart on a side)."""
    if not ci.se_log or ci.df is None or ci.ratio <= 0:
        return None
    t = (math.log(ci.ratio) - math.log1p(target)) / ci.se_log
    return float(sps.t.cdf(t, ci.df))


def bh_adjust(p_values: Sequence[float]) -> list[float]:
    """Benjamini-Hochberg adjusted p-values (scipy.stats.false_discovery_control)."""
    if not p_values:
        return []
    return [float(p) for p in sps.false_discovery_control(np.asarray(p_values, dtype=float))]


def tukey_fences(values: Sequence[float], k: float = 1.5) -> tuple[float, float]:
    """Tukey fences (Q1 − k·IQR, Q3 + k·IQR), quartiles by numpy's default (linear)."""
    q1, q3 = np.percentile(np.asarray(values, dtype=float), [25, 75])
    iqr = q3 - q1
    return float(q1 - k * iqr), float(q3 + k * iqr)


def tukey_outliers(values: Sequence[float], k: float = 1.5) -> list[tuple[int, Side]]:
    """Indices of values outside the Tukey fences, with 'low' or 'high'. Flag, never drop."""
    if len(values) < 4:
        return []
    lo, hi = tukey_fences(values, k)
    out: list[tuple[int, Side]] = []
    for i, v in enumerate(values):
        if v < lo:
            out.append((i, "low"))
        elif v > hi:
            out.append((i, "high"))
    return out


def requests_per_restart(
    cost_restart: float, cost_request: float, s1_sq: float, t2_sq: float
) -> int | None:
    """Kalibera & Jones optimum m* = ceil(sqrt(c_restart/c_request · S1²/T2²)) requests per
    restart; None when T2² ≤ 0 (no restart component: any m works, add restarts instead)."""
    if t2_sq <= 0 or cost_request <= 0:
        return None
    return max(1, math.ceil(math.sqrt(cost_restart / cost_request * s1_sq / t2_sq)))


def restarts_for_width(
    sd_log: float, width: float, level: float = 0.95, floor: int = 3, cap: int = 1000
) -> int | None:
    """Restarts per arm for a speedup-ratio interval about W wide (relative, full width): the
    smallest R ≥ `floor` with 2·t(level, R−1)·sqrt(2·s²/R) ≤ W, s the SD of one arm's log
    restart means (the log ratio of two arms' means has variance 2·s²/R; df = R−1, the
    paired schedule's). Iterates in R because t depends on it; None beyond `cap`."""
    if sd_log <= 0:
        return floor
    for r in range(max(floor, 2), cap + 1):
        if 2 * float(sps.t.ppf(0.5 + level / 2, r - 1)) * sd_log * math.sqrt(2.0 / r) <= width:
            return r
    return None


def drift_check(
    values: Sequence[float], n_first: int = 3, threshold: float = 0.05, alpha: float = 0.05
) -> Drift:
    """Warm-up drift: the first n_first measured requests (in send order) vs the rest, Welch
    t test. Flagged when p < alpha and the means differ by more than `threshold`."""
    x = np.asarray(values, dtype=float)
    first, rest = x[:n_first], x[n_first:]
    if len(first) < 2 or len(rest) < 2:
        raise ValueError("drift_check needs ≥ 2 requests on each side")
    ratio = float(first.mean() / rest.mean())
    se = math.sqrt(first.var(ddof=1) / len(first) + rest.var(ddof=1) / len(rest))
    if _no_spread(se, first, rest):
        p = None if ratio == 1.0 else 0.0
    else:
        p = _finite(float(sps.ttest_ind(first, rest, equal_var=False).pvalue))
    flagged = p is not None and p < alpha and abs(ratio - 1) > threshold
    return Drift(n_first, float(first.mean()), float(rest.mean()), ratio, p, flagged)
