"""The time-on-site planner against hand-computed values: costs from run records, Kalibera &
Jones variance components, m* with its floor and cap, the wall-clock of what is left; and
the same on the recorded CPU sample (samples/llamacpp-cpu-gemma3)."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from diagnostic.analyse import pairing
from diagnostic.analyse.requests import load_samples
from diagnostic.bundle.store import Bundle
from diagnostic.measure.schedule import EstimateAssumptions, build_schedule
from diagnostic.measure.sweep import planner
from diagnostic.schema.bundle import LaunchInfo, RunInfo

SAMPLE = Path(__file__).parents[1] / "samples" / "llamacpp-cpu-gemma3"


def _frame(rows: list[tuple[str, int, str, bool, float, float]]) -> pd.DataFrame:
    """(arm, restart, workload, warmup, decode tok/s, e2e s) rows, as load_samples makes them
    (every request on the same prompt, at concurrency 1)."""
    return pd.DataFrame(
        [
            {
                "arm": arm,
                "restart": restart,
                "workload": workload,
                "concurrency": 1,
                "prompt_id": "p",
                "warmup": warmup,
                "error": None,
                "excluded": "warmup" if warmup else "",
                "decode_tps": tps,
                "e2e_s": e2e,
            }
            for arm, restart, workload, warmup, tps, e2e in rows
        ]
    )


def _costs(startup: float = 90.0, request: float = 2.0, warmup: float = 2.0) -> planner.Costs:
    return planner.Costs(
        startup_s=startup,
        stop_s=0.0,
        warmup_s={"code": warmup},
        request_s={"code": request},
        source="by hand",
    )


def test_variance_components_per_arm_and_workload_by_hand() -> None:
    """log tok/s of restart 0: 1, 3; restart 1: 5, 7 (one prompt: nothing to remove). S1² =
    mean(2, 2) = 2; restart means 2 and 6, S2² = 8; m = 2, T2² = 8 − 2/2 = 7. Warm-ups and
    one-restart arms are left out; without a reference, P² is the arm's own prompt spread."""
    e = math.exp
    rows = [("a", 0, "code", True, e(9.0), 1.0)]  # a warm-up: not measured
    rows += [("a", 0, "code", False, e(x), 1.0) for x in (1.0, 3.0)]
    rows += [("a", 1, "code", False, e(x), 1.0) for x in (5.0, 7.0)]
    rows += [("b", 0, "code", False, e(x), 1.0) for x in (1.0, 2.0)]  # one restart only
    noise = planner.noise_components(_frame(rows))
    assert noise[["arm", "workload", "restarts"]].values.tolist() == [["a", "code", 2]]
    row = noise.iloc[0]
    assert (row.s1_sq, row.s2_sq, row.m, row.t2_sq) == pytest.approx((2.0, 8.0, 2.0, 7.0))
    assert (row.prompts, row.p2_sq) == (1, 0.0)


@pytest.mark.parametrize(
    ("s1_sq", "t2_sq", "expected", "bound"),
    [
        # restart 90 + 2 s warm-up = 92 s against 2 s per request: 46×
        (2.0, 7.0, 5, "(floor)"),  # sqrt(46 · 2/7) = 3.63 → 4, raised to the floor 5
        (2.0, 0.1, 31, ""),  # sqrt(46 · 20) = 30.3 → 31
        (2.0, 0.001, 60, "(cap)"),  # sqrt(46 · 2000) = 303 → the cap 60
        (2.0, -0.5, 15, "not resolved yet"),  # no restart noise seen yet: keep 15
    ],
)
def test_requests_per_restart_by_hand(
    s1_sq: float, t2_sq: float, expected: int, bound: str
) -> None:
    noise = pd.DataFrame([{"arm": "a", "workload": "code", "s1_sq": s1_sq, "t2_sq": t2_sq}])
    chosen = planner.plan_requests(_costs(), noise, current=15, floor=5, cap=60)
    assert chosen.requests == expected
    assert bound in chosen.why and "92.0 s against 2.00 s" in chosen.why


def test_requests_pool_the_components_over_arms_and_workloads() -> None:
    """S1² mean (1 + 3)/2 = 2, T2² mean (0.05 + 0.15)/2 = 0.1: sqrt(46 · 20) → 31."""
    noise = pd.DataFrame(
        [
            {"arm": "a", "workload": "code", "s1_sq": 1.0, "t2_sq": 0.05},
            {"arm": "b", "workload": "code", "s1_sq": 3.0, "t2_sq": 0.15},
        ]
    )
    assert planner.plan_requests(_costs(), noise, current=15, floor=5, cap=60).requests == 31


def test_requests_with_prompt_by_arm_variance_by_hand() -> None:
    """The reference (P² None) and a speculative arm whose prompt effects differ from it by
    P² = 0.14: one side carries half, 0.07, over 15 prompts; with S1² = 0.02, T2² = 0.1 and a
    92 s start against 2 s requests, 7 rotating requests beat serving all 15
    (tests/test_pairing.py by hand)."""
    nan = float("nan")
    noise = pd.DataFrame(
        [
            {"arm": "a", "s1_sq": 0.02, "t2_sq": 0.1, "p2_sq": nan, "prompts": 15},
            {"arm": "b", "s1_sq": 0.02, "t2_sq": 0.1, "p2_sq": 0.14, "prompts": 15},
        ]
    )
    assert pairing.pooled_noise(noise) == pytest.approx((0.02, 0.1, 0.07, 15))
    chosen = planner.plan_requests(_costs(), noise, current=15, floor=5, cap=60)
    assert chosen.requests == 7
    assert "P² = 0.07 over 15 prompts" in chosen.why and "prompt effects removed" in chosen.why
    # sqrt(2 · 0.07) = 37.4%: the prompt-by-arm CV of a comparison, both sides
    words = "restart CV 31.6%, request CV 14.1% on one prompt, prompt-by-arm CV 37.4% (measured"
    assert pairing.noise_words(noise).startswith(words)


def test_costs_from_run_records_by_hand() -> None:
    """Start-up: mean of run.json's launch-to-healthy (10, 20 → 15 s); per workload the mean
    send-to-end of the warm-ups (3 s) and of the measured requests (1, 2 → 1.5 s)."""
    runs = [
        RunInfo(arm="a", restart=r, launch=LaunchInfo(command="x", startup_s=s))
        for r, s in ((0, 10.0), (1, 20.0))
    ]
    rows = [("a", 0, "code", True, 10.0, 3.0), ("a", 0, "code", False, 10.0, 1.0)]
    rows += [("a", 1, "code", False, 10.0, 2.0)]
    costs = planner.measured_costs(_frame(rows), runs, stop_s=5.0, source="block 1")
    assert costs is not None
    assert costs.startup_s == pytest.approx(15.0)
    assert costs.warmup_s == pytest.approx({"code": 3.0})
    assert costs.request_s == pytest.approx({"code": 1.5})
    # one start with 1 warm-up and 15 requests: 15 + 5 + 3 + 15 · 1.5 = 45.5 s
    assert costs.per_start(15, 1) == pytest.approx(45.5)
    assert planner.measured_costs(_frame(rows), [], stop_s=5.0, source="x") is None


def test_assumed_costs_and_what_is_left_by_hand() -> None:
    """Assumed 60 s start-up, 5 s stop, 0.5 + 256/50 = 5.62 s per request: a start of
    1 + 15 requests on one workload is 65 + 16 · 5.62 = 154.92 s. Two arms × 3 blocks; after
    the second start, with arm b closed, two starts of a are left."""
    costs = planner.assumed_costs(EstimateAssumptions(), ["code"], 256)
    assert costs.per_start(15, 1) == pytest.approx(154.92)
    schedule = build_schedule(["a", "b"], restarts=3, seed=1)
    left = planner.remaining_s(costs, schedule, 1, {"b"}, requests=15, warmup=1)
    assert left == pytest.approx(2 * 154.92)
    assert planner.wall_clock(costs, 6, requests=15, warmup=1) == pytest.approx(6 * 154.92)


def test_the_recorded_cpu_sample_gives_its_own_costs_and_components() -> None:
    """On the real CPU sample: the start-up is the mean of its run.json values; every restart
    served all 15 prompts once, so the prompt-adjusted restart levels are the restart means
    and S2² their variance (S1² by hand: tests/test_pairing.py); m* stays inside [floor, cap]."""
    bundle = Bundle.open(SAMPLE)
    loaded = load_samples(bundle)
    costs = planner.measured_costs(loaded.frame, loaded.runs, stop_s=5.0, source="sample")
    assert costs is not None
    startups = [r.launch.startup_s for r in loaded.runs if r.launch and r.launch.startup_s]
    assert costs.startup_s == pytest.approx(sum(startups) / len(startups))
    assert set(costs.request_s) == set(bundle.manifest.plan.workloads)
    noise = planner.noise_components(loaded.frame, "baseline")
    assert len(noise) == len(bundle.manifest.plan.arms) * len(bundle.manifest.plan.workloads)
    f = loaded.frame
    base = f[(f.arm == "baseline") & (f.workload == "code") & (f.excluded == "")]
    logs = base.assign(x=base.decode_tps.astype(float).map(math.log)).groupby("restart")["x"]
    row = noise[(noise.arm == "baseline") & (noise.workload == "code")].iloc[0]
    assert row.s2_sq == pytest.approx(logs.mean().var(ddof=1))
    assert row.prompts == 15 and math.isnan(row.p2_sq)  # the reference itself
    chosen = planner.plan_requests(costs, noise, current=15)
    assert 5 <= chosen.requests <= 60


def test_the_day_estimate_of_both_plans_by_hand() -> None:
    """2 arms, 8 blocks, looks 4 and 8, 1 warm-up + 15 requests, 90 s start-up, 2 s requests:
    a start is 90 + 16 · 2 = 122 s, with m* = 5 (S1²/T2² = 2/7: the floor) 102 s. Fixed:
    16 · 122 = 1952 s. Adaptive: blocks 1-2 at 15 requests (4 · 122 = 488 s), then m*:
    decided at block 4, 488 + 4 · 102 = 896 s; at block 8, 488 + 12 · 102 = 1712 s."""
    noise = pd.DataFrame([{"arm": "a", "workload": "code", "s1_sq": 2.0, "t2_sq": 7.0}])
    day = planner.day_estimate(
        _costs(), noise, arms=2, restarts=8, looks=[4, 8], requests=15, warmup=1
    )
    assert day.fixed_s == pytest.approx(1952.0)
    assert day.adaptive.requests == 5
    assert day.adaptive_by_look_s == pytest.approx([896.0, 1712.0])


def test_power_estimate_sizes_both_designs_with_the_family_intervals() -> None:
    """Restart CV 5%, request CV 3%, 7 comparisons: the fixed plan's 90% needs the fewest
    blocks whose non-central t power at the family's critical value reaches 90%
    (tests/test_power.py: win_rate at one look is that tail); the adaptive maximum is near it,
    lower with the A/A repeat pooled into the reference than without."""
    from scipy import stats as sps

    from diagnostic.analyse.power import planned_critical

    noise = pd.DataFrame([{"s1_sq": math.log1p(0.03**2), "t2_sq": math.log1p(0.05**2)}])
    sd = math.sqrt(2 * (math.log1p(0.05**2) + math.log1p(0.03**2) / 15))

    def tail(n: int) -> float:
        c, df = planned_critical(7, n, 0.05)
        return float(sps.nct.sf(c, df, (math.log(1.1) - math.log(1.02)) / sd * math.sqrt(n)))

    need = next(n for n in range(3, 100) if tail(n) >= 0.9)
    kwargs = {"restarts": 5, "requests": 15, "adaptive_requests": 5, "speculative": 7}
    p = planner.power_estimate(noise, keys=1, pooled=True, start_s=122.0, arms=9, **kwargs)
    assert p.family == 7 and p.fixed == pytest.approx(tail(5), abs=0.01)
    assert p.fixed_restarts is not None and abs(p.fixed_restarts - need) <= 1
    assert p.adaptive_restarts is not None and need - 1 <= p.adaptive_restarts <= 1.4 * need
    alone = planner.power_estimate(noise, keys=1, pooled=False, start_s=122.0, arms=9, **kwargs)
    assert alone.adaptive_restarts is not None and alone.adaptive_restarts > p.adaptive_restarts
    # A day of 9 arms at 122 s a start holds 19 blocks: +10% is decided.
    assert p.day.blocks == 19 and p.day.decides_target and p.day.smallest is not None
