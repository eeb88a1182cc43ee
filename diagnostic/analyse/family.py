"""Simultaneous intervals over a family of paired comparisons that share a baseline and blocks:
each comparison's own block variance on its own degrees of freedom, at Šidák's level."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats as sps

__all__ = [
    "BlockDiffs",
    "FamilyInterval",
    "block_variances",
    "sidak_critical",
    "simultaneous_intervals",
]


@dataclass(frozen=True)
class FamilyInterval:
    """One comparison's simultaneous interval on the log scale, with how it was formed."""

    mean: float
    low: float
    high: float
    se: float  # standard error of the mean log ratio, from the comparison's own blocks
    df: float  # its degrees of freedom: blocks − 1
    critical: float  # its t quantile at the family's per-member level
    level: float  # the interval's own (marginal) two-sided level


BlockDiffs = Mapping[int, float]
"""One comparison's log ratios by block: log(arm) − log(reference) of the block's restarts."""


def block_variances(diffs: Sequence[BlockDiffs]) -> list[tuple[float, float]]:
    """Each comparison's own block variance s_j² with its df, n_j − 1: nothing borrowed from
    the other comparisons. On few blocks a variance pooled across the family cannot tell a
    noisy arm from a quiet one (on 3 blocks log s² has SD π/√6 ≈ 1.3, so a threefold CV does
    not stand out), and moderating towards it under-covered the noisy arm: docs/statistics.md
    "Each comparison's own variance". The one variance model of a family member: its interval
    (simultaneous_intervals), its futility test and outlook read it from there, and planning
    (power.planned_critical) assumes it."""
    return [(float(np.array(list(d.values())).var(ddof=1)), float(len(d) - 1)) for d in diffs]


def sidak_critical(size: int, df: float, alpha: float) -> float:
    """t quantile of one member of a family of `size` at Šidák's level, (1 − α)^(1/size) each
    two-sided: the members' t statistics, each on its own variance, all hold together with
    probability ≥ 1 − α (Šidák 1967 for the normal numerators given the variances; the
    variances of comparisons that share a reference are positively associated, so the bound
    survives their averaging). The many-to-one max-|t| of a shared variance is narrower only
    through that sharing: with separate variances on few blocks it is within 2% of this."""
    return float(sps.t.ppf(0.5 + (1 - alpha) ** (1 / size) / 2, df))


def simultaneous_intervals(diffs: Sequence[BlockDiffs], alpha: float) -> list[FamilyInterval]:
    """Simultaneous 1 − α intervals for the mean block log ratio of every comparison: mean ±
    c_j·s_j/√n_j with s_j² the comparison's own block variance (block_variances) and c_j its
    t quantile on n_j − 1 df at Šidák's level (sidak_critical). Each comparison needs ≥ 2
    blocks; assumes normal block log ratios, independent between blocks."""
    n = [len(d) for d in diffs]
    if min(n, default=0) < 2:
        raise ValueError("simultaneous_intervals needs ≥ 2 blocks per comparison")
    level = (1 - alpha) ** (1 / len(diffs))
    out = []
    for d, (var, df), k in zip(diffs, block_variances(diffs), n, strict=True):
        c = sidak_critical(len(diffs), df, alpha)
        mean = float(np.mean(list(d.values())))
        se = math.sqrt(var / k)
        out.append(FamilyInterval(mean, mean - c * se, mean + c * se, se, df, c, level))
    return out
