"""Pydantic models of analysis.json: what `analyse` computes from a bundle and reports render."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, SerializerFunctionWrapHandler, model_serializer

from diagnostic.schema.arms import (
    ArmResult,
    ArmWorkload,
    DriftCheck,
    EngineTiming,
    Estimate,
    Outlier,
    PlanningAdvice,
    PositionAcceptance,
    RestartSummary,
    RunAcceptance,
    RunSummary,
    ValueCI,
)
from diagnostic.schema.base import Strict as _Model
from diagnostic.schema.comparison import (
    WITHIN_PROCESS_LABEL,
    Comparison,
    ComparisonKind,
    ExtensionPoint,
    IntervalMethod,
    Outlook,
    StoppingStatus,
    Verdict,
)
from diagnostic.schema.covariate import CovariateAnalysis
from diagnostic.schema.sweep import Sweep, SweepPoint, SweepWorkload, TheoryFit, TheoryPoint
from diagnostic.schema.telemetry import TelemetryAnalysis

# analysis.json format history (bump on any change an older reader would misread; adding an
# optional field is not such a change):
#   1 — 2026-11: arms, comparisons, sweep, equivalence, noise band, exclusions, adaptive.
#   2 — 2026-12: one interval per comparison (ci_low/ci_high are the deciding interval, at
#       ci_level, labelled ci_label; verdict_ci_* gone), matched baselines, the plan's margin
#       as δ with the A/A arm as a check, arm estimates as geometric means, theory intervals.
#   3 — 2026-12: planning advice on the log scale with each arm's prompt effects removed
#       (s1_sq, s2_sq, t2_sq, cv_within, cv_between were in tok/s); p2_sq added; the spec
#       family's intervals simultaneous by max-|t| over moderated block variances (ci_level
#       each one's own level), no verdict below 3 restarts a side or on a derived 'all' row.
#   4 — 2026-12: verdict WITHHELD where there is no verdict (was INCONCLUSIVE with withheld
#       set); before_after: the recommended configuration against the one as found.
#   5 — 2026-12: `covariate` (schema/covariate.py): when it is present and `applied`, the
#       comparisons and their verdicts come from restart means adjusted by the arm-free
#       covariate, and its `estimates` hold the raw ones beside them. A v4 file reads as v5
#       without the field (analyse/verify.py upgrade_analysis): v4 had no adjustment.
ANALYSIS_SCHEMA_VERSION = 5

ALL_WORKLOADS = "all"


# The models of one arm (schema/arms.py), of one comparison (schema/comparison.py) and of the
# k sweep (schema/sweep.py) are re-exported: analysis.json is one schema.
__all__ = [
    "ALL_WORKLOADS",
    "ANALYSIS_SCHEMA_VERSION",
    "WITHIN_PROCESS_LABEL",
    "Adaptive",
    "Analysis",
    "ArmEquivalence",
    "ArmResult",
    "ArmWorkload",
    "Comparison",
    "ComparisonKind",
    "DriftCheck",
    "EngineTiming",
    "Estimate",
    "Exclusion",
    "Exclusions",
    "ExtensionPoint",
    "IntervalMethod",
    "LeftOutRun",
    "Methods",
    "NoiseBand",
    "Outlier",
    "Outlook",
    "PlanningAdvice",
    "PositionAcceptance",
    "PromptEquivalence",
    "RestartSummary",
    "RunAcceptance",
    "RunSummary",
    "StoppingStatus",
    "Sweep",
    "SweepPoint",
    "SweepWorkload",
    "TheoryFit",
    "TheoryPoint",
    "ValueCI",
    "Verdict",
]


class PromptEquivalence(_Model):
    """Greedy output of one prompt: arm vs baseline."""

    workload: str = Field(description="Workload")
    prompt_id: str = Field(description="Prompt id")
    identical: bool = Field(description="Every arm output equals the baseline's")
    first_divergent_char: int | None = Field(None, description="0-based first differing char")
    baseline_excerpt: str | None = Field(None, description="Baseline text around the divergence")
    arm_excerpt: str | None = Field(None, description="Arm text around the divergence")
    baseline_consistent: bool = Field(
        True, description="The baseline produced one text for this prompt across its requests"
    )


class ArmEquivalence(_Model):
    """Greedy output equivalence of one arm against the baseline."""

    arm: str = Field(description="Arm compared")
    baseline: str = Field(description="Baseline arm")
    n_prompts: int = Field(description="Prompts compared")
    n_identical: int = Field(description="Prompts with identical output")
    rate: float | None = Field(None, description="n_identical / n_prompts")
    prompts: list[PromptEquivalence] = Field(default_factory=list, description="Per prompt")


class NoiseBand(_Model):
    """The practical margin δ inside which a ratio counts as no difference, and the A/A check."""

    delta: float = Field(description="δ: the plan's margin; EQUIVALENT inside [1/(1+δ), 1+δ]")
    source: str = Field(description="Where δ comes from (the plan's margin, or the default)")
    aa_check: bool | None = Field(
        None,
        description="Every A/A interval with restarts on both sides contains 1; False: drift or "
        "order effects, every verdict carries a caveat; None: no such A/A comparison",
    )
    aa_ci_low: float | None = Field(
        None, description="Widest A/A 95% interval, lower end: the measured restart noise"
    )
    aa_ci_high: float | None = Field(None, description="Widest A/A 95% interval, upper end")
    aa_source: str | None = Field(None, description="Which A/A comparison that interval is")


class Exclusion(_Model):
    """Requests left out of the statistics for one reason in one run."""

    arm: str = Field(description="Arm")
    restart: int = Field(description="Restart")
    reason: str = Field(description="error, warmup, token count, no decode interval, run failed")
    count: int = Field(description="Requests excluded for this reason")


class Exclusions(_Model):
    """Every excluded request, counted by reason."""

    total: int = Field(0, description="Requests excluded")
    by_reason: dict[str, int] = Field(default_factory=dict, description="Counts per reason")
    items: list[Exclusion] = Field(default_factory=list, description="Counts per run and reason")
    torn_lines: int = Field(0, description="Torn last lines dropped from requests.jsonl")


class LeftOutRun(_Model):
    """A run left out of every figure."""

    run: str = Field(description="Run id, <arm>-r<restart>")
    reason: str = Field(description="Why: the run failed, or over 10% of its requests failed")


class Adaptive(_Model):
    """Whether the adaptive sweep may stop adding blocks."""

    planned_looks: list[int] = Field(description="Restarts (blocks) per arm at each look")
    n_now: int = Field(description="Restarts (blocks) per arm available now (minimum)")
    all_decided: bool = Field(description="Every spec comparison can stop now")
    next_look: int | None = Field(None, description="Next planned look; None after the last")


class Methods(_Model):
    """How every number was computed, in words for the report's method section."""

    decode_tps: str = Field(description="Per-request decode throughput")
    restart_summary: str = Field(description="How one restart is summarised")
    arm_interval: str = Field(description="Interval of one arm across restarts")
    ratio_interval: str = Field(description="Interval of the speedup ratio")
    verdict: str = Field(description="Decision rule")
    multiplicity: str = Field(description="Several arms vs one baseline")
    acceptance: str = Field(description="Acceptance from /metrics deltas")


class Analysis(_Model):
    """analysis.json: the statistics of one bundle, ready for reports and the JSON API."""

    schema_version: int = Field(ANALYSIS_SCHEMA_VERSION, description="analysis.json version")
    tool_version: str = Field(description="diagnose version that computed it")
    created_at: str = Field(description="UTC time of the analysis")
    bundle: str = Field(description="Path of the bundle analysed")
    title: str | None = Field(None, description="Report title (report --title)")
    client: str | None = Field(None, description="Client shown on the report (report --client)")
    engines: list[str] = Field(default_factory=list, description="Engine name/version seen")
    model: str | None = Field(None, description="Model served")
    baseline: str | None = Field(None, description="Baseline arm")
    workloads: list[str] = Field(default_factory=list, description="Workloads measured")
    concurrency_levels: list[int] = Field(default_factory=list, description="Levels measured")
    max_tokens: int = Field(description="Output length every request was forced to")
    noise_band: NoiseBand = Field(description="δ and whether it was calibrated")
    arms: list[ArmResult] = Field(default_factory=list, description="Per arm")
    comparisons: list[Comparison] = Field(default_factory=list, description="Arms vs baseline")
    before_after: list[Comparison] = Field(
        default_factory=list,
        description="The recommended configuration (arm) against the configuration as found "
        "(baseline) per workload and level, when the plan names an as-found arm and something "
        "beats it: a family of its own, simultaneous at 95% over its workloads and levels",
    )
    sweep: Sweep | None = Field(None, description="The k sweep, when arms carry params['k']")
    equivalence: list[ArmEquivalence] = Field(
        default_factory=list, description="Greedy output equivalence per arm vs baseline"
    )
    exclusions: Exclusions = Field(default_factory=Exclusions, description="Excluded requests")
    left_out_runs: list[LeftOutRun] = Field(
        default_factory=list, description="Runs left out of every figure, with the reason"
    )
    failed_requests: int = Field(0, description="Measured (non-warm-up) requests that failed")
    family_size: int = Field(0, description="Speculative comparisons with a verdict (m)")
    design: Literal["fixed", "adaptive"] = Field("fixed", description="The sweep's design")
    adaptive: Adaptive | None = Field(None, description="Adaptive stopping summary")
    methods: Methods = Field(description="Method text for the report")
    notes: list[str] = Field(default_factory=list, description="Caveats for the report")
    telemetry: TelemetryAnalysis | None = Field(
        None, description="GPU and host telemetry per run; absent when no run recorded any"
    )
    covariate: CovariateAnalysis | None = Field(
        None,
        description="The restart means adjusted by the arm-free covariate (quiet window), its "
        "balance check and raw beside adjusted estimates; absent when the runs have none",
    )

    @model_serializer(mode="wrap")
    def _without_absent_telemetry(self, handler: SerializerFunctionWrapHandler) -> Any:
        """analysis.json of a bundle without telemetry (or covariate) stays as it was before
        them (a report made earlier verifies against it), so the field is left out, not null."""
        data = handler(self)
        for name in ("telemetry", "covariate"):
            if isinstance(data, dict) and data.get(name, 0) is None:
                del data[name]
        return data

    @property
    def aa_check(self) -> bool | None:
        """The A/A check of the design (NoiseBand.aa_check)."""
        return self.noise_band.aa_check
