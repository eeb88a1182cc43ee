"""diagnostic.analyse.stats against textbook values and independent formulas."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from diagnostic.analyse import stats


def test_median_ci_n15_is_the_4th_and_12th_order_statistics() -> None:
    values = [float(v) for v in range(15, 0, -1)]  # unsorted on purpose
    ci = stats.median_ci(values)
    assert (ci.median, ci.low, ci.high) == (8.0, 4.0, 12.0)
    # Coverage 1 − 2·P(Bin(15, ½) ≤ 3) = 1 − 2·(1 + 15 + 105 + 455)/2^15.
    assert ci.coverage == pytest.approx(1 - 2 * 576 / 2**15)


def test_median_ci_does_not_exist_for_five_values_or_fewer() -> None:
    ci = stats.median_ci([3.0, 1.0, 2.0, 5.0, 4.0])
    assert ci.median == 3.0 and ci.low is None and ci.high is None and ci.coverage is None


def test_median_ci_n6_is_min_and_max() -> None:
    ci = stats.median_ci([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    assert (ci.low, ci.high) == (1.0, 6.0)
    assert ci.coverage == pytest.approx(1 - 2 / 64)


def test_t_interval_matches_scipy() -> None:
    values = [101.0, 97.5, 110.2, 104.1, 99.9]
    ci = stats.t_interval(values)
    low, high = sps.t.interval(0.95, 4, loc=np.mean(values), scale=sps.sem(values))
    assert (ci.low, ci.high) == (pytest.approx(low), pytest.approx(high))
    assert ci.n == 5


def test_t_interval_of_one_value_has_no_ends() -> None:
    ci = stats.t_interval([42.0])
    assert ci.estimate == 42.0 and ci.low is None and ci.high is None


def test_welch_ratio_ci_matches_the_welch_satterthwaite_formula() -> None:
    a = np.log([1200.0, 1150.0, 1320.0, 1190.0])
    b = np.log([600.0, 590.0, 640.0])
    va, vb = a.var(ddof=1) / len(a), b.var(ddof=1) / len(b)
    df = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1))
    half = sps.t.ppf(0.975, df) * math.sqrt(va + vb)
    diff = a.mean() - b.mean()
    ci = stats.welch_ratio_ci(a, b)
    assert ci.ratio == pytest.approx(math.exp(diff))
    assert ci.low == pytest.approx(math.exp(diff - half))
    assert ci.high == pytest.approx(math.exp(diff + half))
    assert ci.df == pytest.approx(df)
    assert ci.p_value == pytest.approx(2 * sps.t.sf(diff / math.sqrt(va + vb), df))


def test_welch_ratio_ci_needs_two_restarts_per_side_for_an_interval() -> None:
    ci = stats.welch_ratio_ci([math.log(2.0)], [0.0, 0.01])
    assert ci.low is None and ci.high is None and ci.p_value is None


def test_paired_ratio_ci_is_a_t_interval_on_block_log_ratios() -> None:
    a = np.log([1210.0, 1100.0, 1300.0, 1250.0])
    b = np.log([600.0, 560.0, 650.0, 610.0])
    d = a - b
    half = sps.t.ppf(0.975, len(d) - 1) * d.std(ddof=1) / math.sqrt(len(d))
    ci = stats.paired_ratio_ci(a, b)
    assert ci.low == pytest.approx(math.exp(d.mean() - half))
    assert ci.high == pytest.approx(math.exp(d.mean() + half))


def test_paired_removes_a_drift_shared_by_both_runs_of_a_block() -> None:
    drift = np.array([0.0, 0.1, 0.2, 0.3, 0.4])
    a = np.log(1.5) + drift + np.array([0.01, -0.01, 0.0, 0.005, -0.005])
    b = drift
    paired, welch = stats.paired_ratio_ci(a, b), stats.welch_ratio_ci(a, b)
    assert paired.high - paired.low < (welch.high - welch.low) / 5  # type: ignore[operator]


@pytest.mark.parametrize(
    ("low", "high", "expected"),
    [
        (1.03, 1.20, "WIN"),
        (0.80, 0.97, "LOSS"),
        (0.99, 1.015, "EQUIVALENT"),
        (0.99, 1.05, "INCONCLUSIVE"),
        (1.01, 1.03, "INCONCLUSIVE"),  # above 1 but not beyond the band
        (None, None, "INCONCLUSIVE"),
    ],
)
def test_verdict_against_a_two_percent_band(
    low: float | None, high: float | None, expected: str
) -> None:
    assert stats.verdict(low, high, 0.02) == expected


def test_loss_edge_is_the_reciprocal_of_the_win_edge() -> None:
    assert stats.verdict(0.90, 1 / 1.02 - 1e-9, 0.02) == "LOSS"
    assert stats.verdict(0.90, 1 / 1.02 + 1e-9, 0.02) == "INCONCLUSIVE"


def test_bh_adjust_textbook_example() -> None:
    # Sorted p 0.005, 0.01, 0.03, 0.04 → m·p/i = 0.02, 0.02, 0.04, 0.04 (then monotone).
    assert stats.bh_adjust([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.02, 0.04, 0.04, 0.02])
    assert stats.bh_adjust([]) == []


def test_tukey_flags_but_keeps_order() -> None:
    values = [10.0, 11.0, 10.5, 9.8, 10.2, 30.0, 10.1, 1.0]
    lo, hi = stats.tukey_fences(values)
    q1, q3 = np.percentile(values, [25, 75])
    assert (lo, hi) == (pytest.approx(q1 - 1.5 * (q3 - q1)), pytest.approx(q3 + 1.5 * (q3 - q1)))
    assert stats.tukey_outliers(values) == [(5, "high"), (7, "low")]


def test_kalibera_jones_requests_per_restart() -> None:
    assert stats.requests_per_restart(100.0, 1.0, 4.0, 1.0) == 20  # sqrt(100 · 4)
    assert stats.requests_per_restart(100.0, 1.0, 4.0, -0.5) is None


def test_restarts_for_width_uses_t_and_the_log_ratio_variance() -> None:
    # The smallest R with 2·t(0.975, R−1)·sd·sqrt(2/R) ≤ W: the ratio of two arms' means has
    # twice one arm's variance, and t > z on few restarts — about 2× the old z rule's 16.
    r = stats.restarts_for_width(0.10, 0.10)
    assert r is not None

    def width(n: int) -> float:
        return 2 * float(sps.t.ppf(0.975, n - 1)) * 0.10 * math.sqrt(2 / n)

    assert width(r) <= 0.10 < width(r - 1)
    assert r >= 2 * 16  # the z rule on one arm's SD gave 16
    assert stats.restarts_for_width(0.001, 0.10) == 3  # never below the 3-restart floor
    assert stats.restarts_for_width(1.0, 0.01, cap=50) is None


def test_drift_check_flags_slow_first_requests() -> None:
    values = [80.0, 82.0, 81.0, 100.0, 101.0, 99.0, 100.5, 99.5, 100.2, 100.1, 99.8]
    d = stats.drift_check(values, n_first=3)
    assert d.flagged and d.ratio == pytest.approx(81.0 / np.mean(values[3:]))
    steady = stats.drift_check([100.0, 99.0, 101.0, 100.5, 99.5, 100.0, 100.2, 99.8])
    assert not steady.flagged


def test_futility_p_rejects_the_target_exactly_when_the_95_interval_excludes_it() -> None:
    """One-sided p of 'ratio ≥ 1.10' below 2.5% ⇔ the paired 95% interval's upper end < 1.10;
    by hand: p = T_df.cdf((log ratio − log 1.1) / SE)."""
    rng = np.random.default_rng(3)
    seen = set()
    for _ in range(200):
        base = rng.normal(5.0, 0.05, 6)
        arm = base + rng.normal(0.03, 0.06, 6)
        ci = stats.paired_ratio_ci(arm, base, 0.95)
        p = stats.futility_p(ci, 0.10)
        assert p is not None and ci.high is not None and ci.se_log and ci.df
        d = arm - base
        by_hand = sps.t.cdf((d.mean() - math.log(1.1)) / (d.std(ddof=1) / math.sqrt(6)), 5)
        assert p == pytest.approx(by_hand, rel=1e-9)
        assert (p < 0.025) == (ci.high < 1.10)
        seen.add(p < 0.025)
    assert seen == {True, False}
    one = stats.paired_ratio_ci([5.0], [5.1], 0.95)
    assert stats.futility_p(one, 0.10) is None
