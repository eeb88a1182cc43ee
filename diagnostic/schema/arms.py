"""Pydantic models of one arm in analysis.json: decode-throughput estimates, restart
summaries, planning advice, acceptance and engine timing per run (re-exported by
`schema.analysis`, the model of the whole file)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from diagnostic.schema.base import Strict as _Model


class Estimate(_Model):
    """A decode throughput (tokens/s) with its 95% interval across restarts."""

    estimate: float | None = Field(
        description="Geometric mean of restart means (tokens/s), the centre every ratio uses; "
        "with one restart, its mean; None if no data"
    )
    ci_low: float | None = Field(
        None,
        description="Lower end of the 95% interval (tokens/s): exp of the t interval on "
        "log restart means",
    )
    ci_high: float | None = Field(None, description="Upper end of the 95% interval (tokens/s)")
    n_requests: int = Field(0, description="Measured requests behind the estimate")
    n_restarts: int = Field(0, description="Restarts (server processes) behind the estimate")
    method: str = Field(
        "",
        description="How the interval was formed: 't on log restart means (df=R-1)' or "
        "'within-process' (one restart: t on requests, restart variance not measured)",
    )


class ValueCI(_Model):
    """A value with a 95% interval (e.g. acceptance length across restarts)."""

    estimate: float | None = Field(description="Point estimate; None when not measured")
    ci_low: float | None = Field(None, description="Lower end of the 95% interval")
    ci_high: float | None = Field(None, description="Upper end of the 95% interval")
    n: int = Field(0, description="Number of restart values behind the estimate")


class Outlier(_Model):
    """A request outside the Tukey fences of its restart (flagged, never removed)."""

    seq: int = Field(description="Request seq within (arm, restart, workload)")
    prompt_id: str = Field(description="Prompt of the request")
    decode_tps: float = Field(description="Decode tokens/s of the request")
    side: Literal["low", "high"] = Field(description="Which fence it crossed")


class DriftCheck(_Model):
    """Warm-up drift: first measured requests of a restart vs the rest (Welch t test)."""

    n_first: int = Field(description="Requests in the first group")
    first_mean: float | None = Field(None, description="Mean decode tokens/s of the first group")
    rest_mean: float | None = Field(None, description="Mean decode tokens/s of the rest")
    ratio: float | None = Field(None, description="first_mean / rest_mean")
    p_value: float | None = Field(None, description="Welch t-test p-value; None if too few")
    flagged: bool = Field(False, description="True when p < 0.05 and |ratio − 1| > threshold")
    threshold: float = Field(description="Relative difference that counts as drift")


class RestartSummary(_Model):
    """Requests of one restart (server process), one workload, one concurrency level."""

    arm: str = Field(description="Arm name")
    restart: int = Field(description="Restart index")
    block: int | None = Field(None, description="Block of the interleaved schedule, when any")
    workload: str = Field(description="Workload, or 'all' for every workload pooled")
    concurrency: int = Field(description="Requests in flight")
    n_requests: int = Field(description="Measured requests used")
    mean: float | None = Field(None, description="Mean decode tokens/s (the restart summary)")
    median: float | None = Field(None, description="Median decode tokens/s")
    median_ci_low: float | None = Field(
        None, description="Order-statistic 95% lower bound of the median; None when n ≤ 5"
    )
    median_ci_high: float | None = Field(None, description="Order-statistic upper bound")
    median_ci_coverage: float | None = Field(
        None, description="Exact coverage of the order-statistic interval (Binomial(n, ½))"
    )
    sd: float | None = Field(None, description="Standard deviation of request decode tokens/s")
    cv: float | None = Field(None, description="Coefficient of variation (sd / mean)")
    ttft_median_s: float | None = Field(None, description="Median time to first token (s)")
    e2e_median_s: float | None = Field(None, description="Median end-to-end time (s)")
    tokens_per_chunk: float | None = Field(
        None, description="Mean output tokens per streamed chunk (>1 under speculation)"
    )
    drift: DriftCheck | None = Field(None, description="Warm-up drift check; None if < 6 requests")
    outliers: list[Outlier] = Field(default_factory=list, description="Tukey-fence outliers")
    acceptance_length: float | None = Field(
        None,
        description="Acceptance length over these requests (warm-ups excluded): from the "
        "engine's per-request draft counts, Σ tokens / (Σ tokens − Σ accepted) per target step; "
        "else from the /metrics snapshots around the workload, 1 + Δaccepted/Δdrafts",
    )
    acceptance_source: Literal["per-request draft counts", "metrics around the workload"] | None = (
        Field(None, description="Where acceptance_length came from")
    )


class PlanningAdvice(_Model):
    """Variance components and the Kalibera & Jones plan for the next measurement, on the log
    scale of decode tok/s with the arm's prompt effects removed (analyse.pairing)."""

    s1_sq: float | None = Field(None, description="Within-restart, within-prompt variance S1²")
    s2_sq: float | None = Field(
        None, description="Variance S2² of the prompt-adjusted restart levels"
    )
    t2_sq: float | None = Field(
        None, description="Restart component T2² = S2² − k·S1² (k = 1/m when prompts are crossed)"
    )
    p2_sq: float | None = Field(
        None,
        description="Prompt-by-arm variance against the baseline: what a block's ratio keeps "
        "of the prompts it served (None for the baseline itself; ≤ 0: none seen)",
    )
    m: float | None = Field(None, description="Mean measured requests per restart")
    cv_within: float | None = Field(None, description="sqrt(S1²): request CV within a prompt")
    cv_between: float | None = Field(
        None, description="sqrt(S2²): CV of the prompt-adjusted restart levels"
    )
    restart_share: float | None = Field(
        None, description="Share of the restart component: T2² / (T2² + k·S1²)"
    )
    cost_restart_s: float = Field(description="Assumed cost of one restart (s)")
    cost_request_s: float | None = Field(None, description="Mean cost of one request (s, e2e)")
    recommended_requests_per_restart: int | None = Field(
        None,
        description="m* = ceil(sqrt(c_restart/c_request · S1²/T2²)), with the prompt-by-arm "
        "variance when restarts serve part of the prompt set; None if T2² ≤ 0",
    )
    target_width: float = Field(description="Target relative full width of the 95% interval")
    recommended_restarts: int | None = Field(
        None,
        description="Restarts per arm for a ratio interval W wide: the smallest R with "
        "2·t(R−1)·sqrt(2·s²/R) ≤ W, s² = T2² + S1²/m (+ the prompt-by-arm share); at least 3",
    )
    advice: str = Field("", description="One sentence for the report")


class ArmWorkload(_Model):
    """One arm on one workload at one concurrency level."""

    workload: str = Field(description="Workload, or 'all' (every workload pooled per restart)")
    concurrency: int = Field(description="Requests in flight")
    decode_tps: Estimate = Field(description="Decode tokens/s across restarts")
    ttft_median_s: float | None = Field(None, description="Median TTFT over measured requests (s)")
    restarts: list[RestartSummary] = Field(default_factory=list, description="Per restart")
    planning: PlanningAdvice | None = Field(None, description="Variance components and advice")
    acceptance_length: ValueCI | None = Field(
        None,
        description="Mean acceptance length on this workload across restarts (t interval), from "
        "per-request draft counts; None when the engine gives none per request",
    )


class PositionAcceptance(_Model):
    """Acceptance at one draft position, from cumulative per-position counters."""

    position: int = Field(description="Draft position, 0-based")
    cumulative: float = Field(description="a_i = accepted_at_i / drafts = P(accepted length > i)")
    conditional: float | None = Field(
        None, description="a_i / a_(i−1): acceptance given the previous positions were accepted"
    )


class RunAcceptance(_Model):
    """Speculation acceptance of one server process."""

    source: Literal["metrics", "log", "none"] = Field(description="Where the numbers came from")
    engine_prefix: str | None = Field(None, description="Metric prefix: vllm, llamacpp, sglang")
    drafts: float | None = Field(None, description="Δ verification steps with a draft")
    draft_tokens: float | None = Field(None, description="Δ draft tokens proposed")
    accepted_tokens: float | None = Field(None, description="Δ draft tokens accepted")
    mean_acceptance_length: float | None = Field(
        None, description="Tokens per verify step: 1 + Δaccepted/Δdrafts (bonus token counted)"
    )
    acceptance_rate: float | None = Field(None, description="Δaccepted / Δdraft_tokens")
    per_position: list[PositionAcceptance] = Field(
        default_factory=list, description="Per-position acceptance, when the engine exposes it"
    )
    alpha_hat: float | None = Field(
        None, description="Per-token acceptance α̂ = A / (A + drafts stopped early)"
    )
    log_mean_acceptance_length: float | None = Field(
        None, description="Mean acceptance length from the server log, for cross-checking"
    )


class EngineTiming(_Model):
    """A run's decode throughput as the engine timed it, beside the client's on the same
    requests: the check that the client measures what the engine did."""

    source: str = Field(description="Which engine figures: vLLM /metrics or llama.cpp timings")
    engine_tps: float = Field(description="Decode tokens/s by the engine's own clock")
    client_tps: float = Field(
        description="Σ tokens after the first chunk / Σ first-to-last chunk time, same requests"
    )
    ratio: float = Field(description="client_tps / engine_tps")
    engine_requests: int = Field(description="Requests the engine's figures cover")
    client_requests: int = Field(description="Requests with a decode interval on the client")
    engine_tokens: float | None = Field(None, description="Tokens the engine counted")
    client_tokens: int = Field(description="Tokens the API's usage reported, same requests")


class RunSummary(_Model):
    """One server process of an arm."""

    restart: int = Field(description="Restart index")
    block: int | None = Field(None, description="Block of the schedule")
    status: str = Field(description="Run status from run.json")
    engine: str = Field(description="Engine name")
    engine_version: str | None = Field(None, description="Engine version")
    acceptance: RunAcceptance | None = Field(None, description="Acceptance; None if not measured")
    engine_timing: EngineTiming | None = Field(
        None, description="The engine's own decode throughput beside the client's, if exposed"
    )


class ArmResult(_Model):
    """Everything measured for one arm."""

    id: str = Field(description="Arm name")
    speculative: bool | None = Field(None, description="Whether the arm speculates (plan)")
    k: int | None = Field(None, description="Draft tokens per step (params['k']), when given")
    params: dict[str, int | float | str] = Field(default_factory=dict, description="Plan params")
    aa_of: str | None = Field(None, description="Arm this one repeats (A/A noise arm)")
    is_baseline: bool = Field(False, description="True for the baseline arm")
    decode_tps: Estimate = Field(
        description="Decode tokens/s, every workload pooled, lowest concurrency level"
    )
    acceptance_length: ValueCI | None = Field(
        None, description="Mean acceptance length across restarts (t interval); None if absent"
    )
    alpha_hat: float | None = Field(None, description="Pooled per-token acceptance α̂ over runs")
    workloads: list[ArmWorkload] = Field(
        default_factory=list, description="Breakdown per workload and concurrency level"
    )
    runs: list[RunSummary] = Field(default_factory=list, description="Per restart facts")
