"""Group-sequential designs: planned looks, Pocock levels, exact per-look levels of t intervals."""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import optimize, special
from scipy import stats as sps

__all__ = [
    "POCOCK_ALPHA",
    "look_number",
    "overall_alpha",
    "planned_looks",
    "pocock_alpha",
    "sequential_alpha",
    "t_look_paths",
]

# Pocock's constant nominal two-sided level per look for an overall α = 0.05 (Pocock 1977;
# Jennison & Turnbull table 2.1): z = 1.960, 2.178, 2.289, 2.361 for 1..4 looks.
POCOCK_ALPHA = {1: 0.05, 2: 0.0294, 3: 0.0221, 4: 0.0182}
# Seeded Monte Carlo of power (t_look_paths): the same paths on every run.
_SEQ_PATHS = 1 << 18
_SEQ_SEED = 20130601
# Gauss–Legendre nodes per smooth piece of a look's density, and Gauss–Jacobi nodes per
# chord of the transition density. With twice as many the overall level moves by less than
# 3e-10 relative on every design planned_looks makes up to 100 blocks, and by 1.5e-8 at worst
# with 3 blocks first and 2 between (tests/test_sequential.py).
_NODES = 32


def pocock_alpha(n_looks: int) -> float:
    """Pocock nominal two-sided level per look (α = 0.05 overall), 1 to 4 looks. Normal
    theory (known variance): with t intervals on few blocks use sequential_alpha."""
    if n_looks not in POCOCK_ALPHA:
        raise ValueError(f"Pocock levels are tabulated for 1-4 looks, not {n_looks}")
    return POCOCK_ALPHA[n_looks]


def look_number(n_now: int, looks: Sequence[int]) -> int | None:
    """1-based index of the planned look that n_now restarts reaches exactly, else None."""
    return looks.index(n_now) + 1 if n_now in looks else None


def planned_looks(max_blocks: int, max_looks: int = 4, first: int = 4) -> list[int]:
    """Equally spaced group-sequential looks ending at max_blocks: K = min(max_looks,
    max_blocks // first) looks (at least 1) at round(max_blocks·i/K), so an interim look
    never comes before `first` blocks (a t quantile on 2 df is useless). 16 → 4, 8, 12, 16;
    12 → 4, 8, 12; 8 → 4, 8; below 8 → the end only (no interim look)."""
    k = max(1, min(max_looks, max_blocks // first))
    return [math.floor(max_blocks * i / k + 0.5) for i in range(1, k + 1)]


def t_look_paths(
    looks: Sequence[int], shift: float, paths: int = _SEQ_PATHS
) -> tuple[np.ndarray, np.ndarray]:
    """Seeded paths of i.i.d. N(shift, 1) block differences: (mean, standard error) at each
    look, shape (paths, K). Each segment between looks is drawn as its sum (normal) and its
    within-segment sum of squares (χ², independent of the sum): the exact joint law of the
    looks' t statistics without drawing every block."""
    rng = np.random.default_rng(_SEQ_SEED)
    sizes = np.diff(np.asarray([0, *looks], dtype=float))
    sums = rng.standard_normal((paths, len(sizes))) * np.sqrt(sizes) + shift * sizes
    within = rng.chisquare(np.maximum(sizes - 1, 1), (paths, len(sizes))) * (sizes > 1)
    n = np.cumsum(sizes)
    total = np.cumsum(sums, axis=1)
    ss = np.cumsum(within + sums**2 / sizes, axis=1) - total**2 / n
    with np.errstate(divide="ignore", invalid="ignore"):
        se = np.sqrt(np.maximum(ss, 0.0) / (n - 1) / n)
    return total / n, se


def sequential_alpha(looks: Sequence[int], alpha: float = 0.05) -> float:
    """Per-look two-sided level of a Pocock design (the same level at every look) on paired
    t intervals with df = n−1 at each look, such that the interval excludes no difference at
    some look with probability `alpha` overall: the root of overall_alpha(looks, c) = alpha,
    by Brent's method on log c to 1e-10 relative (overall_alpha is accurate to about 1e-9).
    Pocock's normal-theory level (pocock_alpha) assumes a known variance and lets the overall
    level creep above `alpha` with t intervals on few blocks. Conservative for Welch
    intervals (more df). Cached per design: about 0.02 s of CPU for 2 looks, 0.1 s for 4."""
    if len(looks) < 2:
        return alpha
    return _sequential_alpha(tuple(int(n) for n in looks), float(alpha))


@functools.lru_cache(maxsize=256)
def _sequential_alpha(looks: tuple[int, ...], alpha: float) -> float:
    def excess(log_level: float) -> float:
        return math.log(overall_alpha(looks, math.exp(log_level)) / alpha)

    # Bonferroni (alpha/K per look) never exceeds alpha overall; alpha per look always does.
    low, high = math.log(alpha / len(looks)), math.log(alpha)
    return math.exp(optimize.brentq(excess, low, high, xtol=1e-10, rtol=1e-12))


def overall_alpha(looks: Sequence[int], level: float, nodes: int = _NODES) -> float:
    """Probability that a paired t interval at two-sided level `level` (df = n−1) excludes 0
    at some look when the block differences are i.i.d. normal with mean 0 (any variance).

    Method (exact up to quadrature): the interval at n blocks excludes 0 iff |U| > b, with
    U = ΣX/√(n·ΣX²) the cosine between the differences and the all-ones vector and
    b = c/√(n − 1 + c²), c the t quantile. Scale-free, the cosines form a Markov chain:
    from a look at p blocks to one at n = p + m, U' = √(p/n)·U·x + √(m/n)·y, where
    (x, y) = (|X_1..p|, ΣX_p+1..n / √m) / |X_1..n| is independent of U and has density
    ∝ x^(p−1)·(1 − x² − y²)^((m−3)/2) on the half disk x ≥ 0 (the first p + 1 coordinates
    of a uniform point on the sphere). The density of U restricted to the looks not yet
    rejected is carried from look to look (Nyström): it is piecewise smooth between points
    known in advance; each piece is sampled at `nodes` Gauss–Legendre nodes in the angle
    arcsin u, mapped so that power-law edges become smooth, and interpolated barycentrically;
    the transition density is the integral of the (x, y) density along a chord, in closed
    form where the chord lies in x > 0 and by Gauss–Jacobi where it crosses x = 0. Needs 3+
    blocks at the first look (with 2 the first density has poles at ±1, where this
    quadrature loses accuracy), 2+ between looks, 1000 at most (the Gauss–Jacobi weights
    overflow beyond; t intervals are z intervals long before)."""
    n = np.asarray(looks, dtype=int)
    if len(n) == 0 or n[0] < 3 or np.any(np.diff(n) < 2) or n[-1] > 1000:
        raise ValueError(f"looks need 3+ blocks first, 2+ between, 1000 at most: {list(looks)}")
    bounds = _cosine_bounds(n, level)
    density = _first_look(int(n[0]), bounds[0], nodes)
    for k in range(1, len(n)):
        density = _next_look(density, int(n[k - 1]), int(n[k] - n[k - 1]), bounds[k])
    return 1.0 - density.mass()


def _cosine_bounds(n: np.ndarray, level: float) -> np.ndarray:
    """|t| ≤ c at n blocks as |U| ≤ c/√(n − 1 + c²) (t² = (n − 1)·U²/(1 − U²))."""
    c = sps.t.isf(level / 2, n - 1)
    return np.asarray(c / np.sqrt(n - 1 + c**2), dtype=float)


@functools.cache
def _legendre(nodes: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Gauss–Legendre nodes and weights on [0, 1] and their barycentric weights."""
    x, w = special.roots_legendre(nodes)
    bary = (-1.0) ** np.arange(nodes) * np.sqrt((1 - x**2) * w)
    return (x + 1) / 2, w / 2, bary


def _mapped(
    lo: np.ndarray | float, hi: np.ndarray | float, nodes: int
) -> tuple[np.ndarray, np.ndarray]:
    """The nodes of [lo, hi] (a last axis of nodes, broadcast over lo and hi) and their
    weights·du/ds: Gauss–Legendre in the angle θ = arcsin u, where the densities' factors
    (1 − u²)^g are smooth, mapped θ = θlo + (θhi − θlo)·sin²(πs/2) so that an edge behaving
    like a power of (u − lo) or (hi − u) becomes smooth in s."""
    s, w, _ = _legendre(nodes)
    lo, hi = np.arcsin(np.asarray(lo))[..., None], np.arcsin(np.asarray(hi))[..., None]
    theta = lo + (hi - lo) * np.sin(np.pi * s / 2) ** 2
    return np.sin(theta), w * (hi - lo) * np.pi / 2 * np.sin(np.pi * s) * np.cos(theta)


@dataclass(frozen=True)
class _Density:
    """A symmetric sub-density on [−b, b], sampled on [0, b]: values at the mapped nodes of
    each piece between `breaks` (the points where it is not smooth, and 0 and b)."""

    breaks: np.ndarray
    values: np.ndarray  # (pieces, nodes)

    @property
    def nodes(self) -> int:
        return self.values.shape[1]

    def at(self, u: np.ndarray, piece: int) -> np.ndarray:
        """Barycentric interpolation in the piece's own s (u inside that piece)."""
        s, _, bary = _legendre(self.nodes)
        lo, hi = np.arcsin(self.breaks[piece]), np.arcsin(self.breaks[piece + 1])
        z = np.clip((np.arcsin(u) - lo) / (hi - lo), 0.0, 1.0)
        d = (2 / np.pi * np.arcsin(np.sqrt(z)))[..., None] - s
        hit = d == 0
        c = bary / np.where(hit, 1.0, d)
        value = (c @ self.values[piece]) / c.sum(axis=-1)
        return np.where(hit.any(axis=-1), (hit * self.values[piece]).sum(axis=-1), value)

    def mass(self) -> float:
        _, weight = _mapped(self.breaks[:-1], self.breaks[1:], self.nodes)
        return 2.0 * float(np.sum(self.values * weight))


def _first_look(n: int, bound: float, nodes: int) -> _Density:
    """U at the first look: density (1 − u²)^((n−3)/2) / B(½, (n−1)/2), kept on |u| ≤ b."""
    breaks = np.array([0.0, bound])
    u, _ = _mapped(breaks[:-1], breaks[1:], nodes)
    values = np.exp((n - 3) / 2 * np.log1p(-(u**2)) - special.betaln(0.5, (n - 1) / 2))
    return _Density(breaks, values)


def _next_look(density: _Density, p: int, m: int, bound: float) -> _Density:
    """Carry U's density from a look at p blocks to the next at p + m, kept on |u| ≤ bound.
    A kink of the new density sits where the chord of the transition is tangent to the
    circle at an old kink or edge (u' = √(α²u² + β²)) and at u' = β (the chord through
    (0, ±1)); an output u' > β is reached only from inputs u ≥ √(u'² − β²)/α of its sign,
    whose density vanishes there like a power: those rows integrate from that point."""
    alpha, beta = math.sqrt(p / (p + m)), math.sqrt(m / (p + m))
    old = density.breaks[1:]  # interior kinks and the edge b of the last look
    kinks = np.unique(np.append(np.sqrt(alpha**2 * old**2 + beta**2), beta))
    breaks = np.concatenate(([0.0], kinks[kinks < bound], [bound]))
    nodes = density.nodes
    v = _mapped(breaks[:-1], breaks[1:], nodes)[0].ravel()
    reach = np.sqrt(np.maximum(v**2 - beta**2, 0.0)) / alpha
    total = np.zeros(len(v))
    for piece in range(len(density.breaks) - 1):
        lo, hi = density.breaks[piece], density.breaks[piece + 1]
        whole, part = reach <= lo, (lo < reach) & (reach < hi)
        u, weight = _mapped(lo, hi, nodes)
        inflow = _transition(v[whole, None], u, p, m, nodes)
        below = v[whole] < beta  # the only outputs that −u (the mirror half) reaches
        inflow[below] += _transition(v[whole][below, None], -u, p, m, nodes)
        total[whole] += inflow @ (density.values[piece] * weight)
        u, weight = _mapped(reach[part], hi, nodes)
        inflow = _transition(v[part, None], u, p, m, nodes) * density.at(u, piece) * weight
        total[part] += inflow.sum(axis=1)
    return _Density(breaks, total.reshape(len(breaks) - 1, -1))


def _transition(v: np.ndarray, u: np.ndarray, p: int, m: int, nodes: int) -> np.ndarray:
    """Density of U' = √(p/n)·u·x + √(m/n)·y at v (arrays broadcast), n = p + m: the (x, y)
    density C·x^(p−1)·(1 − x² − y²)^g, g = (m−3)/2, integrated along the chord
    √(p/n)·u·x + √(m/n)·y = v of the half disk, divided by √(m/n). In logs (large n)."""
    rule = _chord_rule(p, m, nodes)
    g = (m - 3) / 2
    a = math.sqrt(p / (p + m)) * u
    beta2 = m / (p + m)
    v, a = np.broadcast_arrays(v, a)
    norm2 = a**2 + beta2
    gap = norm2 - v**2
    root = math.sqrt(beta2) * np.sqrt(np.maximum(gap, 0.0))
    x1, x2 = (a * v - root) / norm2, (a * v + root) / norm2  # the chord's ends in x
    chord = (gap > 0) & (x2 > 0)
    inside, crossing = chord & (x1 >= 0), chord & (x1 < 0)
    # 1 − x² − y² = (norm2/β²)(x − x1)(x2 − x) on the chord: ∫ x^(p−1)·((x − x1)(x2 − x))^g dx
    log_integral = np.full(v.shape, -np.inf)
    centre, half = (x1[inside] + x2[inside]) / 2, (x2[inside] - x1[inside]) / 2
    log_integral[inside] = (
        rule.log_moment
        + (p - 1) * np.log(centre)
        + (2 * g + 1) * np.log(half)
        + np.log(np.polyval(rule.moments, (half / centre) ** 2))
    )
    lo, hi = x1[crossing][:, None], x2[crossing][:, None]
    log_integral[crossing] = (
        (p + g) * np.log(hi[:, 0] / 2)
        + rule.log_weight
        + np.log(((hi * (1 + rule.nodes) / 2 - lo) ** g) @ rule.weights)
    )
    return np.exp(log_integral + rule.log_norm + g * np.log(norm2 / beta2))


@dataclass(frozen=True)
class _ChordRule:
    """What _transition needs for a step from p to p + m blocks, g = (m−3)/2:
    ∫_{−1}^{1} (c + h·t)^(p−1)·(1 − t²)^g dt = c^(p−1)·Σ_i C(p−1, 2i)·B(i + ½, g + 1)·z^i,
    z = (h/c)² (moments: scaled coefficients, highest first; log_moment: the scale); Gauss–
    Jacobi nodes and weights (scaled to sum 1; log_weight: their sum) for the weight
    (1 − t)^g·(1 + t)^(p−1); log_norm: log C − log √(m/n), C the (x, y) density's constant."""

    log_moment: float
    moments: np.ndarray
    nodes: np.ndarray
    weights: np.ndarray
    log_weight: float
    log_norm: float


@functools.cache
def _chord_rule(p: int, m: int, nodes: int) -> _ChordRule:
    g, n = (m - 3) / 2, p + m
    i = np.arange((p - 1) // 2 + 1)
    log = (
        special.gammaln(p)
        - special.gammaln(2 * i + 1)
        - special.gammaln(p - 2 * i)
        + special.betaln(i + 0.5, g + 1)
    )
    t, weights = special.roots_jacobi(nodes, g, p - 1)
    log_c = (
        math.log(2)
        + special.gammaln(n / 2)
        - 0.5 * math.log(math.pi)
        - special.gammaln(p / 2)
        - special.gammaln((m - 1) / 2)
    )
    return _ChordRule(
        log_moment=float(log.max()),
        moments=np.exp(log - log.max())[::-1],
        nodes=t,
        weights=weights / weights.sum(),
        log_weight=float(np.log(weights.sum())),
        log_norm=log_c - 0.5 * math.log(m / n),
    )
