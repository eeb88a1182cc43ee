"""benchmarks/power.py: the power of fixed and adaptive plans that time_to_verdict compares."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.stats as sps
from test_benchmarks_smoke import load_benchmark

from diagnostic.analyse import sequential

plans = load_benchmark("power")


def test_sequential_power_matches_a_brute_force_simulation() -> None:
    looks, effect, band = (4, 8, 12), 0.8, 0.1
    alpha = sequential.sequential_alpha(looks)
    d = np.random.default_rng(12).standard_normal((40_000, 12)) + effect
    decided = np.zeros(len(d), dtype=bool)
    win = np.zeros(len(d), dtype=bool)
    for i, n in enumerate(looks):
        x = d[:, :n]
        half = sps.t.isf(alpha / 2, n - 1) * x.std(axis=1, ddof=1) / math.sqrt(n)
        low, high = x.mean(axis=1) - half, x.mean(axis=1) + half
        now = (low > band) | (high < -band) | ((low >= -band) & (high <= band))
        stop = ~decided & (now | (i == len(looks) - 1))
        win[stop] = low[stop] > band
        decided |= now
    expected = plans.sequential_power(looks, effect, band, alpha)
    assert float(win.mean()) == pytest.approx(expected, abs=0.01)  # SE 0.0025
    assert plans.sequential_power(looks, 0.0, band, alpha) < 0.03


def test_fixed_restarts_for_power_is_the_smallest_plan_with_that_power() -> None:
    cv, effect, delta = 0.05, 0.10, 0.02
    n = plans.fixed_restarts_for_power(cv, effect, delta)
    assert n is not None
    sd, room = math.sqrt(2) * cv, math.log(1.10) - math.log(1.02)

    def power(r: int) -> float:  # WIN rate of r paired blocks, by simulation
        d = np.random.default_rng(r).normal(math.log(1.10), sd, (40_000, r))
        low = d.mean(axis=1) - sps.t.isf(0.025, r - 1) * d.std(axis=1, ddof=1) / math.sqrt(r)
        return float(np.mean(low > math.log(1.02)))

    assert power(n) >= 0.89 and power(n - 1) < 0.905
    normal = ((sps.norm.isf(0.025) + sps.norm.ppf(0.9)) * sd / room) ** 2  # z for t: fewer
    assert normal < n <= normal + 3
    assert plans.fixed_restarts_for_power(cv, 1 / 1.1 - 1, delta) == n  # LOSS: as hard
    assert plans.fixed_restarts_for_power(cv, 0.01, delta) is None  # inside the noise band
    assert plans.fixed_restarts_for_power(0.5, 0.05, delta, cap=50) is None


def test_adaptive_max_restarts_inflates_the_fixed_plan_to_keep_its_power() -> None:
    cv, effect, delta = 0.05, 0.10, 0.02
    n_fixed = plans.fixed_restarts_for_power(cv, effect, delta)
    n_max = plans.adaptive_max_restarts(cv, effect, delta)
    assert n_fixed is not None and n_max is not None
    assert n_fixed < n_max <= 1.5 * n_fixed  # Pocock R_P(4) = 1.183, t costs, rounding
    sd = math.sqrt(2) * cv
    shift, band = math.log1p(effect) / sd, math.log1p(delta) / sd

    def power(n: int) -> float:
        looks = sequential.planned_looks(n)
        return plans.sequential_power(looks, shift, band, sequential.sequential_alpha(looks))

    assert power(n_max) >= 0.9 > power(n_max - 1)
    assert plans.adaptive_max_restarts(cv, 0.01, delta) is None
