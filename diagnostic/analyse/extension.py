"""What an undecided comparison is worth now and what more restarts would buy: the confidence
distribution of its speedup, and the probability (assurance) that a planned extension
decides it."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats as sps

__all__ = ["ADDED", "ASSURANCE", "Belief", "assurance", "belief", "extension"]

ADDED = (1, 2, 3, 5, 8, 12, 20, 30, 50, 80, 120, 200)
"""Restarts per arm an extension may add: the points the report chooses from."""
ASSURANCE = 0.8
"""The probability of deciding that 'restarts to settle it' aims at."""
_NODES = 512  # quantiles of the confidence distribution averaged over


@dataclass(frozen=True)
class Belief:
    """A log ratio's confidence distribution, mean + se·T_df, read at the margin."""

    p_faster: float  # P(ratio > 1 + δ)
    p_slower: float  # P(ratio < 1/(1 + δ))
    low95: float  # its own 95% interval (one comparison alone, not simultaneous)
    high95: float


def belief(mean: float, se: float, df: float, delta: float) -> Belief:
    """The t confidence distribution of the log ratio (location `mean`, scale `se`, `df`):
    the probability that the speedup is beyond each edge of the ±δ margin and the 95%
    interval of this comparison alone. A confidence distribution, not a Bayesian posterior:
    its probabilities are the levels at which one-sided intervals would exclude the edge."""
    band = math.log1p(delta)
    if se <= 0:
        return Belief(float(mean > band), float(mean < -band), math.exp(mean), math.exp(mean))
    half = float(sps.t.ppf(0.975, df)) * se
    return Belief(
        p_faster=float(sps.t.sf((band - mean) / se, df)),
        p_slower=float(sps.t.cdf((-band - mean) / se, df)),
        low95=math.exp(mean - half),
        high95=math.exp(mean + half),
    )


def assurance(
    mean: float, se: float, df: float, n: int, level: float, delta: float, added: int
) -> float:
    """Probability that `added` more blocks decide the comparison (WIN, LOSS or EQUIVALENT
    against ±δ at its interval's `level`), averaged over the confidence distribution of the
    true log ratio θ (mean + se·T_df) and the new blocks' noise (block SD se·√n, taken as
    known): with R = n + added blocks, the final mean is N((n·mean + added·θ)/R,
    added·sd²/R²) and the interval's half width t(level, df + added)·sd/√R."""
    if se <= 0 or added < 1:
        return 0.0
    sd, total = se * math.sqrt(n), n + added
    band = math.log1p(delta)
    half = float(sps.t.ppf(0.5 + level / 2, df + added)) * sd / math.sqrt(total)
    u = (np.arange(_NODES) + 0.5) / _NODES
    theta = mean + se * sps.t.ppf(u, df)
    centre = (n * mean + added * theta) / total
    spread = math.sqrt(added) * sd / total
    win = sps.norm.sf((band + half - centre) / spread)
    loss = sps.norm.cdf((-band - half - centre) / spread)
    inner = band - half  # an interval inside ±band needs its centre inside ±inner
    same = (
        sps.norm.cdf((inner - centre) / spread) - sps.norm.cdf((-inner - centre) / spread)
        if inner > 0
        else 0.0
    )
    return float(np.mean(win + loss + same))


def extension(
    mean: float, se: float, df: float, n: int, level: float, delta: float
) -> list[tuple[int, float]]:
    """(restarts per arm in all, assurance) for each ADDED extension."""
    return [(n + k, assurance(mean, se, df, n, level, delta, k)) for k in ADDED]
