"""diagnostic.analyse.sequential: planned looks, Pocock levels, and the exact per-look level of
t intervals against a direct integration, the normal-theory limit and simulations."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps
from test_golden_numbers import independent

from diagnostic.analyse import sequential, stats


def test_pocock_levels_match_the_published_constants() -> None:
    for looks, z in {2: 2.178, 3: 2.289, 4: 2.361}.items():
        assert sps.norm.isf(sequential.pocock_alpha(looks) / 2) == pytest.approx(z, abs=0.003)
    with pytest.raises(ValueError):
        sequential.pocock_alpha(5)


def test_look_number() -> None:
    assert sequential.look_number(5, (3, 5, 8, 12)) == 2
    assert sequential.look_number(4, (3, 5, 8, 12)) is None


def test_planned_looks_are_equally_spaced_with_a_usable_first_look() -> None:
    assert sequential.planned_looks(16) == [4, 8, 12, 16]
    assert sequential.planned_looks(18) == [5, 9, 14, 18]
    assert sequential.planned_looks(12) == [4, 8, 12]
    assert sequential.planned_looks(8) == [4, 8]
    assert sequential.planned_looks(7) == [7] and sequential.planned_looks(1) == [1]
    assert sequential.planned_looks(50) == [13, 25, 38, 50]
    for n in range(1, 120):
        looks = sequential.planned_looks(n)
        assert looks[-1] == n and len(looks) <= 4 and looks == sorted(set(looks))
        assert len(looks) == 1 or looks[0] >= 4


def test_one_look_is_the_t_interval_itself() -> None:
    for n, level in ((3, 0.05), (8, 0.001), (40, 0.02)):
        assert sequential.overall_alpha((n,), level) == pytest.approx(level, rel=1e-10)
    assert sequential.sequential_alpha((7,)) == 0.05
    assert sequential.sequential_alpha((7,), 0.01) == 0.01


def test_two_looks_match_a_direct_integration_of_the_sufficient_statistics() -> None:
    """tests/golden/independent.py (R13) integrates the sums and χ² sums of squares instead."""
    for n1, n2, level in ((4, 8, 0.0276), (4, 8, 0.0004), (6, 13, 0.03)):
        direct = independent.two_look_rejection(n1, n2, level)
        assert sequential.overall_alpha((n1, n2), level) == pytest.approx(direct, rel=1e-8)


def test_the_quadrature_has_converged() -> None:
    """Twice the nodes move the overall level by less than 1e-8 relative on planned designs
    (measured: 3e-10) and 1e-7 with 3 blocks first and 2 between (measured: 1.5e-8)."""
    for looks, rel in (
        ((4, 8), 1e-8),
        ((4, 8, 12, 16), 1e-8),
        ((10, 19, 29, 38), 1e-8),
        ((4, 7, 10, 13), 1e-8),
        ((3, 6, 9, 12), 1e-7),
        ((3, 5, 8, 12), 1e-7),
        ((4, 6, 8, 10, 12), 1e-7),
    ):
        for level in (0.02, 0.0002):
            exact = sequential.overall_alpha(looks, level, nodes=64)
            assert sequential.overall_alpha(looks, level) == pytest.approx(exact, rel=rel)


def test_many_blocks_give_pococks_normal_theory_level() -> None:
    """t intervals on many blocks are z intervals: the level from 125 and 250 blocks per look,
    extrapolated in 1/n (Richardson), is the level at which known-variance z statistics
    (correlation √(i/j) between looks i < j) reject with probability 0.05: scipy's
    multivariate normal (Genz), and Pocock's published constants."""
    for k, z_pocock in ((2, 2.178), (3, 2.289), (4, 2.361)):
        fewer = sequential.sequential_alpha([125 * i for i in range(1, k + 1)])
        more = sequential.sequential_alpha([250 * i for i in range(1, k + 1)])
        z = float(sps.norm.isf((2 * more - fewer) / 2))
        i = np.arange(1, k + 1)
        corr = np.sqrt(np.minimum.outer(i, i) / np.maximum.outer(i, i))
        inside = sps.multivariate_normal.cdf(
            np.full(k, z),
            mean=np.zeros(k),
            cov=corr,
            lower_limit=np.full(k, -z),
            abseps=1e-7,
            releps=1e-7,
            rng=np.random.default_rng(1),
        )
        assert 1 - inside == pytest.approx(0.05, rel=2e-5)
        assert z == pytest.approx(z_pocock, abs=0.0006)
        assert more < sequential.POCOCK_ALPHA[k]  # t intervals cost: a lower level


def _paired_min_p(looks: tuple[int, ...], sims: int, seed: int) -> np.ndarray:
    """Brute force: smallest paired t p-value over the looks, blocks drawn one by one."""
    d = np.random.default_rng(seed).standard_normal((sims, looks[-1]))
    p = np.ones(sims)
    for n in looks:
        t = d[:, :n].mean(axis=1) / (d[:, :n].std(axis=1, ddof=1) / math.sqrt(n))
        p = np.minimum(p, 2 * sps.t.sf(np.abs(t), n - 1))
    return p


def test_sequential_alpha_keeps_the_overall_level_where_pocock_creeps_above() -> None:
    looks = (4, 8, 12, 16)
    alpha = sequential.sequential_alpha(looks)
    assert alpha == sequential.sequential_alpha(list(looks))
    assert sequential.overall_alpha(looks, alpha) == pytest.approx(0.05, rel=1e-9)
    pocock = sequential.overall_alpha(looks, sequential.pocock_alpha(4))
    assert pocock > 0.054  # the known-variance level with t intervals: 5.44%
    min_p = _paired_min_p(looks, 40_000, seed=11)  # SE 0.0011
    assert float(np.mean(min_p < alpha)) == pytest.approx(0.05, abs=0.0045)
    assert float(np.mean(min_p < sequential.pocock_alpha(4))) == pytest.approx(pocock, abs=0.0045)
    # Segment sums and χ² within-sums (power simulations draw these): 2^18 paths, SE 0.0004.
    mean, se = sequential.t_look_paths(looks, 0.0)
    p = 2 * sps.t.sf(np.abs(mean / se), np.asarray(looks) - 1)
    assert float(np.mean(p.min(axis=1) < alpha)) == pytest.approx(0.05, abs=0.0017)
    assert sequential.sequential_alpha(looks, 0.05 / 3) < alpha  # Bonferroni over a family


def test_pocock_looks_keep_the_false_positive_rate_near_five_percent() -> None:
    """Under no difference, peeking at 4, 8, 12 restarts at 95% calls a difference far more
    often than 5%; the calibrated per-look level keeps it near 5% (16% vs 5%)."""
    rng = np.random.default_rng(7)
    looks, sims = (4, 8, 12), 300
    naive = pocock = 0
    level = 1 - sequential.sequential_alpha(looks)
    for _ in range(sims):
        a, b = rng.normal(0, 0.1, 12), rng.normal(0, 0.1, 12)
        cis = [stats.welch_ratio_ci(a[:n], b[:n]) for n in looks]
        naive += any(not (c.low < 1 < c.high) for c in cis)  # type: ignore[operator]
        adj = [stats.welch_ratio_ci(a[:n], b[:n], level) for n in looks]
        pocock += any(not (c.low < 1 < c.high) for c in adj)  # type: ignore[operator]
    assert naive / sims > 0.09
    assert pocock / sims < 0.075


def test_designs_outside_the_method_are_refused() -> None:
    for looks in ((2, 6), (4, 5), (4, 8, 1200), ()):
        with pytest.raises(ValueError):
            sequential.overall_alpha(looks, 0.01)
