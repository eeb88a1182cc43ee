"""The start schedule: interleaved blocks in seeded random order, sequential, time estimate."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from diagnostic.measure.schedule import EstimateAssumptions, build_schedule, estimate

ARMS = ["baseline", "baseline-aa", "ngram-k2", "ngram-k4", "ngram-k8"]


@given(
    n_arms=st.integers(1, 8),
    restarts=st.integers(1, 6),
    seed=st.integers(0, 2**32),
)
@settings(max_examples=100, deadline=None)
def test_every_block_starts_every_arm_once(n_arms: int, restarts: int, seed: int) -> None:
    arms = [f"a{i}" for i in range(n_arms)]
    schedule = build_schedule(arms, restarts=restarts, seed=seed)
    assert len(schedule) == n_arms * restarts
    assert [s.index for s in schedule] == list(range(len(schedule)))
    for block in range(restarts):
        starts = [s for s in schedule if s.block == block]
        assert sorted(s.arm for s in starts) == sorted(arms)
        assert all(s.restart == block for s in starts)
    # blocks come one after another: no block begins before the previous one ends
    assert [s.block for s in schedule] == sorted(s.block or 0 for s in schedule)
    assert len({(s.arm, s.restart) for s in schedule}) == len(schedule)


def test_the_seed_fixes_the_order_and_changes_it() -> None:
    one = build_schedule(ARMS, restarts=4, seed=1)
    assert one == build_schedule(ARMS, restarts=4, seed=1)
    orders = {
        tuple(s.arm for s in build_schedule(ARMS, restarts=4, seed=seed)) for seed in range(5)
    }
    assert len(orders) > 1


def test_blocks_are_shuffled_independently() -> None:
    schedule = build_schedule(ARMS, restarts=6, seed=0)
    per_block = {tuple(s.arm for s in schedule if s.block == b) for b in range(6)}
    assert len(per_block) > 1, "every block has the same order: drift would land on one arm"


def test_order_is_balanced_over_many_seeds() -> None:
    # Over many seeds each arm is first in a block about equally often: the shuffle is fair.
    firsts: Counter[str] = Counter()
    for seed in range(400):
        schedule = build_schedule(ARMS, restarts=1, seed=seed)
        firsts[schedule[0].arm] += 1
    assert min(firsts.values()) > 400 / len(ARMS) * 0.6


def test_sequential_runs_every_restart_of_an_arm_together() -> None:
    schedule = build_schedule(["a", "b"], restarts=3, order="sequential")
    assert [(s.arm, s.restart, s.block) for s in schedule] == [
        ("a", 0, None),
        ("a", 1, None),
        ("a", 2, None),
        ("b", 0, None),
        ("b", 1, None),
        ("b", 2, None),
    ]


def test_restarts_must_be_positive() -> None:
    with pytest.raises(ValueError, match="restarts"):
        build_schedule(["a"], restarts=0)


def test_estimate_adds_startup_requests_and_stop() -> None:
    a = EstimateAssumptions(startup_s=10, stop_s=2, decode_tps=32, request_overhead_s=0.5)
    e = estimate(6, workloads=2, requests=3, warmup=1, max_tokens=64, assumptions=a)
    per_request = 0.5 + 64 / 32
    assert e.requests == 6 * 2 * 4
    assert e.per_start_s == pytest.approx(10 + 2 + 8 * per_request)
    assert e.total_s == pytest.approx(6 * e.per_start_s)
    more = estimate(
        6, workloads=2, requests=3, warmup=1, max_tokens=64, concurrency_levels=2, assumptions=a
    )
    assert more.requests == 2 * e.requests
