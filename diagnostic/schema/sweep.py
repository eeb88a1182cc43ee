"""Pydantic models of the k sweep in analysis.json: the measured points per workload and
level, and the theory fitted to them (re-exported by `schema.analysis`)."""

from __future__ import annotations

from pydantic import Field

from diagnostic.schema.arms import Estimate
from diagnostic.schema.base import Strict as _Model
from diagnostic.schema.comparison import Verdict

__all__ = ["Sweep", "SweepPoint", "SweepWorkload", "TheoryFit", "TheoryPoint"]


class TheoryPoint(_Model):
    """Predicted speedup at one k."""

    k: int = Field(description="Draft tokens per step")
    tau: float = Field(description="Expected tokens per verify step τ(α̂, k)")
    rho: float = Field(description="Predicted step cost ratio ρ_k = a + b·k (1 at k = 0)")
    speedup: float = Field(description="Predicted speedup τ/ρ")


class TheoryFit(_Model):
    """Leviathan model with a fitted step-cost line, vs what was measured."""

    alpha_hat: float | None = Field(description="Per-token acceptance α̂ used")
    alpha_source: str = Field(description="counters, inversion of τ, or none")
    a: float | None = Field(None, description="Fixed cost of turning speculation on (ρ at k→0)")
    b: float | None = Field(None, description="Marginal cost of one draft token (≈ c)")
    fit_points: int = Field(0, description="Measured k values used in the fit")
    predicted: list[TheoryPoint] = Field(default_factory=list, description="Predicted curve")
    predicted_best_k: int | None = Field(None, description="argmax τ/ρ (0: speculation off)")
    alpha_ci: list[float] | None = Field(
        None, description="95% bootstrap interval of α̂ (resampling restarts within each arm)"
    )
    a_ci: list[float] | None = Field(None, description="95% bootstrap interval of a")
    b_ci: list[float] | None = Field(None, description="95% bootstrap interval of b")
    best_k_range: list[int] | None = Field(
        None, description="2.5th and 97.5th percentile of the bootstrap's predicted best k"
    )
    extrapolated: bool = Field(
        False, description="The predicted best k lies outside the measured k range"
    )
    degenerate: bool = Field(
        False,
        description="α̂ > 0.95: acceptance is degenerate (random weights or repetitive output); "
        "no best k is predicted",
    )
    explanation: str = Field("", description="What a and b mean here, in one or two sentences")


class SweepPoint(_Model):
    """One k of the sweep on one workload."""

    k: int = Field(description="Draft tokens (0 = baseline)")
    arm: str = Field(description="Arm measured at this k")
    decode_tps: Estimate = Field(description="Decode tokens/s")
    ratio: float | None = Field(None, description="Speedup vs baseline")
    ci_low: float | None = Field(None, description="Lower 95% end of the speedup")
    ci_high: float | None = Field(None, description="Upper 95% end")
    p_adjusted: float | None = Field(None, description="BH-adjusted p-value")
    verdict: Verdict | None = Field(None, description="Verdict (None at k = 0)")
    acceptance_length: float | None = Field(None, description="Measured τ_k (mean over runs)")
    rho: float | None = Field(None, description="Measured step cost ratio τ_k·tps_0/tps_k")
    predicted_speedup: float | None = Field(None, description="Theory's speedup at this k")


class SweepWorkload(_Model):
    """The k sweep on one workload at one concurrency level."""

    workload: str = Field(description="Workload, or 'all'")
    concurrency: int = Field(description="Requests in flight")
    points: list[SweepPoint] = Field(description="One point per k, k = 0 first")
    best_k: int | None = Field(
        None,
        description="Among WINs: the smallest k whose interval reaches the highest lower bound; "
        "0 when every k is decided LOSS or EQUIVALENT (speculation off); None while any is "
        "undecided",
    )
    best_k_reason: str = Field("", description="Why best_k is what it is, in one sentence")
    theory: TheoryFit | None = Field(None, description="Model fit and prediction")


class Sweep(_Model):
    """The k sweep: arms with params['k'] against the baseline."""

    ks: list[int] = Field(description="k values measured (0 = baseline)")
    best_k: int | None = Field(None, description="Best k on every workload pooled (lowest conc.)")
    workloads: list[SweepWorkload] = Field(description="Per workload and concurrency level")
