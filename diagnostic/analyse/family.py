"""Simultaneous intervals over a family of paired comparisons that share a baseline and blocks:
block variances moderated across the family (empirical Bayes) and a many-to-one max-|t|
critical value from the multivariate t with the correlation the blocks show."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import special
from scipy import stats as sps
from scipy.optimize import brentq

__all__ = [
    "BlockDiffs",
    "FamilyInterval",
    "Prior",
    "block_correlation",
    "equicorrelated_critical",
    "max_t_critical",
    "moderated_prior",
    "moderated_variances",
    "simultaneous_intervals",
]

_MVT_SEED = 20261202  # scipy's quasi-Monte Carlo cdf: the same critical value on every run
# equicorrelated_critical's quadrature: the critical value moves by less than 1e-5 with twice
# as many nodes (tests/test_family.py)
_Z_NODES = 32
_S_NODES = 128


@dataclass(frozen=True)
class Prior:
    """Empirical Bayes prior of the comparisons' block variances: a scaled inverse χ² with
    prior variance s0_sq on d0 degrees of freedom (d0 = inf: the variances look equal)."""

    s0_sq: float
    d0: float


@dataclass(frozen=True)
class FamilyInterval:
    """One comparison's simultaneous interval on the log scale, with how it was formed."""

    mean: float
    low: float
    high: float
    se: float  # moderated standard error of the mean log ratio
    df: float  # its degrees of freedom: the comparison's own plus the prior's (capped)
    critical: float  # the family's max-|t| critical value
    level: float  # the interval's own (marginal) two-sided level


BlockDiffs = Mapping[int, float]
"""One comparison's log ratios by block: log(arm) − log(reference) of the block's restarts."""


def _trigamma_inverse(x: float) -> float:
    """y with trigamma(y) = x, by Newton's method on 1/trigamma (Smyth 2004, limma)."""
    if x > 1e7:
        return 1.0 / math.sqrt(x)
    if x < 1e-6:
        return 1.0 / x
    y = 0.5 + 1.0 / x
    for _ in range(50):
        tri = float(special.polygamma(1, y))
        step = tri * (1.0 - tri / x) / float(special.polygamma(2, y))
        y += step
        if -step / y < 1e-8:
            break
    return y


def moderated_prior(variances: Sequence[float], dfs: Sequence[float]) -> Prior | None:
    """Smyth's (2004) method-of-moments fit of a scaled F distribution to sample variances
    s_j² on d_j degrees of freedom (limma's fitFDist): on z = log s², E(z) = log s0² +
    ψ(d/2) − log(d/2) + ψ(d0/2) − log(d0/2) and Var(z) = ψ'(d/2) + ψ'(d0/2). When the
    variances scatter no more than sampling alone explains, d0 = inf (they are one variance).
    Assumes the comparisons' noise differs at most by a factor drawn from one prior; needs ≥ 2
    positive variances, else None."""
    pairs = [(v, d) for v, d in zip(variances, dfs, strict=True) if v > 0 and d > 0]
    if len(pairs) < 2:
        return None
    s2 = np.array([v for v, _ in pairs])
    d = np.array([d for _, d in pairs])
    e = np.log(s2) - special.digamma(d / 2) + np.log(d / 2)
    excess = float(e.var(ddof=1)) - float(special.polygamma(1, d / 2).mean())
    if excess <= 0:
        return Prior(float(math.exp(e.mean())), math.inf)
    d0 = 2.0 * _trigamma_inverse(excess)
    return Prior(float(math.exp(e.mean() + special.digamma(d0 / 2) - math.log(d0 / 2))), d0)


def _pairwise(diffs: Sequence[BlockDiffs]) -> tuple[np.ndarray, np.ndarray]:
    """The comparisons' sample correlations over the blocks each pair shares (0 where they
    share fewer than 3 or one does not vary) and the number of blocks they share."""
    m = len(diffs)
    r, shared = np.eye(m), np.zeros((m, m))
    for j in range(m):
        shared[j, j] = len(diffs[j])
        for k in range(j + 1, m):
            common = sorted(set(diffs[j]) & set(diffs[k]))
            shared[j, k] = shared[k, j] = len(common)
            if len(common) < 3:
                continue
            x = np.array([diffs[j][b] for b in common])
            y = np.array([diffs[k][b] for b in common])
            if x.std() > 0 and y.std() > 0:
                r[j, k] = r[k, j] = float(np.corrcoef(x, y)[0, 1])
    return r, shared


def block_correlation(diffs: Sequence[BlockDiffs]) -> np.ndarray:
    """Correlation of the comparisons' block log ratios (pairwise over the blocks two
    comparisons share, ≥ 3), shrunk towards the identity by Schäfer & Strimmer's (2005)
    estimated intensity λ = Σ Var(r) / Σ r² (Var(r) ≈ (1 − r²)²/(n − 1)), and further until
    positive definite. Shrinking towards independence only ever raises the max-|t| critical
    value (Šidák): the estimate errs on the safe side."""
    r, shared = _pairwise(diffs)
    off = ~np.eye(len(diffs), dtype=bool) & (shared >= 3)
    noise = float(((1 - r[off] ** 2) ** 2 / (shared[off] - 1)).sum())
    signal = float((r[off] ** 2).sum())
    lam = min(1.0, noise / signal) if signal > 0 else 1.0
    eye = np.eye(len(diffs))
    shrunk = (1 - lam) * r + lam * eye
    while np.linalg.eigvalsh(shrunk).min() < 1e-6:
        lam = min(1.0, lam + 0.05)
        shrunk = (1 - lam) * r + lam * eye
    return shrunk


def moderated_variances(diffs: Sequence[BlockDiffs]) -> list[tuple[float, float]]:
    """Each comparison's block variance moderated towards the family's prior, with its df:
    s̃_j² = w_j·s0² + (1 − w_j)·s_j², w_j = d0/(d0 + d_j) (Smyth 2004; moderated_prior), and
    df_j = 2·s̃_j⁴ / Var(s̃_j²) by Satterthwaite, Var from the normal-theory covariances of
    sample variances, Cov(s_j², s_k²) = 2·ρ_jk²·s_j²·s_k²·(n_jk − 1)/((n_j − 1)(n_k − 1))
    (ρ_jk² the unshrunk block correlation's square less its small-sample bias, n_jk the
    blocks shared; s0² taken as the mean of the s_k² for its variance). Comparisons that
    share a reference share its noise, so pooling is worth less than the sum of their df:
    seven arms against one baseline on 5 blocks pool to about 11 df, not 28."""
    s2 = np.array([np.array(list(d.values())).var(ddof=1) for d in diffs])
    own = np.array([len(d) - 1.0 for d in diffs])
    prior = moderated_prior(list(s2), list(own))
    if prior is None:
        return [(float(v), float(d)) for v, d in zip(s2, own, strict=True)]
    r, shared = _pairwise(diffs)
    # r² overstates ρ² by about (1 − r²)²/(n − 1) on few blocks (Olkin & Pratt 1958): taken
    # off, so that the df are not understated; the diagonal stays 1.
    rho_sq = np.where(
        np.eye(len(diffs), dtype=bool),
        1.0,
        np.clip(r**2 - (1 - r**2) ** 2 / np.maximum(shared - 1, 1), 0.0, 1.0),
    )
    cov = 2 * rho_sq * np.outer(s2, s2) * np.maximum(shared - 1, 0) / np.outer(own, own)
    var_pool = float(cov.mean())  # Var(mean of the s_k²)
    cov_pool = cov.mean(axis=0)  # Cov(mean of the s_k², s_j²)
    weight = np.ones_like(own) if math.isinf(prior.d0) else prior.d0 / (prior.d0 + own)
    out = []
    for j, w in enumerate(weight):
        var = float(w * prior.s0_sq + (1 - w) * s2[j])
        spread = w**2 * var_pool + (1 - w) ** 2 * cov[j, j] + 2 * w * (1 - w) * cov_pool[j]
        df = float(own[j]) if spread <= 0 else max(float(own[j]), 2 * var**2 / spread)
        out.append((var, df))
    return out


def max_t_critical(corr: np.ndarray, df: float, alpha: float) -> float:
    """c with P(max_j |T_j| ≤ c) = 1 − α for T multivariate t (correlation `corr`, `df`
    degrees of freedom; scipy.stats.multivariate_t's cdf over the box [−c, c]^m): the
    many-to-one (Dunnett-type) simultaneous critical value. Between the t quantile of one
    comparison and Šidák's bound."""
    m = corr.shape[0]
    one = float(sps.t.ppf(1 - alpha / 2, df))
    if m == 1:
        return one
    sidak = float(sps.t.ppf((1 - alpha) ** (1 / m) / 2 + 0.5, df))
    dist = sps.multivariate_t(loc=np.zeros(m), shape=corr, df=df, allow_singular=True)

    def inside(c: float) -> float:
        box = np.full(m, c)
        p = dist.cdf(box, lower_limit=-box, random_state=_MVT_SEED)
        return float(p) - (1 - alpha)

    if inside(sidak) <= 0:  # the cdf's own error at the bound
        return sidak
    if inside(one) >= 0:
        return one
    return float(brentq(inside, one, sidak, xtol=1e-6))


def equicorrelated_critical(size: int, rho: float, df: float, alpha: float) -> float:
    """max_t_critical for `size` comparisons that all correlate `rho` (0 ≤ ρ < 1), by
    Dunnett's (1955) product form instead of quasi-Monte Carlo: with T_j = (√ρ·Z +
    √(1 − ρ)·Y_j)/S, P(max_j |T_j| ≤ c) = E[(Φ((c·S − √ρ·Z)/√(1 − ρ)) − Φ((−c·S − √ρ·Z)/
    √(1 − ρ)))^size] over Z ~ N(0, 1) (Gauss–Hermite) and S = √(χ²_df/df) (trapezoids in log χ²),
    solved for c by Brent's method. Milliseconds where max_t_critical takes
    tenths of a second to seconds: what planning uses, before any correlation is estimated."""
    one = float(sps.t.ppf(1 - alpha / 2, df))
    if size == 1:
        return one
    z, wz = np.polynomial.hermite_e.hermegauss(_Z_NODES)
    s, ws = np.ones(1), np.ones(1)
    if math.isfinite(df):  # trapezoids in log χ², whose density is smooth and thin-tailed
        low, high = np.log(sps.chi2.ppf([1e-14, 1 - 1e-14], df))
        y = np.linspace(float(low), float(high), _S_NODES)
        ws = np.exp(sps.chi2.logpdf(np.exp(y), df) + y)
        s = np.sqrt(np.exp(y) / df)
    weights = np.outer(ws / ws.sum(), wz / wz.sum())
    shared, scale = math.sqrt(rho) * z[None, :], math.sqrt(1 - rho)

    def inside(c: float) -> float:
        cs = c * s[:, None]
        p = sps.norm.cdf((cs - shared) / scale) - sps.norm.cdf((-cs - shared) / scale)
        return float((p**size * weights).sum()) - (1 - alpha)

    sidak = float(sps.t.ppf((1 - alpha) ** (1 / size) / 2 + 0.5, df))
    return float(brentq(inside, one, sidak + 1.0, xtol=1e-8))


def simultaneous_intervals(diffs: Sequence[BlockDiffs], alpha: float) -> list[FamilyInterval]:
    """Simultaneous 1 − α intervals for the mean block log ratio of every comparison: mean ±
    c·s̃/√n with s̃² the comparison's moderated block variance (moderated_variances) and c
    the max-|t| critical value over the family's block correlation at the smallest df. Each
    comparison needs ≥ 2 blocks; assumes normal block log ratios, independent between blocks."""
    n = [len(d) for d in diffs]
    if min(n, default=0) < 2:
        raise ValueError("simultaneous_intervals needs ≥ 2 blocks per comparison")
    post = moderated_variances(diffs)
    c = max_t_critical(block_correlation(diffs), min(df for _, df in post), alpha)
    out = []
    for d, (var, df), k in zip(diffs, post, n, strict=True):
        mean = float(np.mean(list(d.values())))
        se = math.sqrt(var / k)
        level = 1.0 - 2.0 * float(sps.t.sf(c, df))
        out.append(FamilyInterval(mean, mean - c * se, mean + c * se, se, df, c, level))
    return out
