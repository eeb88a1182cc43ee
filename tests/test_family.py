"""diagnostic.analyse.family: moderated block variances, the block correlation, the max-|t|
critical value and the simultaneous intervals built from them."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import special
from scipy import stats as sps

from diagnostic.analyse.family import (
    block_correlation,
    equicorrelated_critical,
    max_t_critical,
    moderated_prior,
    moderated_variances,
    simultaneous_intervals,
)


def test_the_prior_recovers_the_df_and_scale_it_was_drawn_from() -> None:
    """Variances s² = s0²·F(d, d0) (Smyth 2004's model), many of them: the moment fit finds
    d0 and s0² back."""
    rng = np.random.default_rng(11)
    d, d0, s0 = 4.0, 10.0, 0.01
    sigma2 = s0 * d0 / rng.chisquare(d0, 20_000)  # each comparison's true variance
    s2 = sigma2 * rng.chisquare(d, 20_000) / d
    prior = moderated_prior(list(s2), [d] * len(s2))
    assert prior is not None
    assert prior.d0 == pytest.approx(d0, rel=0.15) and prior.s0_sq == pytest.approx(s0, rel=0.05)


def test_equal_variances_pool_completely() -> None:
    """One true variance: the scatter is (nearly) all sampling, d0 large, s0² the variance;
    variances that scatter less than sampling would: d0 = inf."""
    rng = np.random.default_rng(12)
    s2 = 0.01 * rng.chisquare(4, 5000) / 4
    prior = moderated_prior(list(s2), [4.0] * 5000)
    assert prior is not None and prior.d0 > 50
    assert prior.s0_sq == pytest.approx(0.01, rel=0.03)
    same = moderated_prior([0.01, 0.0101, 0.0099], [4.0] * 3)
    assert same is not None and math.isinf(same.d0)


def test_too_few_variances_give_no_prior() -> None:
    assert moderated_prior([0.01], [4.0]) is None
    assert moderated_prior([0.0, 0.01], [4.0, 4.0]) is None


def test_pooled_variances_count_the_shared_baseline_once() -> None:
    """K comparisons against one baseline, equal noise: their variances pooled are worth
    4·n·K/(K + 3) df (n = blocks − 1; Cov(s_j², s_k²) from the ½ correlation), not n·K."""
    rng = np.random.default_rng(17)
    base = rng.normal(0, 0.1, 401)
    diffs = [dict(enumerate(rng.normal(0, 0.1, 401) - base)) for _ in range(7)]
    for var, df in moderated_variances(diffs):
        assert var == pytest.approx(0.02, rel=0.1) and df == pytest.approx(1120, rel=0.15)
    apart = [dict(enumerate(rng.normal(0, 0.1, 401))) for _ in range(7)]
    for _, df in moderated_variances(apart):  # independent: up to n·K (the prior's d0 is
        assert 2 * 400 < df <= 400 * 7 * 1.15  # finite here: 400 df see tiny differences)


def test_unequal_variances_keep_their_own_weight() -> None:
    """Two groups of comparisons whose noise differs 4× (SD): the prior's df is finite, each
    moderated variance lies between its own and the pooled, its df above its own."""
    rng = np.random.default_rng(18)
    diffs = [dict(enumerate(rng.normal(0, sd, 9))) for sd in [0.05] * 6 + [0.2] * 6]
    own = [float(np.var(list(d.values()), ddof=1)) for d in diffs]
    prior = moderated_prior(own, [8.0] * 12)
    assert prior is not None and 0 < prior.d0 < math.inf
    for (var, df), mine in zip(moderated_variances(diffs), own, strict=True):
        assert min(mine, prior.s0_sq) <= var <= max(mine, prior.s0_sq)
        assert 8 <= df < 8 * 12


def test_the_trigamma_inverse_inverts() -> None:
    from diagnostic.analyse.family import _trigamma_inverse

    for x in (1e-5, 0.01, 0.5, 3.0, 100.0):
        assert float(special.polygamma(1, _trigamma_inverse(x))) == pytest.approx(x, rel=1e-6)


def test_the_critical_value_reduces_to_t_and_sidak_and_matches_simulation() -> None:
    assert max_t_critical(np.eye(1), 6.0, 0.05) == pytest.approx(sps.t.ppf(0.975, 6))
    # One shared variance estimate makes even uncorrelated t's dependent: below Šidák's bound.
    sidak = sps.t.ppf((0.95 ** (1 / 4)) / 2 + 0.5, 20)
    assert sps.t.ppf(0.975, 20) < max_t_critical(np.eye(4), 20.0, 0.05) < sidak
    # Dunnett's one-to-many correlation ½ at 12 df, 5 comparisons: against 400,000 draws.
    corr = np.full((5, 5), 0.5) + 0.5 * np.eye(5)
    c = max_t_critical(corr, 12.0, 0.05)
    rng = np.random.default_rng(13)
    z = rng.multivariate_normal(np.zeros(5), corr, 400_000)
    t = np.abs(z) / np.sqrt(rng.chisquare(12, (400_000, 1)) / 12)
    assert float(np.quantile(t.max(axis=1), 0.95)) == pytest.approx(c, rel=5e-3)
    assert c < sps.t.ppf((0.95 ** (1 / 5)) / 2 + 0.5, 12)  # correlation helps


def test_the_equicorrelated_critical_value_is_max_t_by_quadrature() -> None:
    """Equal correlations: Dunnett's product form gives max_t_critical's value (to the
    quasi-Monte Carlo's error), moves by less than 1e-5 with twice the nodes, and is the t
    quantile for one comparison and the normal Šidák value for independent ones at df = ∞."""
    from diagnostic.analyse import family

    for size, rho, df, alpha in [(6, 0.5, 16, 0.05), (14, 0.5, 40, 0.05), (6, 1 / 3, 300, 0.01)]:
        corr = np.full((size, size), rho)
        np.fill_diagonal(corr, 1.0)
        c = equicorrelated_critical(size, rho, df, alpha)
        assert c == pytest.approx(max_t_critical(corr, df, alpha), abs=1e-3)
        family._Z_NODES *= 2
        family._S_NODES *= 2
        try:
            assert equicorrelated_critical(size, rho, df, alpha) == pytest.approx(c, abs=1e-5)
        finally:
            family._Z_NODES //= 2
            family._S_NODES //= 2
    assert equicorrelated_critical(1, 0.5, 8, 0.05) == pytest.approx(sps.t.ppf(0.975, 8))
    sidak = sps.norm.ppf(0.95 ** (1 / 4) / 2 + 0.5)
    assert equicorrelated_critical(4, 0.0, math.inf, 0.05) == pytest.approx(sidak, abs=1e-6)


def test_the_block_correlation_is_shrunk_positive_definite_and_unit_diagonal() -> None:
    rng = np.random.default_rng(14)
    base = rng.normal(0, 0.1, 5)
    diffs = [dict(enumerate(rng.normal(0, 0.1, 5) - base)) for _ in range(8)]
    r = block_correlation(diffs)
    assert np.allclose(np.diag(r), 1.0) and np.linalg.eigvalsh(r).min() > 0
    assert np.all(np.abs(r[~np.eye(8, dtype=bool)]) < 1)
    # comparisons sharing fewer than 3 blocks are taken as independent
    apart = block_correlation([{0: 0.1, 1: 0.2}, {0: 0.3, 1: 0.1}])
    assert np.allclose(apart, np.eye(2))


def test_intervals_are_simultaneous_in_simulation_when_arms_noise_differs() -> None:
    """Seven arms against one baseline, 5 blocks, restart SD 0.05 for four arms and 0.10 for
    three (2× between arms) and the baseline: every interval covers its truth jointly about
    95% of the time (150 seeded families here; benchmarks/verdict_simulation.py has more)."""
    rng = np.random.default_rng(15)
    sds = [0.05] * 4 + [0.10] * 3
    covered = 0
    for _ in range(150):
        base = rng.normal(0, 0.10, 5)
        diffs = [dict(enumerate(rng.normal(0, sd, 5) - base)) for sd in sds]
        out = simultaneous_intervals(diffs, 0.05)
        covered += all(iv.low <= 0 <= iv.high for iv in out)
    assert 0.91 <= covered / 150 <= 0.99


def test_each_interval_is_its_mean_plus_minus_the_shared_critical_value() -> None:
    rng = np.random.default_rng(16)
    diffs = [dict(enumerate(rng.normal(0.1 * j, 0.05, 6))) for j in range(3)]
    out = simultaneous_intervals(diffs, 0.05)
    assert len({iv.critical for iv in out}) == 1
    for d, iv in zip(diffs, out, strict=True):
        values = np.array(list(d.values()))
        assert iv.mean == pytest.approx(values.mean())
        assert iv.high - iv.mean == pytest.approx(iv.critical * iv.se)
        assert 5 <= iv.df <= 15 and 0.95 < iv.level < 1
    with pytest.raises(ValueError, match="2 blocks"):
        simultaneous_intervals([{0: 0.1}], 0.05)
