"""diagnostic.analyse.compare: restart-aware ratio intervals, one deciding interval per
comparison, families, Pocock stopping."""

from __future__ import annotations

import math

import numpy as np
import pytest

from diagnostic.analyse import stats
from diagnostic.analyse.compare import Side, decide, ratio_ci, start_comparison
from diagnostic.analyse.family import simultaneous_intervals
from diagnostic.analyse.requests import Sample
from diagnostic.analyse.sequential import sequential_alpha
from diagnostic.schema.analysis import ALL_WORKLOADS
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
    assert c.verdict == "WITHHELD" and c.more_restarts_needed == 3
    # One centre: the ratio of the two restart means, as every table shows it.
    assert c.ratio == pytest.approx((4005 / 4) / 600)
    assert c.ci_low is not None and c.ci_low > 1.02 and c.ci_level == 0.95
    assert c.family_size == 1 and not c.headline


def test_one_restart_against_several_gets_no_verdict() -> None:
    arm = _side("spec", [[1000.0, 1010.0, 990.0, 1005.0]])
    base = _side("base", [[600.0, 610.0, 590.0], [820.0, 800.0, 805.0]])
    c = _one(arm, base)
    assert c.interval_method == "within-process" and c.withheld
    assert c.verdict == "WITHHELD"


def _family(rng: np.random.Generator, blocked: bool, ratios: list[float], blocks: int = 5):  # type: ignore[no-untyped-def]
    base = _side("base", _simulate(rng, 1.0, blocks, 15), blocks=blocked)
    family = [
        start_comparison(
            _side(f"k{k}", _simulate(rng, r, blocks, 15), blocks=blocked),
            base,
            "code",
            1,
            kind="spec",
            k=k,
            blocked=blocked,
        )
        for k, r in zip((1, 3, 5, 7), ratios, strict=False)
    ]
    aa = start_comparison(
        _side("base-aa", _simulate(rng, 1.0, blocks, 15), blocks=blocked),
        base,
        "code",
        1,
        kind="aa",
        k=None,
        blocked=blocked,
    )
    return base, family, aa


def test_an_unblocked_family_is_simultaneous_by_bonferroni_and_printed_as_deciding() -> None:
    rng = np.random.default_rng(1)
    base, family, aa = _family(rng, False, [1.3, 1.02, 0.7])
    out = decide([*family, aa], delta=0.02, design=FIXED)
    p = [c.p_value for c in out[:3]]
    assert [c.p_adjusted for c in out[:3]] == pytest.approx(stats.bh_adjust(p))  # type: ignore[arg-type]
    for c, pending in zip(out[:3], family, strict=True):
        assert c.family_size == 3 and c.ci_level == pytest.approx(1 - 0.05 / 3)
        assert c.ci_label == "simultaneous 95% CI over 3 comparisons (Bonferroni; each 98.3%)"
        wide = ratio_ci(pending.arm, base, blocked=False, level=1 - 0.05 / 3).ci
        assert (c.ci_low, c.ci_high) == (wide.low, wide.high)  # the printed one decided
        assert c.ci_low < pending.result.ci.low  # type: ignore[operator]
        assert c.verdict == stats.verdict(c.ci_low, c.ci_high, 0.02)
    assert out[0].verdict == "WIN" and out[2].verdict == "LOSS"
    assert out[1].verdict == "INCONCLUSIVE" and out[1].lean in ("faster", "slower")
    # The A/A check is not a member of the family: it decides at 95% alone.
    assert out[3].ci_level == 0.95 and out[3].family_size == 1 and out[3].ci_label == "95% CI"


def test_a_blocked_family_takes_sidaks_level_on_each_members_own_variance() -> None:
    rng = np.random.default_rng(1)
    _, family, aa = _family(rng, True, [1.3, 1.02, 0.7, 1.1])
    out = decide([*family, aa], delta=0.02, design=FIXED)
    diffs = [p.block_diffs() for p in family]
    expected = simultaneous_intervals(diffs, 0.05)
    for c, pending, iv in zip(out[:4], family, expected, strict=True):
        assert c.interval_method == "paired-log-block-ratios" and c.family_size == 4
        assert (math.log(c.ci_low), math.log(c.ci_high)) == pytest.approx((iv.low, iv.high))  # type: ignore[arg-type]
        assert c.ratio == pytest.approx(pending.result.ci.ratio)  # one centre
        # each interval alone is wider than 95%, narrower than Bonferroni's 1 - 0.05/4
        assert 0.95 < c.ci_level < 1 - 0.05 / 4 and c.ci_level == pytest.approx(iv.level)
        assert c.ci_label.startswith("simultaneous 95% CI over 4 comparisons (each 9")
        assert c.verdict == stats.verdict(c.ci_low, c.ci_high, 0.02)
    assert all(iv.df == 4 for iv in expected)  # each member's own 5 blocks, nothing pooled
    assert out[0].verdict == "WIN" and out[2].verdict == "LOSS"
    assert out[4].kind == "aa" and out[4].ci_label == "95% CI" and not out[4].withheld


def test_fewer_than_three_restarts_a_side_get_no_verdict_and_leave_the_family() -> None:
    rng = np.random.default_rng(2)
    _, family, _ = _family(rng, True, [1.5, 1.5], blocks=2)
    out = decide(family, delta=0.02, design=FIXED)
    for c in out:
        assert c.withheld and c.verdict == "WITHHELD" and c.family_size == 1
        assert c.ci_level == 0.95 and c.ci_low < c.ratio < c.ci_high  # type: ignore[operator]
        assert c.label == "fewer than 3 restarts on a side: no verdict"
        assert c.more_restarts_needed == 3 and not c.headline


def test_the_all_workloads_row_is_derived_shown_and_never_in_the_family() -> None:
    rng = np.random.default_rng(3)
    base = _side("base", _simulate(rng, 1.0, 5, 15), blocks=True)
    arm = _side("k3", _simulate(rng, 1.5, 5, 15), blocks=True)
    rows = [
        start_comparison(arm, base, w, 1, kind="spec", k=3, blocked=True)
        for w in ("code", ALL_WORKLOADS)
    ]
    code, pooled = decide(rows, delta=0.02, design=FIXED)
    assert code.verdict == "WIN" and code.family_size == 1 and code.ci_label == "95% CI"
    assert pooled.withheld and pooled.verdict == "WITHHELD" and not pooled.headline
    assert pooled.label is not None and pooled.label.startswith("derived: every workload pooled")
    assert pooled.ci_level == 0.95 and pooled.ci_low is not None


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
    printed = c.ci_label.removeprefix("Pocock-adjusted 95% CI, look 1 of 3 (").removesuffix("%)")
    assert float(printed) / 100 == pytest.approx(1 - alpha, abs=5e-4)  # its own level, shown
    assert s.can_stop and s.verdict_at_look == "WIN" == c.verdict
    fixed = _one(arm, base)
    assert c.ci_low < fixed.ci_low  # type: ignore[operator]  (wider than a fixed 95%)
    assert fixed.stopping is None


def test_an_adaptive_plan_with_one_look_is_decided_and_labelled_as_a_fixed_one() -> None:
    """One planned look: the interval, level and label of a fixed plan (no "look 1 of 1")."""
    rng = np.random.default_rng(3)
    arm = _side("spec", _simulate(rng, 1.5, 4, 15, sd=0.03))
    base = _side("base", _simulate(rng, 1.0, 4, 15, sd=0.03))
    one = _one(arm, base, Design(kind="adaptive", looks=[4]))
    fixed = _one(arm, base)
    assert one.ci_label == fixed.ci_label == "95% CI" and "look" not in one.ci_label
    assert (one.ci_low, one.ci_high, one.ci_level) == (fixed.ci_low, fixed.ci_high, 0.95)


def test_the_per_look_level_is_family_wise() -> None:
    """Each look's family shares Šidák's level within the Pocock per-look level:
    the family as a whole, not each comparison, spends the look's α."""
    rng = np.random.default_rng(6)
    _, family, _ = _family(rng, True, [1.3, 1.3], blocks=5)
    looks = [5, 10, 15, 20]
    out = decide(family, delta=0.02, design=Design(kind="adaptive", looks=looks))
    alpha = sequential_alpha(looks, 0.05)
    expected = simultaneous_intervals([p.block_diffs() for p in family], alpha)
    for c, iv in zip(out, expected, strict=True):
        assert c.stopping is not None and c.stopping.planned_looks == looks
        assert c.stopping.per_look_alpha == alpha and c.stopping.look_number == 1
        assert math.log(c.ci_low) == pytest.approx(iv.low)  # type: ignore[arg-type]
        assert c.ci_label.startswith("Pocock-adjusted 95% CI, look 1 of 4, simultaneous over 2")


def test_an_arm_stopped_at_a_look_keeps_the_interval_its_look_decided_with() -> None:
    """One arm stopped at look 1 (4 blocks), the other went on to look 2 (8 blocks): the
    stopped arm's interval is the one of the family at look 1 (every comparison on its
    first 4 blocks), however the family changed after."""
    rng = np.random.default_rng(7)
    base = _side("base", _simulate(rng, 1.0, 8, 15), blocks=True)
    stopped = _side("k1", _simulate(rng, 1.6, 4, 15), blocks=True)
    going = _side("k3", _simulate(rng, 1.05, 8, 15), blocks=True)
    design = Design(kind="adaptive", looks=[4, 8])
    pending = [
        start_comparison(arm, base, "code", 1, kind="spec", k=k, blocked=True)
        for k, arm in ((1, stopped), (3, going))
    ]
    late = decide(pending, delta=0.02, design=design)
    at_look_1 = simultaneous_intervals(
        [p.block_diffs(4) for p in pending], sequential_alpha([4, 8])
    )
    assert late[0].stopping is not None and late[0].stopping.look_number == 1
    assert math.log(late[0].ci_low) == pytest.approx(at_look_1[0].low)  # type: ignore[arg-type]
    assert late[1].stopping is not None and late[1].stopping.look_number == 2


def test_no_stopping_before_the_first_look() -> None:
    rng = np.random.default_rng(4)
    arm, base = _side("spec", _simulate(rng, 1.5, 3, 15)), _side("base", _simulate(rng, 1.0, 3, 15))
    c = _one(arm, base, Design(kind="adaptive", looks=[4, 8, 12]))
    assert c.stopping is not None and not c.stopping.can_stop
    assert c.stopping.look_number is None
    assert "next look at 4" in c.stopping.reason
