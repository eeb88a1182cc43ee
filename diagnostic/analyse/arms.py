"""Per-restart summaries and per-arm estimates across restarts (one workload, one level)."""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Sequence

from diagnostic.analyse import pairing, stats
from diagnostic.analyse.pairing import ArmNoise
from diagnostic.analyse.requests import Sample
from diagnostic.schema.analysis import (
    ArmWorkload,
    DriftCheck,
    Estimate,
    Outlier,
    PlanningAdvice,
    RestartSummary,
    ValueCI,
)

__all__ = [
    "DRIFT_THRESHOLD",
    "acceptance_length",
    "arm_workload",
    "by_restart",
    "estimate",
    "planning",
    "restart_summary",
    "restarts_acceptance",
]

DRIFT_THRESHOLD = 0.05
"""Relative difference of the first requests' mean that counts as warm-up drift."""
DEFAULT_RESTART_COST_S = 120.0
"""Assumed cost of one server restart when no launch timing was recorded."""
METHOD_RESTARTS = "geometric mean of restart means, t on log restart means (df = R−1)"
METHOD_WITHIN = "within-process: t on requests of one restart; restart variance not measured"


def by_restart(samples: Sequence[Sample]) -> dict[int, list[Sample]]:
    """Samples grouped by restart, each group in send order."""
    groups: dict[int, list[Sample]] = defaultdict(list)
    for s in samples:
        groups[s.restart].append(s)
    return {r: sorted(g, key=lambda s: (s.t_send, s.seq)) for r, g in sorted(groups.items())}


def _median(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def _drift(values: list[float]) -> DriftCheck | None:
    if len(values) < 6:
        return None
    n_first = max(3, len(values) // 5)
    d = stats.drift_check(values, n_first=n_first, threshold=DRIFT_THRESHOLD)
    return DriftCheck(
        n_first=d.n_first,
        first_mean=d.first_mean,
        rest_mean=d.rest_mean,
        ratio=d.ratio,
        p_value=d.p_value,
        flagged=d.flagged,
        threshold=DRIFT_THRESHOLD,
    )


def restart_summary(group: list[Sample], workload: str, concurrency: int) -> RestartSummary:
    """Mean, median with order-statistic CI, spread, drift and Tukey outliers of one restart."""
    values = [s.decode_tps for s in group]
    med = stats.median_ci(values)
    mean = statistics.fmean(values)
    sd = statistics.stdev(values) if len(values) > 1 else None
    tau = acceptance_length(group)
    return RestartSummary(
        arm=group[0].arm,
        restart=group[0].restart,
        block=group[0].block,
        workload=workload,
        concurrency=concurrency,
        n_requests=len(values),
        mean=mean,
        median=med.median,
        median_ci_low=med.low,
        median_ci_high=med.high,
        median_ci_coverage=med.coverage,
        sd=sd,
        cv=sd / mean if sd is not None and mean > 0 else None,
        ttft_median_s=_median([s.ttft_s for s in group]),
        e2e_median_s=_median([s.e2e_s for s in group]),
        tokens_per_chunk=statistics.fmean(s.tokens_per_chunk for s in group),
        drift=_drift(values),
        outliers=[
            Outlier(seq=group[i].seq, prompt_id=group[i].prompt_id, decode_tps=values[i], side=side)
            for i, side in stats.tukey_outliers(values)
        ],
        acceptance_length=tau,
        acceptance_source="per-request draft counts" if tau else None,
    )


def acceptance_length(group: Sequence[Sample]) -> float | None:
    """Tokens per verify step over requests with per-request draft counts: each step yields
    its accepted drafts plus one token, so steps = Σ tokens − Σ accepted."""
    counted = [s for s in group if s.accepted_tokens is not None and s.draft_tokens is not None]
    if not counted or not any(s.draft_tokens for s in counted):
        return None
    tokens = sum(s.tokens for s in counted)
    accepted = sum(s.accepted_tokens or 0.0 for s in counted)
    return tokens / (tokens - accepted) if tokens > accepted else None


def restarts_acceptance(restarts: Sequence[RestartSummary]) -> ValueCI | None:
    """Mean acceptance length across restarts with its t interval; None when unmeasured."""
    values = [r.acceptance_length for r in restarts if r.acceptance_length is not None]
    if not values:
        return None
    ci = stats.t_interval(values)
    return ValueCI(estimate=ci.estimate, ci_low=ci.low, ci_high=ci.high, n=ci.n)


def restart_means(groups: dict[int, list[Sample]]) -> dict[int, float]:
    """The restart summary: mean decode tok/s of each restart's measured requests."""
    return {r: statistics.fmean(s.decode_tps for s in g) for r, g in groups.items()}


def estimate(groups: dict[int, list[Sample]]) -> Estimate:
    """Geometric mean of restart means with the t interval of the log restart means,
    exponentiated (the centre every speedup ratio uses); with one restart, its mean with the
    within-process t interval on its requests (labelled as such, lower end clipped at 0)."""
    n_requests = sum(len(g) for g in groups.values())
    if not groups:
        return Estimate(estimate=None, n_requests=0, n_restarts=0)
    if len(groups) == 1:
        ci = stats.t_interval([s.decode_tps for s in next(iter(groups.values()))])
        low = None if ci.low is None else max(ci.low, 0.0)
        centre, high, method = ci.estimate, ci.high, METHOD_WITHIN
    else:
        ci = stats.t_interval([math.log(m) for m in restart_means(groups).values()])
        centre = math.exp(ci.estimate) if ci.estimate is not None else None
        low = math.exp(ci.low) if ci.low is not None else None
        high = math.exp(ci.high) if ci.high is not None else None
        method = METHOD_RESTARTS
    return Estimate(
        estimate=centre,
        ci_low=low,
        ci_high=high,
        n_requests=n_requests,
        n_restarts=len(groups),
        method=method,
    )


def planning(
    groups: dict[int, list[Sample]],
    noise: ArmNoise | None,
    *,
    cost_restart_s: float | None,
    target_width: float,
) -> PlanningAdvice | None:
    """Kalibera & Jones variance components with the arm's prompt effects removed (`noise`,
    analyse.pairing, log scale) and the requests/restarts they recommend for its comparison
    with the baseline: one side carries half the prompt-by-arm variance (the baseline's own
    row none), as in the sweep's planner."""
    if noise is None:
        return None
    cost_restart = cost_restart_s if cost_restart_s is not None else DEFAULT_RESTART_COST_S
    cost_request = _median([s.e2e_s for g in groups.values() for s in g])
    side_p2 = max(noise.p2_sq or 0.0, 0.0) / 2
    m_star = (
        pairing.paired_requests(
            cost_restart, cost_request, noise.s1_sq, noise.t2_sq, side_p2, noise.prompts
        )
        if cost_request
        else None
    )
    t2 = max(noise.t2_sq, 0.0)
    side = pairing.side_variance(noise.s1_sq, t2, side_p2, noise.prompts, noise.m)
    restarts = stats.restarts_for_width(math.sqrt(side), target_width)
    within = noise.s1_sq * noise.k
    return PlanningAdvice(
        s1_sq=noise.s1_sq,
        s2_sq=noise.s2_sq,
        t2_sq=noise.t2_sq,
        p2_sq=noise.p2_sq,
        m=noise.m,
        cv_within=math.sqrt(max(noise.s1_sq, 0.0)),
        cv_between=math.sqrt(max(noise.s2_sq, 0.0)),  # a tiny negative from rounding
        restart_share=t2 / (t2 + within) if t2 + within > 0 else None,
        cost_restart_s=cost_restart,
        cost_request_s=cost_request,
        recommended_requests_per_restart=m_star,
        target_width=target_width,
        recommended_restarts=restarts,
        advice=_advice(m_star, restarts, target_width, noise.t2_sq),
    )


def _advice(m_star: int | None, restarts: int | None, width: float, t2_sq: float) -> str:
    pct = f"{width * 100:.0f}%"
    many = f"{restarts} restarts per arm" if restarts else "over 1,000 restarts per arm"
    if t2_sq <= 0 or m_star is None:
        return (
            f"Restart-to-restart noise was not detectable above request noise; {many} give a "
            f"{pct} wide 95% speedup interval."
        )
    return (
        f"Use about {m_star} requests per restart and {many} for a {pct} wide 95% speedup interval."
    )


def arm_workload(
    samples: Sequence[Sample],
    workload: str,
    concurrency: int,
    *,
    noise: ArmNoise | None,
    cost_restart_s: float | None,
    target_width: float,
) -> ArmWorkload:
    """One arm on one workload at one level: estimate, restart summaries, planning (from its
    prompt-adjusted variance components `noise`)."""
    groups = by_restart(samples)
    restarts = [restart_summary(g, workload, concurrency) for g in groups.values()]
    return ArmWorkload(
        workload=workload,
        concurrency=concurrency,
        decode_tps=estimate(groups),
        ttft_median_s=_median([s.ttft_s for s in samples]),
        restarts=restarts,
        planning=planning(groups, noise, cost_restart_s=cost_restart_s, target_width=target_width),
        acceptance_length=restarts_acceptance(restarts),
    )
