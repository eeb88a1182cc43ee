"""The k sweep: measured speedup per k, best k among WINs, and the theory fit (α̂, ρ_k = a + b·k)
with bootstrap intervals over restarts."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from diagnostic.analyse import theory
from diagnostic.schema.analysis import (
    ArmResult,
    ArmWorkload,
    Comparison,
    SweepPoint,
    SweepWorkload,
    TheoryFit,
    TheoryPoint,
)

__all__ = ["best_measured_k", "pooled_alpha", "sweep_workload", "theory_fit"]

LARGE_FIXED_COST = 1.3
"""ρ intercept above which the report suspects speculation runs without graphs."""
DEGENERATE_ALPHA = 0.95
"""α̂ above this: acceptance is degenerate (random weights, repetitive output): no prediction."""
BOOTSTRAP = 10_000
SEED = 20261201


def best_measured_k(points: Sequence[SweepPoint]) -> tuple[int | None, str]:
    """Best k among WINs (docs/statistics.md): the arm with the highest lower bound, then the
    smallest winning k whose interval reaches it. No WIN: 0 (serve without speculation) only
    when every k is decided (LOSS or EQUIVALENT); None while any k is undecided."""
    wins = [p for p in points if p.k >= 1 and p.verdict == "WIN" and p.ci_low is not None]
    if wins:
        top = max(wins, key=lambda p: p.ci_low or 0.0)
        low = top.ci_low or 0.0
        k = min(p.k for p in wins if (p.ci_high or 0.0) >= low)
        return k, (
            f"k = {k}: the smallest winning k whose interval reaches the highest lower bound "
            f"({low:.3f}× at k = {top.k})"
        )
    open_ = [p.k for p in points if p.k >= 1 and p.verdict not in ("LOSS", "EQUIVALENT")]
    if open_:
        ks = ", ".join(str(k) for k in open_)
        return None, f"no k wins yet; k = {ks} undecided: more restarts would decide"
    return 0, "every k is decided slower or no faster: serve without speculation"


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


def workload_alpha(arms: Sequence[ArmResult], workload: str, conc: int) -> tuple[float | None, str]:
    """α̂ on one workload: the mean of τ inversions at each arm's k from per-request draft
    counts on that workload (warm-ups excluded; arms that never drafted carry no acceptance),
    else pooled over every run's counters (all workloads of a run, as the /metrics snapshots
    cover them)."""
    taus = [(a.k, _workload(a, workload, conc)) for a in arms if a.k]
    per = [(k, w.acceptance_length.estimate) for k, w in taus if w and w.acceptance_length]
    values = [theory.alpha_from_tau(tau, k) for k, tau in per if tau is not None and k]
    if values:
        sources = {
            r.acceptance_source
            for _, w in taus
            if w is not None
            for r in w.restarts
            if r.acceptance_source
        }
        if sources == {"per-request draft counts"}:
            how = (
                "tokens per target step from per-request draft counts (an effective α̂: steps "
                "without a draft count as rejections)"
            )
        else:
            how = "acceptance lengths from the /metrics snapshots around the workload"
        return sum(values) / len(values), (
            f"inversion of τ(α, k) on {workload}: {how}; warm-ups excluded"
        )
    alpha, source = pooled_alpha(arms)
    return alpha, source + (", per run: every workload pooled" if alpha is not None else "")


def _workload(arm: ArmResult, workload: str, conc: int) -> ArmWorkload | None:
    return next(
        (w for w in arm.workloads if w.workload == workload and w.concurrency == conc), None
    )


def _explain(
    a: float, b: float, gpu: bool, a_ci: list[float] | None, b_ci: list[float] | None
) -> str:
    """What a and b mean, each stated as a fact only when its 95% bootstrap interval leaves
    out the null: a = 1 (no fixed cost of turning speculation on), b = 0 (draft tokens cost
    nothing); the large-fixed-cost diagnosis only on an established fixed cost."""
    no_fixed = a_ci is not None and a_ci[0] <= 1.0 <= a_ci[1]
    free = b_ci is not None and b_ci[0] <= 0.0 <= b_ci[1]
    fixed = (
        f"Turning speculation on may cost nothing before the first draft token: a = {a:.2f}× "
        f"a plain decode step, but its 95% bootstrap interval {a_ci[0]:.2f}–{a_ci[1]:.2f} "
        "includes 1"
        if no_fixed and a_ci
        else f"Turning speculation on costs a = {a:.2f}× a plain decode step before any draft token"
    )
    draft = (
        f"what a draft token adds is not established: b = {b:.3f} of a step, but its 95% "
        f"bootstrap interval {b_ci[0]:.3f}–{b_ci[1]:.3f} includes 0"
        if free and b_ci
        else f"each draft token adds b = {b:.3f} of a step (the draft/target cost ratio)"
    )
    text = f"{fixed}; {draft}." if no_fixed or free else f"{fixed}, and {draft}."
    if no_fixed:
        return text
    if a > LARGE_FIXED_COST and gpu:
        text += (
            " A fixed cost this large means the speculative step does more work than a plain "
            "one before any draft token: CUDA graphs lost or downgraded under speculation, a "
            "different model runner, or scheduling changed (the capture evidence shows what "
            "the engine resolved)."
        )
    elif a > LARGE_FIXED_COST:
        text += (
            " On a CPU a fixed cost this large is the verify pass's own price: checking the "
            "drafts costs more than the plain step it replaces."
        )
    return text


@dataclass(frozen=True)
class _ArmData:
    """One sweep arm's per-restart values on one workload: log restart mean, τ, counters."""

    k: int
    logs: np.ndarray
    tau: np.ndarray  # NaN where a restart has no acceptance length
    accepted: np.ndarray  # NaN without counters
    rejected: np.ndarray


def _arm_data(arm: ArmResult, workload: str, conc: int) -> _ArmData | None:
    rows = next(
        (w.restarts for w in arm.workloads if w.workload == workload and w.concurrency == conc),
        [],
    )
    by_run = {r.restart: r.acceptance for r in arm.runs}
    logs, tau, acc, rej = [], [], [], []
    for row in rows:
        if row.mean is None or row.mean <= 0:
            continue
        a = by_run.get(row.restart)
        logs.append(np.log(row.mean))
        run_tau = a.mean_acceptance_length if a and a.mean_acceptance_length else np.nan
        tau.append(row.acceptance_length if row.acceptance_length is not None else run_tau)
        counted = a is not None and a.per_position and a.drafts and a.accepted_tokens is not None
        acc.append(a.accepted_tokens if counted else np.nan)  # type: ignore[union-attr]
        rej.append(
            a.drafts * (1.0 - a.per_position[-1].cumulative) if counted else np.nan  # type: ignore[union-attr,operator]
        )
    if not logs or arm.k is None:
        return None
    return _ArmData(arm.k, np.array(logs), np.array(tau), np.array(acc), np.array(rej))


def _resample(x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """(BOOTSTRAP, len(x)) draws of x with replacement."""
    return x[rng.integers(0, len(x), (BOOTSTRAP, len(x)))]


def _bootstrap(
    base: np.ndarray, arms: Sequence[_ArmData], alpha_by_counters: bool, k_max: int
) -> dict[str, np.ndarray] | None:
    """α̂, a, b and predicted best k over restarts resampled within each arm (and the
    baseline). None when an arm has a single restart (nothing to resample)."""
    if len(base) < 2 or any(len(a.logs) < 2 for a in arms):
        return None
    rng = np.random.default_rng(SEED)
    base_c = _resample(base, rng).mean(axis=1)
    ks = np.array([a.k for a in arms], dtype=float)
    rho = np.empty((BOOTSTRAP, len(arms)))
    acc = np.zeros(BOOTSTRAP)
    rej = np.zeros(BOOTSTRAP)
    inv = np.zeros((BOOTSTRAP, len(arms)))
    for j, arm in enumerate(arms):
        idx = rng.integers(0, len(arm.logs), (BOOTSTRAP, len(arm.logs)))
        ratio = np.exp(arm.logs[idx].mean(axis=1) - base_c)
        with np.errstate(invalid="ignore"):
            tau = np.nanmean(arm.tau[idx], axis=1)
        rho[:, j] = tau / ratio
        if alpha_by_counters:
            acc += np.nansum(arm.accepted[idx], axis=1)
            rej += np.nansum(arm.rejected[idx], axis=1)
        else:
            grid = np.linspace(0.0, 1.0, 2001)
            inv[:, j] = np.interp(tau, [theory.tau(g, arm.k) for g in grid], grid)
    with np.errstate(invalid="ignore", divide="ignore"):
        alpha = acc / (acc + rej) if alpha_by_counters else inv.mean(axis=1)
    xm = ks.mean()
    b = ((ks - xm) * (rho - rho.mean(axis=1, keepdims=True))).sum(axis=1) / ((ks - xm) ** 2).sum()
    a = rho.mean(axis=1) - b * xm
    grid_k = np.arange(1, k_max + 1, dtype=float)
    al = np.clip(alpha, 0.0, 1.0 - 1e-12)[:, None]
    cost = a[:, None] + b[:, None] * grid_k
    with np.errstate(invalid="ignore", divide="ignore"):
        speed = np.where(cost > 0, (1.0 - al ** (grid_k + 1)) / (1.0 - al) / cost, -np.inf)
    best = np.where(speed.max(axis=1) > 1.0 + 1e-12, speed.argmax(axis=1) + 1, 0)
    ok = np.isfinite(alpha) & np.isfinite(a) & np.isfinite(b)
    return {"alpha": alpha[ok], "a": a[ok], "b": b[ok], "best_k": best[ok]}


def _ci(x: np.ndarray) -> list[float] | None:
    if len(x) == 0:
        return None
    low, high = np.percentile(x, [2.5, 97.5])
    return [float(low), float(high)]


def theory_fit(
    points: Sequence[SweepPoint],
    alpha: float | None,
    source: str,
    data: tuple[np.ndarray, list[_ArmData]] | None = None,
    gpu: bool = True,
) -> TheoryFit:
    """Fit ρ_k = a + b·k to the measured points, predict the speedup curve and best k, with
    bootstrap intervals when `data` (per-restart values) is given."""
    measured = [(p.k, p.rho) for p in points if p.k >= 1 and p.rho is not None]
    fit = theory.fit_step_cost([k for k, _ in measured], [r for _, r in measured])
    out = TheoryFit(alpha_hat=alpha, alpha_source=source, fit_points=len(measured))
    if fit is None:
        out.explanation = "The step-cost line needs acceptance and speed at two or more k."
        return out
    out.a, out.b = fit.a, fit.b
    ks = [k for k, _ in measured]
    k_max = max(8, 2 * max(ks))
    if alpha is not None and data is not None:
        fitted = [a for a in data[1] if a.k in ks and np.isfinite(a.tau).any()]
        boot = _bootstrap(data[0], fitted, source.startswith("counters"), k_max)
        if boot is not None:
            out.alpha_ci, out.a_ci, out.b_ci = (_ci(boot[n]) for n in ("alpha", "a", "b"))
            lo, hi = _ci(boot["best_k"].astype(float)) or [0.0, 0.0]
            out.best_k_range = [round(lo), round(hi)]
    out.explanation = _explain(fit.a, fit.b, gpu, out.a_ci, out.b_ci)
    if alpha is None:
        return out
    if alpha > DEGENERATE_ALPHA:
        out.degenerate = True
        out.explanation += (
            f" Acceptance is degenerate (α̂ = {alpha:.3f} > {DEGENERATE_ALPHA}): random weights "
            "or repetitive output accept nearly every draft, so the model predicts no best k."
        )
        return out
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
    best = theory.best_k(alpha, fit.a, fit.b, k_max)
    out.predicted_best_k = best
    out.extrapolated = best >= 1 and not min(ks) <= best <= max(ks)
    return out


def _point(arm: ArmResult, comparison: Comparison | None, workload: str, conc: int) -> SweepPoint:
    aw = _workload(arm, workload, conc)
    assert aw is not None
    tps = aw.decode_tps
    own = aw.acceptance_length or arm.acceptance_length  # this workload's τ when measured
    tau_k = own.estimate if own else None
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
    gpu: bool = True,
) -> SweepWorkload:
    """Sweep points (k = 0 baseline first), best k among WINs and the theory on one workload."""
    by_arm = {
        c.arm: c for c in comparisons if c.workload == workload and c.concurrency == concurrency
    }
    base = _point(baseline, None, workload, concurrency)
    base.k, base.ratio, base.ci_low, base.ci_high = 0, 1.0, 1.0, 1.0
    others = (_point(a, by_arm.get(a.id), workload, concurrency) for a in k_arms)
    points = [base, *sorted(others, key=lambda p: p.k)]
    alpha, source = workload_alpha(k_arms, workload, concurrency)
    base_data = _arm_data(baseline.model_copy(update={"k": 0}), workload, concurrency)
    arm_data = [d for a in k_arms if (d := _arm_data(a, workload, concurrency)) is not None]
    data = (base_data.logs, arm_data) if base_data is not None else None
    fit = theory_fit(points, alpha, source, data, gpu)
    for p in points:
        if fit.a is not None and fit.b is not None and alpha is not None and p.k >= 1:
            p.predicted_speedup = theory.predicted_speedup(alpha, p.k, fit.a, fit.b)
    best, reason = best_measured_k(points)
    return SweepWorkload(
        workload=workload,
        concurrency=concurrency,
        points=points,
        best_k=best,
        best_k_reason=reason,
        theory=fit,
    )
