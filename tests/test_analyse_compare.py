"""diagnostic.analyse.compare: restart-aware ratio intervals, families, Pocock stopping."""

from __future__ import annotations

import math

import numpy as np
import pytest

from diagnostic.analyse import stats
from diagnostic.analyse.compare import (
    DEFAULT_LOOKS,
    Side,
    bundle_looks,
    finish_family,
    ratio_ci,
    start_comparison,
)
from diagnostic.analyse.requests import Sample
from diagnostic.schema.bundle import PlanSpec


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


def test_one_restart_each_falls_back_to_within_process_and_says_so() -> None:
    arm = _side("spec", [[1000.0, 1010.0, 990.0, 1005.0]])
    base = _side("base", [[600.0, 610.0, 590.0]])
    (c,) = finish_family(
        [start_comparison(arm, base, "code", 1, kind="spec", k=3, blocked=False)], delta=0.02
    )
    assert c.interval_method == "within-process" and c.within_process_only
    assert c.label == "within-process only; restart variance not measured"
    assert c.stopping is None and c.verdict == "WIN" and not c.verdict_withheld


def test_one_restart_against_several_gets_no_verdict() -> None:
    # The baseline's restarts show restart noise; one spec process cannot be judged by the
    # spread of its own requests (the GPU validation sample's interrupted ngram-k7 arm).
    arm = _side("spec", [[1000.0, 1010.0, 990.0, 1005.0]])
    base = _side("base", [[600.0, 610.0, 590.0], [820.0, 800.0, 805.0]])
    (c,) = finish_family(
        [start_comparison(arm, base, "code", 1, kind="spec", k=3, blocked=False)], delta=0.02
    )
    assert c.interval_method == "within-process" and c.verdict_withheld
    assert c.verdict == "INCONCLUSIVE" and c.ci_low is not None and c.ci_low > 1.02
    assert c.label is not None and "verdict withheld" in c.label


def test_family_gets_bh_p_values_and_bonferroni_verdict_intervals() -> None:
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
    out = finish_family(family, delta=0.02)
    p = [c.p_value for c in out]
    assert [c.p_adjusted for c in out] == pytest.approx(stats.bh_adjust(p))  # type: ignore[arg-type]
    for c in out:
        assert c.family_size == 3 and c.verdict_level == pytest.approx(1 - 0.05 / 3)
        assert c.verdict_ci_low < c.ci_low and c.verdict_ci_high > c.ci_high  # type: ignore[operator]
    assert out[0].verdict == "WIN" and out[2].verdict == "LOSS"


def test_stopping_at_a_look_that_decides() -> None:
    rng = np.random.default_rng(3)
    arm = _side("spec", _simulate(rng, 1.5, 4, 15, sd=0.03))
    base = _side("base", _simulate(rng, 1.0, 4, 15, sd=0.03))
    (c,) = finish_family(
        [start_comparison(arm, base, "code", 1, kind="spec", k=3, blocked=False)], delta=0.02
    )
    s = c.stopping
    assert DEFAULT_LOOKS == (4, 8, 12)
    assert s is not None and s.look_number == 1 and s.n_now == 4
    assert s.per_look_alpha == stats.sequential_alpha(DEFAULT_LOOKS)
    assert s.can_stop and s.verdict_at_look == "WIN"
    assert s.ci_low < c.ci_low  # type: ignore[operator]


def test_the_per_look_level_is_calibrated_for_the_looks_and_the_family() -> None:
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
    looks = (5, 10, 15, 20)
    out = finish_family(family, delta=0.02, looks=looks)
    for c in out:
        assert c.stopping is not None and c.stopping.planned_looks == list(looks)
        assert c.stopping.per_look_alpha == stats.sequential_alpha(looks, 0.05 / 2)
        assert c.stopping.look_number == 1


def test_no_stopping_between_looks() -> None:
    rng = np.random.default_rng(4)
    arm, base = _side("spec", _simulate(rng, 1.5, 5, 15)), _side("base", _simulate(rng, 1.0, 5, 15))
    (c,) = finish_family(
        [start_comparison(arm, base, "code", 1, kind="spec", k=3, blocked=False)], delta=0.02
    )
    assert c.stopping is not None and not c.stopping.can_stop
    assert c.stopping.look_number is None
    assert "next look at 8" in c.stopping.reason


def test_bundle_looks_are_the_ones_the_adaptive_sweep_plans() -> None:
    assert bundle_looks(PlanSpec(order="blocks", restarts=18)) == (5, 9, 14, 18)
    assert bundle_looks(PlanSpec(order="blocks", restarts=5)) == (5,)
    assert bundle_looks(PlanSpec(order="sequential", restarts=18)) == DEFAULT_LOOKS
    assert bundle_looks(PlanSpec()) == DEFAULT_LOOKS  # collect's bundles: manual order


def test_inconclusive_says_how_many_more_restarts() -> None:
    rng = np.random.default_rng(5)
    arm, base = (
        _side("spec", _simulate(rng, 1.06, 3, 15)),
        _side("base", _simulate(rng, 1.0, 3, 15)),
    )
    (c,) = finish_family(
        [start_comparison(arm, base, "code", 1, kind="spec", k=3, blocked=False)], delta=0.02
    )
    assert c.verdict == "INCONCLUSIVE"
    assert c.more_restarts_needed is None or c.more_restarts_needed >= 1
