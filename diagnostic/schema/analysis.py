"""Pydantic models of analysis.json: what `analyse` computes from a bundle and reports render."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    model_serializer,
)

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
ANALYSIS_SCHEMA_VERSION = 4

Verdict = Literal["WIN", "LOSS", "EQUIVALENT", "INCONCLUSIVE", "WITHHELD"]
IntervalMethod = Literal["welch-log-restart-means", "paired-log-block-ratios", "within-process"]
ComparisonKind = Literal["spec", "aa", "config", "after"]
ALL_WORKLOADS = "all"
WITHIN_PROCESS_LABEL = "within-process only; restart variance not measured"


# The arm models live in schema/arms.py and are re-exported: analysis.json is one schema.
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


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class StoppingStatus(_Model):
    """Group-sequential (Pocock) status of one comparison, for `sweep --adaptive`."""

    planned_looks: list[int] = Field(description="Restarts (blocks) per arm at which to look")
    n_now: int = Field(description="Restarts (blocks) per arm available now")
    look_number: int | None = Field(None, description="1-based look reached now; None between")
    per_look_alpha: float = Field(description="Nominal two-sided level per look (Pocock / m)")
    verdict_at_look: Verdict | None = Field(
        None, description="Verdict of the comparison's interval (at the per-look level)"
    )
    can_stop: bool = Field(
        False, description="True at a look whose interval decides, at a futile one, or the last"
    )
    target: float | None = Field(
        None, description="Speedup the plan is powered to find (0.1 = +10%); None: no futility"
    )
    futility_p: float | None = Field(
        None,
        description="One-sided p-value of 'ratio ≥ 1 + target' at this look (t test on the "
        "comparison's log ratio); below futility_alpha at an interim look: futile",
    )
    futile: bool = Field(
        False,
        description="Stopped for futility: undecided, and the data reject the target speedup",
    )
    reason: str = Field("", description="Why it can or cannot stop")


class ExtensionPoint(_Model):
    """A planned extension of an undecided comparison and its chance of deciding it."""

    restarts: int = Field(description="Restarts (blocks) per arm in all after the extension")
    added: int = Field(description="Restarts per arm the extension adds")
    assurance: float = Field(
        description="Probability that the comparison is then decided (WIN, LOSS or "
        "EQUIVALENT at its level), averaged over the confidence distribution of its speedup"
    )


class Outlook(_Model):
    """An undecided comparison: what the data say now, and what more restarts would buy."""

    p_faster: float = Field(description="P(speedup > 1 + δ) under the confidence distribution")
    p_slower: float = Field(description="P(speedup < 1/(1 + δ)) under it")
    low95: float = Field(description="Lower end of this comparison's own 95% interval")
    high95: float = Field(description="Upper end of it (one comparison alone: not simultaneous)")
    method: str = Field(
        "confidence distribution: t on the log ratio with the deciding interval's SE and df",
        description="What the probabilities are",
    )
    extension: list[ExtensionPoint] = Field(
        default_factory=list, description="Planned extensions and their assurance"
    )


class Comparison(_Model):
    """One arm against the baseline on one workload at one concurrency level."""

    arm: str = Field(description="Arm compared")
    baseline: str = Field(description="Baseline arm")
    workload: str = Field(description="Workload, or 'all'")
    concurrency: int = Field(description="Requests in flight")
    kind: ComparisonKind = Field(
        description="'spec': a speculative arm vs its matched baseline; 'aa': the A/A check; "
        "'config': a non-speculative arm vs the plan's baseline (table only); 'after': the "
        "recommended configuration vs the configuration as found (Analysis.before_after)"
    )
    matched: bool = Field(
        True,
        description="The baseline's launch differs from the arm's only in speculation flags "
        "(or the plan names it); an unmatched comparison never makes a headline",
    )
    differs: str | None = Field(None, description="What else differs, when not matched")
    k: int | None = Field(None, description="The arm's k, when given")
    ratio: float | None = Field(description="Ratio of geometric means of restart means")
    ci_low: float | None = Field(
        None, description="Lower end of the interval that decided the verdict (at ci_level)"
    )
    ci_high: float | None = Field(None, description="Upper end of the deciding interval")
    ci_level: float = Field(description="Confidence level of that interval (e.g. 1 − 0.05/m)")
    ci_label: str = Field(
        "95% CI",
        description="The interval in words: '95% CI', 'simultaneous 95% CI over 6 "
        "comparisons', 'Pocock-adjusted 95% CI, look 2 of 4'",
    )
    verdict: Verdict = Field(
        description="WIN, LOSS, EQUIVALENT or INCONCLUSIVE against the margin; WITHHELD when "
        "there is no verdict (fewer than 3 restarts a side, or a derived row: label says)"
    )
    withheld: bool = Field(
        False,
        description="No verdict: fewer than 3 restarts on a side, or a derived row (label says)",
    )
    derived: bool = Field(
        False,
        description="A row pooled over every workload: shown, never one of the plan's "
        "comparisons (no verdict, not in the family)",
    )
    lean: Literal["faster", "slower"] | None = Field(
        None, description="INCONCLUSIVE: the side the estimate leans to"
    )
    interval_method: IntervalMethod = Field(description="How the ratio interval was formed")
    paired: bool = Field(False, description="True when paired on blocks (ttest_rel)")
    p_value: float | None = Field(None, description="Two-sided p-value of log ratio = 0")
    p_adjusted: float | None = Field(None, description="Benjamini-Hochberg adjusted p-value")
    family_size: int = Field(1, description="Comparisons whose verdicts share the 5% error rate")
    n_restarts_arm: int = Field(description="Restarts of the arm used")
    n_restarts_baseline: int = Field(description="Restarts of the baseline used")
    pooled_with: str | None = Field(
        None,
        description="A/A repeat(s) averaged with the baseline in each block (design.pool_aa); "
        "their restarts are not in n_restarts_baseline",
    )
    within_process_only: bool = Field(
        False, description="True when a side has one restart: the interval is of one process"
    )
    label: str | None = Field(None, description="Caveat to print beside the interval")
    more_restarts_needed: int | None = Field(
        None,
        description="Undecided: restarts per arm in all whose planned extension decides it "
        "with probability ≥ 80% (outlook.extension); withheld: the floor a verdict needs; "
        "None when no extension of up to 200 more restarts reaches 80%",
    )
    reference_tps: float | None = Field(
        None,
        description="Decode tok/s of what the ratio is against, over the blocks it uses (the "
        "pooled reference's own figure when the A/A repeat joins it): arm / this = ratio",
    )
    sensitivity: str | None = Field(
        None,
        description="Pooled reference: the verdict against the baseline alone, when it differs",
    )
    outlook: Outlook | None = Field(
        None, description="Undecided family member: the confidence distribution and extensions"
    )
    stopping: StoppingStatus | None = Field(None, description="Adaptive-stopping status")

    @property
    def headline(self) -> bool:
        """May appear on page 1: a matched speculative comparison with a verdict."""
        return self.kind == "spec" and self.matched and not self.withheld

    @property
    def checks_design(self) -> bool:
        """An A/A comparison with restarts on both sides: its 95% interval must contain 1
        (NoiseBand.aa_check)."""
        return (
            self.kind == "aa"
            and not self.within_process_only
            and self.ci_low is not None
            and self.ci_high is not None
        )


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

    @model_serializer(mode="wrap")
    def _without_absent_telemetry(self, handler: SerializerFunctionWrapHandler) -> Any:
        """analysis.json of a bundle without telemetry stays as it was before telemetry (a
        report made earlier verifies against it), so the field is left out, not null."""
        data = handler(self)
        if isinstance(data, dict) and data.get("telemetry", 0) is None:
            del data["telemetry"]
        return data

    @property
    def aa_check(self) -> bool | None:
        """The A/A check of the design (NoiseBand.aa_check)."""
        return self.noise_band.aa_check
