"""Speculative decoding model (Leviathan et al. 2023) with a fitted step-cost line ρ_k = a + b·k."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.optimize import brentq

__all__ = [
    "StepCostFit",
    "alpha_from_counters",
    "alpha_from_tau",
    "best_k",
    "fit_step_cost",
    "measured_rho",
    "position_rates",
    "predicted_speedup",
    "speedup",
    "tau",
]


@dataclass(frozen=True)
class StepCostFit:
    """Least-squares line through measured step cost ratios: ρ_k = a + b·k (k ≥ 1)."""

    a: float
    b: float
    n_points: int


def tau(alpha: float, k: int) -> float:
    """Expected tokens per verify step with i.i.d. per-position acceptance α and k drafts:
    τ = (1 − α^(k+1)) / (1 − α), which is k + 1 at α = 1 and 1 at k = 0."""
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"acceptance rate must lie in [0, 1], got {alpha}")
    if alpha == 1.0:
        return float(k + 1)
    return (1.0 - alpha ** (k + 1)) / (1.0 - alpha)


def speedup(alpha: float, k: int, c: float) -> float:
    """Leviathan speedup τ / (k·c + 1) for a draft/target cost ratio c (no fixed overhead)."""
    return tau(alpha, k) / (k * c + 1.0)


def predicted_speedup(alpha: float, k: int, a: float, b: float) -> float:
    """Speedup with the fitted step cost: τ(α, k) / (a + b·k); exactly 1 at k = 0 (no spec)."""
    if k == 0:
        return 1.0
    return tau(alpha, k) / (a + b * k)


def alpha_from_tau(mean_length: float, k: int) -> float:
    """Invert τ(α, k) = mean acceptance length for α (bisection on [0, 1]); clamps at the ends."""
    if k < 1:
        raise ValueError("k must be ≥ 1 to invert τ")
    if mean_length <= 1.0:
        return 0.0
    if mean_length >= k + 1:
        return 1.0
    return float(brentq(lambda a: tau(a, k) - mean_length, 0.0, 1.0 - 1e-12, xtol=1e-12))


def alpha_from_counters(accepted: float, drafts: float, accepted_last_pos: float) -> float | None:
    """α̂ = A / (A + R_rej): A accepted draft tokens; R_rej = drafts that stopped early
    (num_drafts − accepted at position k−1, cumulative counters). None with no drafts."""
    rejected = drafts - accepted_last_pos
    if accepted + rejected <= 0:
        return None
    return accepted / (accepted + rejected)


def position_rates(per_pos: Sequence[float], drafts: float) -> list[tuple[float, float | None]]:
    """Per-position (cumulative a_i = per_pos[i]/drafts, conditional a_i/a_(i−1)); per-position
    counters are cumulative: a_i = P(accepted length ≥ i+1)."""
    if drafts <= 0:
        return []
    out: list[tuple[float, float | None]] = []
    prev = 1.0
    for count in per_pos:
        a_i = count / drafts
        out.append((a_i, a_i / prev if prev > 0 else None))
        prev = a_i
    return out


def measured_rho(tau_k: float, tps_0: float, tps_k: float) -> float:
    """Measured step cost ratio t_step(k)/t_step(0) = τ_k · tps_0 / tps_k."""
    return tau_k * tps_0 / tps_k


def fit_step_cost(ks: Sequence[int], rhos: Sequence[float]) -> StepCostFit | None:
    """Fit ρ_k = a + b·k by least squares over k ≥ 1 (ρ_0 = 1 by definition is left out: a is
    the jump from turning speculation on). Needs ≥ 2 distinct k."""
    pts = [(k, r) for k, r in zip(ks, rhos, strict=True) if k >= 1 and math.isfinite(r)]
    if len({k for k, _ in pts}) < 2:
        return None
    x = np.array([k for k, _ in pts], dtype=float)
    y = np.array([r for _, r in pts], dtype=float)
    b, a = np.polyfit(x, y, 1)
    return StepCostFit(float(a), float(b), len(pts))


def best_k(alpha: float, a: float, b: float, k_max: int = 16) -> int:
    """argmax over k in 0..k_max of τ(α, k)/(a + b·k); 0 means speculation off is predicted
    best. Ties go to the smaller k."""
    best, best_s = 0, 1.0
    for k in range(1, k_max + 1):
        rho = a + b * k
        if rho <= 0:
            continue
        s = predicted_speedup(alpha, k, a, b)
        if s > best_s + 1e-12:
            best, best_s = k, s
    return best
