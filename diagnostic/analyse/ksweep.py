"""The k sweep: measured speedup per k, best k, and the theory fit (α̂, ρ_k = a + b·k)."""

from __future__ import annotations

from collections.abc import Sequence

from diagnostic.analyse import theory
from diagnostic.schema.analysis import (
    ArmResult,
    Comparison,
    SweepPoint,
    SweepWorkload,
    TheoryFit,
    TheoryPoint,
)

__all__ = ["best_measured_k", "pooled_alpha", "sweep_workload", "theory_fit"]

LARGE_FIXED_COST = 1.3
"""ρ intercept above which the report suspects speculation runs without graphs."""


def best_measured_k(points: Sequence[SweepPoint], delta: float) -> int | None:
    """Smallest k whose speedup lies within the noise band of the best (k = 0 at ratio 1:
    speculation off wins when nothing beats the baseline by more than δ)."""
    rated = [(p.k, p.ratio) for p in points if p.ratio is not None]
    if not rated:
        return None
    best = max(r for _, r in rated)
    return min(k for k, r in rated if r >= best / (1.0 + delta))


def pooled_alpha(arms: Sequence[ArmResult]) -> tuple[float | None, str]:
    """α̂ pooled over every run's counters (A / (A + drafts stopped early)); else the mean of
    τ inversions at each arm's k; else none."""
    accepted = rejected = 0.0
    inversions: list[float] = []
    for arm in arms:
        for run in arm.runs:
            acc = run.acceptance
            if acc is None:
                continue
            if acc.per_position and acc.drafts and acc.accepted_tokens is not None:
                accepted += acc.accepted_tokens
                rejected += acc.drafts * (1.0 - acc.per_position[-1].cumulative)
            elif acc.mean_acceptance_length and arm.k:
                inversions.append(theory.alpha_from_tau(acc.mean_acceptance_length, arm.k))
    if accepted + rejected > 0:
        return accepted / (accepted + rejected), "counters (A / (A + drafts stopped early))"
    if inversions:
        return sum(inversions) / len(inversions), "inversion of τ(α, k) = acceptance length"
    return None, "none (no acceptance counters)"


def _explain(a: float, b: float) -> str:
    text = (
        f"Turning speculation on costs a = {a:.2f}× a plain decode step before any draft token, "
        f"and each draft token adds b = {b:.3f} of a step (the draft/target cost ratio)."
    )
    if a > LARGE_FIXED_COST:
        text += (
            " A fixed cost this large usually means the speculative path runs without CUDA "
            "graphs (check the capture mode the engine resolved)."
        )
    return text


def theory_fit(points: Sequence[SweepPoint], alpha: float | None, source: str) -> TheoryFit:
    """Fit ρ_k = a + b·k to the measured points and predict the speedup curve and best k."""
    measured = [(p.k, p.rho) for p in points if p.k >= 1 and p.rho is not None]
    fit = theory.fit_step_cost([k for k, _ in measured], [r for _, r in measured])
    out = TheoryFit(alpha_hat=alpha, alpha_source=source, fit_points=len(measured))
    if fit is None:
        out.explanation = "The step-cost line needs acceptance and speed at two or more k."
        return out
    out.a, out.b = fit.a, fit.b
    out.explanation = _explain(fit.a, fit.b)
    if alpha is None:
        return out
    k_max = max(8, 2 * max(k for k, _ in measured))
    out.predicted = [
        TheoryPoint(
            k=k,
            tau=theory.tau(alpha, k),
            rho=1.0 if k == 0 else fit.a + fit.b * k,
            speedup=theory.predicted_speedup(alpha, k, fit.a, fit.b),
        )
        for k in range(k_max + 1)
        if k == 0 or fit.a + fit.b * k > 0
    ]
    out.predicted_best_k = theory.best_k(alpha, fit.a, fit.b, k_max)
    return out


def _point(arm: ArmResult, comparison: Comparison | None, workload: str, conc: int) -> SweepPoint:
    tps = next(
        w.decode_tps for w in arm.workloads if w.workload == workload and w.concurrency == conc
    )
    tau_k = arm.acceptance_length.estimate if arm.acceptance_length else None
    ratio = comparison.ratio if comparison else None
    return SweepPoint(
        k=arm.k or 0,
        arm=arm.id,
        decode_tps=tps,
        ratio=ratio,
        ci_low=comparison.ci_low if comparison else None,
        ci_high=comparison.ci_high if comparison else None,
        p_adjusted=comparison.p_adjusted if comparison else None,
        verdict=comparison.verdict if comparison else None,
        acceptance_length=tau_k,
        rho=theory.measured_rho(tau_k, 1.0, ratio) if tau_k and ratio else None,
    )


def sweep_workload(
    baseline: ArmResult,
    k_arms: Sequence[ArmResult],
    comparisons: Sequence[Comparison],
    workload: str,
    concurrency: int,
    *,
    delta: float,
) -> SweepWorkload:
    """Sweep points (k = 0 baseline first), best measured k and the theory on one workload."""
    by_arm = {
        c.arm: c for c in comparisons if c.workload == workload and c.concurrency == concurrency
    }
    base = _point(baseline, None, workload, concurrency)
    base.k, base.ratio, base.ci_low, base.ci_high = 0, 1.0, 1.0, 1.0
    others = (_point(a, by_arm.get(a.id), workload, concurrency) for a in k_arms)
    points = [base, *sorted(others, key=lambda p: p.k)]
    alpha, source = pooled_alpha(k_arms)
    fit = theory_fit(points, alpha, source)
    for p in points:
        if fit.a is not None and fit.b is not None and alpha is not None and p.k >= 1:
            p.predicted_speedup = theory.predicted_speedup(alpha, p.k, fit.a, fit.b)
    return SweepWorkload(
        workload=workload,
        concurrency=concurrency,
        points=points,
        best_k=best_measured_k(points, delta),
        theory=fit,
    )
