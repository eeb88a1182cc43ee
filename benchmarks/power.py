"""Power of fixed and adaptive blocked plans, for benchmarks/time_to_verdict.py (the tool itself
plans with sequential.planned_looks and sequential.sequential_alpha; these only size the
comparison)."""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import scipy.stats as sps

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from diagnostic.analyse import sequential

__all__ = ["adaptive_max_restarts", "fixed_restarts_for_power", "sequential_power"]


def sequential_power(
    looks: Sequence[int], effect_sd: float, band_sd: float, alpha_look: float
) -> float:
    """Probability that a paired design with these looks ends in WIN: at each look the
    (1 − alpha_look) t interval of the mean block log ratio decides as `verdict` does (band
    ±band_sd), and the design stops at the first decision. effect_sd and band_sd are the
    true log ratio and log(1+δ) over the SD of one block's log ratio. Seeded simulation."""
    mean, se = sequential.t_look_paths(looks, effect_sd)
    with np.errstate(invalid="ignore"):
        half = sps.t.isf(alpha_look / 2, np.asarray(looks, dtype=float) - 1) * se
    low, high = mean - half, mean + half
    win = low > band_sd
    decided = win | (high < -band_sd) | ((low >= -band_sd) & (high <= band_sd))
    first = np.where(decided.any(axis=1), decided.argmax(axis=1), len(looks) - 1)
    return float(win[np.arange(len(first)), first].mean())


def fixed_restarts_for_power(
    cv: float, effect: float, delta: float, power: float = 0.9, alpha: float = 0.05, cap: int = 1000
) -> int | None:
    """Blocks (restarts per arm) a fixed blocked plan needs to call WIN with probability
    `power` when the arm is faster by `effect` (0.10 = 10%): the paired t interval at level
    1 − alpha must clear the band edge 1+δ, exact by the noncentral t. cv is one arm's
    restart-to-restart CV (SD of log restart means), so a block's log ratio has SD √2·cv.
    Never below 3; None when the effect is inside the band or needs more than `cap`."""
    sd = math.sqrt(2.0) * cv
    room = abs(math.log1p(effect)) - math.log1p(delta)
    if room <= 0 or sd <= 0:
        return None
    z = float(sps.norm.isf(alpha / 2) + sps.norm.ppf(power))
    start = max(3, math.floor((z * sd / room) ** 2) - 1)  # the normal answer, from below
    for n in range(start, cap + 1):
        crit = float(sps.t.isf(alpha / 2, n - 1))
        if float(sps.nct.sf(crit, n - 1, room * math.sqrt(n) / sd)) >= power:
            return n
    return None


def adaptive_max_restarts(
    cv: float, effect: float, delta: float, power: float = 0.9, looks: int = 4
) -> int | None:
    """Maximum blocks (the plan's `restarts`) of an adaptive sweep with the same power as the
    fixed plan: the smallest N ≥ the fixed plan whose sequential.planned_looks(N, looks)
    design, at the sequential_alpha level, calls WIN with probability ≥ `power` (Pocock's
    inflation, about 1.1-1.2 × the fixed plan, plus what t intervals on few blocks cost). cv
    as in fixed_restarts_for_power; None when no fixed plan exists."""
    n_fixed = fixed_restarts_for_power(cv, effect, delta, power)
    if n_fixed is None:
        return None
    sd = math.sqrt(2.0) * cv
    effect_sd, band_sd = abs(math.log1p(effect)) / sd, math.log1p(delta) / sd
    for n in range(n_fixed, 2 * n_fixed + 8):
        plan = sequential.planned_looks(n, looks)
        alpha = sequential.sequential_alpha(plan)
        if sequential_power(plan, effect_sd, band_sd, alpha) >= power:
            return n
    return None
