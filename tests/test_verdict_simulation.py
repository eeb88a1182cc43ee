"""End-to-end error rates of the verdicts: seeded bundles written with the real Bundle API and
decided by analyse() (benchmarks/verdict_simulation.py, small). Seeded, so the counts are the
same on every run: a failure is a change in the analysis, never bad luck.

Allowances: a rate estimated from n bundles has a binomial standard error
SE = sqrt(p·(1−p)/n) at the rate p the rule promises; each bound below is that promise
widened by 3·SE (one-sided 0.13% chance of failing by simulation noise alone, had the seed
been drawn at random)."""

from __future__ import annotations

import math
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from test_benchmarks_smoke import load_benchmark

pytestmark = pytest.mark.slow

SEED = 20261201
ALPHA = 0.05  # false WIN + LOSS under no effect, per comparison (docs/statistics.md, Defaults)
COVERAGE = (0.93, 0.97)  # the fixed design's 95% interval at m = 1


def _se(p: float, n: int) -> float:
    return math.sqrt(p * (1 - p) / n)


@pytest.fixture(scope="module")
def sim() -> ModuleType:
    return load_benchmark("verdict_simulation")


@pytest.fixture(scope="module")
def scratch(sim: ModuleType) -> Iterator[Path]:
    path = sim.scratch_dir(None)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _run(sim: ModuleType, scratch: Path, design: str, sims: int, looks: tuple[int, ...]):
    truth = sim.Truth(ratios=(1.0,), restart_cv=0.10, request_cv=0.05, requests=15)
    case = sim.Case(design, truth, sims, restarts=5, looks=looks, margin=0.02)
    with sim.workers(min(4, os.cpu_count() or 1)) as pool:  # same counts with any number
        return sim.run_case(case, SEED, scratch, pool)


def test_fixed_design_false_decisions_and_coverage(sim: ModuleType, scratch: Path) -> None:
    """200 blocked bundles, 5 blocks, restart CV 10%, no effect: false WIN + LOSS ≤ 5% + 3·SE
    (9.6%); the deciding interval (one comparison, 95%) covers the true ratio 1 in 93–97%
    ± 3·SE (88.4–100%)."""
    n = 200
    s = _run(sim, scratch, "fixed", n, (5,))
    assert s.n == n and s.blocks == 5
    assert s.level == pytest.approx(0.95)
    false, _ = s.false_rate
    assert false <= ALPHA + 3 * _se(ALPHA, n), sim.table([s])
    coverage, _ = s.coverage
    low, high = COVERAGE[0] - 3 * _se(0.95, n), COVERAGE[1] + 3 * _se(0.95, n)
    assert low <= coverage <= high, sim.table([s])


def test_adaptive_design_false_decisions(sim: ModuleType, scratch: Path) -> None:
    """100 adaptive bundles (looks after 4 and 8 blocks, stopping at the first look that
    decides), restart CV 10%, no effect: false WIN + LOSS ≤ 5% + 3·SE (11.5%)."""
    n = 100
    s = _run(sim, scratch, "adaptive", n, (4, 8))
    assert s.n == n and 4 <= s.blocks <= 8
    assert s.level is not None and s.level > 0.95  # the Pocock per-look level is stricter
    false, _ = s.false_rate
    assert false <= ALPHA + 3 * _se(ALPHA, n), sim.table([s])


def test_per_arm_stopping_keeps_the_error_rate_and_the_power(
    sim: ModuleType, scratch: Path
) -> None:
    """100 bundles of one family: an arm with no effect and one 10% faster, restart CV 5%,
    looks after 4, 8, 12 and 16 blocks, the design `sweep --adaptive` records: the A/A
    repeat in every block and pooled into the reference, the futility stop against +10%; at
    each look an arm that can stop (decided, or futile) gets no more blocks, the baseline and
    its repeat go on while one is open. False decisions (any verdict the truth contradicts,
    over both arms) ≤ 5% + 3·SE (11.5%); WIN on the 10% arm ≥ 90% − 3·SE (81%); the arm
    with no effect stops for futility in most bundles, so arms ran fewer blocks."""
    n = 100
    truth = sim.Truth(ratios=(1.0, 1.10), restart_cv=0.05, request_cv=0.05, requests=15)
    case = sim.Case("per-arm", truth, n, restarts=16, looks=(4, 8, 12, 16), margin=0.02)
    with sim.workers(min(4, os.cpu_count() or 1)) as pool:
        s = sim.run_case(case, SEED, scratch, pool)
    table = sim.family_table([s])
    assert s.n == n
    wrong, _ = sim._rate(s.any_wrong, n)
    assert wrong <= ALPHA + 3 * _se(ALPHA, n), table
    power = s.per_arm[1]["WIN"] / n
    assert power >= 0.90 - 3 * _se(0.90, n), table
    assert s.arm_blocks < s.blocks <= 16, table
    assert s.per_arm[0]["INCONCLUSIVE"] / n >= 0.5, table  # the null arm: futile, undecided
