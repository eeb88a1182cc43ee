"""diagnostic.analyse.compare: restart-aware ratio intervals, one deciding interval per
comparison, families, Pocock stopping."""

from __future__ import annotations

import math

import numpy as np
import pytest

from diagnostic.analyse import stats
from diagnostic.analyse.compare import Side, decide, ratio_ci, start_comparison
from diagnostic.analyse.requests import Sample
from diagnostic.analyse.sequential import sequential_alpha
from diagnostic.schema.bundle import Design

FIXED = Design()


def _side(name: str, restarts: list[list[float]], blocks: bool = False) -> Side:
    groups = {
        r: [
            Sample(name, r, r if blocks else None, "code", 1, j, float(j), "p", v, 0.02, 1.0, 3.0)
            for j, v in enumerate(values)
        ]
        for r, values in enumerate(restarts)
    }
    return Side(name, groups)


def _simulate(
    rng: np.random.Generator, ratio: float, r: int, m: int, sd: float = 0.08
) -> list[list[float]]:
    # Restart effects (sd 0.08 on the log scale by default) dominate request noise (0.02).
    effects = rng.normal(0.0, sd, r)
    return [list(ratio * 600 * np.exp(e + rng.normal(0.0, 0.02, m))) for e in effects]


def test_restart_aware_interval_covers_while_pooling_requests_does_not() -> None:
    """Seeded simulation: 5 restarts × 15 requests per arm, true speedup 1.25."""
    rng = np.random.default_rng(2026)
    truth, sims = 1.25, 300
    aware = pooled = 0
    for _ in range(sims):
        arm = _side("spec", _simulate(rng, truth, 5, 15))
        base = _side("base", _simulate(rng, 1.0, 5, 15))
        ci = ratio_ci(arm, base, blocked=False).ci
        aware += ci.low < truth < ci.high  # type: ignore[operator]
        pooled_arm, pooled_base = (
            [math.log(s.decode_tps) for g in side.groups.values() for s in g]
            for side in (arm, base)
        )
        naive = stats.welch_ratio_ci(pooled_arm, pooled_base)
        pooled += naive.low < truth < naive.high  # type: ignore[operator]
    assert aware / sims >= 0.90
    assert pooled / sims < 0.60


def test_blocked_schedule_pairs_restarts_and_cancels_shared_drift() -> None:
    drift = [1.0, 0.8, 1.2, 0.9]  # slow drift shared by both runs of each block
    base = _side("base", [[600 * d + j for j in range(5)] for d in drift], blocks=True)
    arm = _side("spec", [[900 * d + j for j in range(5)] for d in drift], blocks=True)
    paired = ratio_ci(arm, base, blocked=True)
    welch = ratio_ci(arm, base, blocked=False)
    assert paired.method == "paired-log-block-ratios" and paired.n_now == 4
    assert welch.method == "welch-log-restart-means"
    assert paired.ci.ratio == pytest.approx(1.5, rel=0.01)
    assert paired.ci.high - paired.ci.low < (welch.ci.high - welch.ci.low) / 10  # type: ignore[operator]


def _one(arm: Side, base: Side, design: Design = FIXED, kind: str = "spec"):  # type: ignore[no-untyped-def]
    pending = start_comparison(arm, base, "code", 1, kind=kind, k=3, blocked=False)  # type: ignore[arg-type]
    (c,) = decide([pending], delta=0.02, design=design)
    return c


def test_one_restart_each_is_within_process_and_gets_no_verdict() -> None:
    arm = _side("spec", [[1000.0, 1010.0, 990.0, 1005.0]])
    base = _side("base", [[600.0, 610.0, 590.0]])
    c = _one(arm, base)
    assert c.interval_method == "within-process" and c.within_process_only and c.withheld
    assert c.label == "within-process only; restart variance not measured"
    assert c.verdict == "INCONCLUSIVE" and c.more_restarts_needed == 3
    # One centre: the ratio of the two restart means, as every table shows it.
    assert c.ratio == pytest.approx((4005 / 4) / 600)
    assert c.ci_low is not None and c.ci_low > 1.02 and c.ci_level == 0.95
    assert c.family_size == 1 and not c.headline


def test_one_restart_against_several_gets_no_verdict() -> None:
    arm = _side("spec", [[1000.0, 1010.0, 990.0, 1005.0]])
    base = _side("base", [[600.0, 610.0, 590.0], [820.0, 800.0, 805.0]])
    c = _one(arm, base)
    assert c.interval_method == "within-process" and c.withheld
    assert c.verdict == "INCONCLUSIVE"


def test_family_intervals_are_simultaneous_and_printed_as_the_deciding_ones() -> None:
    rng = np.random.default_rng(1)
    base = _side("base", _simulate(rng, 1.0, 5, 15))
    family = [
        start_comparison(
            _side(f"k{k}", _simulate(rng, r, 5, 15)),
            base,
            "code",
            1,
            kind="spec",
            k=k,
            blocked=False,
        )
        for k, r in ((1, 1.3), (3, 1.02), (5, 0.7))
    ]
    aa = start_comparison(
        _side("base-aa", _simulate(rng, 1.0, 5, 15)),
        base,
        "code",
        1,
        kind="aa",
        k=None,
        blocked=False,
    )
    out = decide([*family, aa], delta=0.02, design=FIXED)
    p = [c.p_value for c in out[:3]]
    assert [c.p_adjusted for c in out[:3]] == pytest.approx(stats.bh_adjust(p))  # type: ignore[arg-type]
    for c, pending in zip(out[:3], family, strict=True):
        assert c.family_size == 3 and c.ci_level == pytest.approx(1 - 0.05 / 3)
        assert c.ci_label == "simultaneous 95% CI over 3 comparisons"
        wide = ratio_ci(pending.arm, base, blocked=False, level=1 - 0.05 / 3).ci
        assert (c.ci_low, c.ci_high) == (wide.low, wide.high)  # the printed one decided
        assert c.ci_low < pending.result.ci.low  # type: ignore[operator]
        assert c.verdict == stats.verdict(c.ci_low, c.ci_high, 0.02)
    assert out[0].verdict == "WIN" and out[2].verdict == "LOSS"
    assert out[1].verdict == "INCONCLUSIVE" and out[1].lean in ("faster", "slower")
    # The A/A check is not a member of the family: it decides at 95% alone.
    assert out[3].ci_level == 0.95 and out[3].family_size == 1 and out[3].ci_label == "95% CI"


def test_adaptive_design_decides_at_the_calibrated_per_look_level() -> None:
    rng = np.random.default_rng(3)
    arm = _side("spec", _simulate(rng, 1.5, 4, 15, sd=0.03))
    base = _side("base", _simulate(rng, 1.0, 4, 15, sd=0.03))
    looks = [4, 8, 12]
    c = _one(arm, base, Design(kind="adaptive", looks=looks))
    s = c.stopping
    alpha = sequential_alpha(looks)
    assert s is not None and s.look_number == 1 and s.n_now == 4
    assert s.per_look_alpha == alpha and c.ci_level == pytest.approx(1 - alpha)
    assert c.ci_label == "Pocock-adjusted 95% CI, look 1 of 3"
    assert s.can_stop and s.verdict_at_look == "WIN" == c.verdict
    fixed = _one(arm, base)
    assert c.ci_low < fixed.ci_low  # type: ignore[operator]  (wider than a fixed 95%)
    assert fixed.stopping is None


def test_the_per_look_level_accounts_for_the_family() -> None:
    rng = np.random.default_rng(6)
    base = _side("base", _simulate(rng, 1.0, 5, 15))
    family = [
        start_comparison(
            _side(f"k{k}", _simulate(rng, 1.3, 5, 15)),
            base,
            "code",
            1,
            kind="spec",
            k=k,
            blocked=False,
        )
        for k in (1, 2)
    ]
    looks = [5, 10, 15, 20]
    for c in decide(family, delta=0.02, design=Design(kind="adaptive", looks=looks)):
        assert c.stopping is not None and c.stopping.planned_looks == looks
        assert c.stopping.per_look_alpha == sequential_alpha(looks, 0.05 / 2)
        assert c.stopping.look_number == 1


def test_no_stopping_before_the_first_look() -> None:
    rng = np.random.default_rng(4)
    arm, base = _side("spec", _simulate(rng, 1.5, 3, 15)), _side("base", _simulate(rng, 1.0, 3, 15))
    c = _one(arm, base, Design(kind="adaptive", looks=[4, 8, 12]))
    assert c.stopping is not None and not c.stopping.can_stop
    assert c.stopping.look_number is None
    assert "next look at 4" in c.stopping.reason
