"""View models of the contents' glance table and the chapters: every value the templates lay
out, final text."""

from __future__ import annotations

from pydantic import Field

from diagnostic.report.views.base import Chart, Evidence, KeyValue, View

__all__ = [
    "ArmRow",
    "CaptureRun",
    "CauseRow",
    "ChecklistRow",
    "ComparisonTable",
    "DivergentPrompt",
    "EquivalenceRow",
    "EquivalenceView",
    "FailureRow",
    "FailuresView",
    "FindingView",
    "Flag",
    "Glance",
    "GlanceCell",
    "GlanceRow",
    "Methodology",
    "OutlierRow",
    "Recommendation",
    "RestartRow",
    "SweepRow",
    "SweepTable",
    "SweepView",
    "TelemetryView",
    "TimingRow",
    "VarianceRow",
    "VarianceView",
    "WindowRow",
    "WorkloadTable",
]


# -- chapter 1, capture and configuration evidence --------------------------------------------
class CaptureRun(View):
    """Configuration evidence of one server process."""

    run: str = Field(description="Run folder, e.g. ngram-k3-r0")
    engine: str = Field(description="Engine and version")
    spec: str = Field(description="Speculation method and k, or 'off'")
    configured: str = Field(description="Capture mode configured")
    resolved: str = Field(description="Capture mode resolved")
    resolved_class: str = Field(description="ok, bad or muted (CSS)")
    reason: str = Field(description="Why check resolved that mode; '' when not given")
    runner: str = Field(description="Model runner (vLLM V1/V2), or '—'")
    attention: str = Field(description="Attention backend, or '—'")
    evidence: list[Evidence] = Field(description="Quoted log lines")


class FindingView(View):
    """One finding of check."""

    severity: str = Field(description="Severity word (CSS class)")
    rule: str = Field(description="Rule id")
    title: str = Field(description="Rule title; '' when none")
    message: str = Field(description="What was found")
    where: str = Field(description="Runs the finding is about; '' for none")
    arms: str = Field(description="Arms of those runs; '' for none")
    arm_ids: list[str] = Field(default_factory=list, description="The same arms, one by one")
    evidence: list[Evidence] = Field(description="Quoted lines")
    advice: str = Field(description="What to do")
    measured: list[str] = Field(
        default_factory=list,
        description="Per workload, the finding's arm beside the arm with its fix, when measured",
    )


class ComparisonTable(View):
    """Rows of facts side by side (spec vs no spec)."""

    headers: list[str] = Field(description="Column headers")
    rows: list[list[str]] = Field(description="Rows of cells")


# -- the contents' glance table ---------------------------------------------------------------
class GlanceCell(View):
    """One arm on one workload in the at-a-glance matrix."""

    ratio: str = Field(description="Speedup, e.g. '1.23×'")
    verdict: str = Field(description="Verdict word (CSS class), or '—'")


class GlanceRow(View):
    """One arm across workloads."""

    arm: str = Field(description="Arm")
    setting: str = Field(description="What the arm runs")
    cells: list[GlanceCell] = Field(description="One per workload, in header order")


class Glance(View):
    """Every arm against the baseline on every workload, one cell each."""

    workloads: list[str] = Field(description="Column headers")
    rows: list[GlanceRow] = Field(description="One per non-baseline arm")


# -- chapter 2, before and after --------------------------------------------------------------
class ArmRow(View):
    """One arm on one workload in the before/after table."""

    arm: str = Field(description="Arm name")
    role: str = Field(description="baseline, A/A, or the speculation setting")
    decode_tps: str = Field(description="Decode tok/s estimate")
    decode_ci: str = Field(description="Its 95% interval 'low–high'; '' when not computed")
    ratio: str = Field(description="Speedup, or '—' for the baseline")
    ratio_ci: str = Field(description="Its 95% interval 'low–high'; '' when not computed")
    verdict: str = Field(description="Verdict word or BASELINE (CSS class)")
    n: str = Field(description="requests × restarts")
    ttft: str = Field(description="Median TTFT")
    tokens_per_chunk: str = Field(description="Mean tokens per streamed chunk")
    acceptance: str = Field(description="Mean acceptance length")
    note: str = Field(description="Footnote mark ('†') or a caveat of this row; '' when none")


class WorkloadTable(View):
    """Before/after table of one workload at one concurrency level."""

    title: str = Field(description="Workload (and concurrency)")
    anchor: str = Field(description="HTML id")
    rows: list[ArmRow] = Field(description="Baseline first")
    footnote: str = Field(description="Caveat shared by the rows marked †; '' when none")


# -- chapter 3, the draft-length sweep --------------------------------------------------------
class SweepRow(View):
    """One k of the sweep."""

    k: str = Field(description="Draft tokens")
    arm: str = Field(description="Arm")
    decode_tps: str = Field(description="Decode tok/s estimate")
    decode_ci: str = Field(description="Its 95% interval; '' when not computed")
    ratio: str = Field(description="Speedup")
    ratio_ci: str = Field(description="Its 95% interval; '' when not computed")
    verdict: str = Field(description="Verdict word (CSS class)")
    acceptance: str = Field(description="Measured acceptance length τ_k")
    rho: str = Field(description="Measured step cost ratio")
    predicted: str = Field(description="Predicted speedup")


class SweepTable(View):
    """The sweep of one workload."""

    title: str = Field(description="Workload (and concurrency)")
    rows: list[SweepRow] = Field(description="k = 0 first")
    best_k: str = Field(description="Sentence naming the best k")
    theory: str = Field(description="Theory fit in words")


class SweepView(View):
    """Draft-length sweep section."""

    tables: list[SweepTable] = Field(description="Per workload")
    chart: Chart | None = Field(None, description="tok/s vs k, measured and predicted")
    acceptance_chart: Chart | None = Field(None, description="Per-position acceptance")
    note: str = Field(description="Text shown above the tables")


# -- chapter 4, variance across restarts ------------------------------------------------------
class RestartRow(View):
    """Restart means of one arm on one workload."""

    arm: str = Field(description="Arm")
    workload: str = Field(description="Workload")
    restarts: str = Field(description="Restart means, in restart order")
    cv_between: str = Field(description="CV of the restart means, prompt effects removed")
    cv_within: str = Field(description="Within-restart CV on one prompt")
    restart_share: str = Field(description="Share of variance from restarts")
    advice: str = Field(description="Planning advice")


class VarianceView(View):
    """Variance section."""

    chart: Chart | None = Field(None, description="Per-restart strip plot with the A/A band")
    band: str = Field(description="Noise band in words")
    rows: list[RestartRow] = Field(description="Per arm and workload")


# -- GPU and host telemetry -------------------------------------------------------------------
class OutlierRow(View):
    """A restart whose mean is a Tukey outlier, beside its telemetry."""

    run: str = Field(description="<arm>-r<restart>")
    workload: str = Field(description="Workload")
    tps: str = Field(description="Its mean against the other restarts' median")
    evidence: str = Field(description="Telemetry against the other restarts")
    causes: str = Field(description="Causes the rules found, or 'none found'")


class CauseRow(View):
    """A rule that matched a run's window."""

    run: str = Field(description="<arm>-r<restart>")
    window: str = Field(description="Workload window")
    cause: str = Field(description="Rule title")
    evidence: str = Field(description="Figures that matched")
    advice: str = Field(description="What to do")


class VarianceRow(View):
    """Association of restart means with one telemetry variable."""

    workload: str = Field(description="Workload")
    variable: str = Field(description="Source and variable")
    restarts: str = Field(description="Restarts the association is over")
    r: str = Field(description="Correlation")
    share: str = Field(description="r² as a percentage")
    reads: str = Field(description="A condition of the run, or follows the decode rate")


class WindowRow(View):
    """One run's headline telemetry over its measured requests."""

    run: str = Field(description="<arm>-r<restart>")
    window: str = Field(description="Workload window")
    figures: str = Field(description="Medians (worst) of the main variables")


class TelemetryView(View):
    """The telemetry chapter; None in the context when no run recorded telemetry."""

    chart: Chart | None = Field(None, description="SM clock and power per run")
    outliers: list[OutlierRow] = Field(default_factory=list, description="Outlier restarts")
    causes: list[CauseRow] = Field(default_factory=list, description="Causes found")
    variance: list[VarianceRow] = Field(default_factory=list, description="Associations")
    windows: list[WindowRow] = Field(default_factory=list, description="Per run and window")
    absent: list[str] = Field(default_factory=list, description="Sources that gave nothing")


# -- output equivalence and data quality ------------------------------------------------------
class DivergentPrompt(View):
    """A prompt whose greedy output differs from the baseline's, alike in every arm named."""

    arms: str = Field(description="Arms whose output differs from the baseline's this same way")
    workload: str = Field(description="Workload")
    prompt_id: str = Field(description="Prompt id")
    position: str = Field(description="First differing character")
    baseline: str = Field(description="Baseline excerpt (escaped by the template)")
    arm: str = Field(description="Arm excerpt (escaped by the template)")


class EquivalenceRow(View):
    """Greedy output equivalence of one arm."""

    arm: str = Field(description="Arm")
    identical: str = Field(description="n identical of N prompts")
    rate: str = Field(description="Share identical")


class Flag(View):
    """A warm-up drift or outlier flag."""

    kind: str = Field(description="drift or outlier")
    where: str = Field(description="arm / restart / workload")
    detail: str = Field(description="What was seen")


class TimingRow(View):
    """The client's decode throughput against the engine's own clock, one arm."""

    arm: str = Field(description="Arm")
    runs: str = Field(description="Runs with engine timing")
    client: str = Field(description="Client decode tok/s, mean over runs")
    engine: str = Field(description="Engine decode tok/s, mean over runs")
    ratio: str = Field(description="Client / engine, lowest–highest run")
    tokens: str = Field(description="Whether token counts agree")


class EquivalenceView(View):
    """Output equivalence and data-quality flags."""

    note: str = Field(description="Text above the table")
    rows: list[EquivalenceRow] = Field(description="Per arm")
    divergent: list[DivergentPrompt] = Field(
        default_factory=list, description="The first differing prompts, identical diffs once"
    )
    more_divergent: int = Field(0, description="Differing prompts beyond those shown")
    flags: list[Flag] = Field(description="Drift and outlier flags")
    exclusions: list[KeyValue] = Field(description="Excluded requests by reason")
    timing_note: str = Field(description="Text above the engine-timing table")
    timing: list[TimingRow] = Field(description="Client vs engine decode throughput per arm")


class FailureRow(View):
    """Failed requests or runs with one reason."""

    where: str = Field(description="Arm / restart")
    count: str = Field(description="How many")
    reason: str = Field(description="Why (escaped by the template)")


class FailuresView(View):
    """Failures summary."""

    summary: str = Field(description="One sentence")
    rows: list[FailureRow] = Field(description="Failed runs and requests")


# -- recommendations, methodology, the environment appendix -----------------------------------
class Recommendation(View):
    """One numbered recommendation with the evidence behind it."""

    text: str = Field(description="What to do")
    evidence: str = Field(description="The measurement or finding behind it")


class CovariateRow(View):
    """One comparison's raw and covariate-adjusted estimate."""

    comparison: str = Field(description="Arm vs reference, workload, concurrency")
    raw: str = Field(description="Ratio (interval) verdict from the raw restart means")
    adjusted: str = Field(description="... from the adjusted ones")
    used: str = Field(description="Which one the report's verdicts use: raw or adjusted")


class Methodology(View):
    """Definitions, statistics and limitations."""

    definitions: list[KeyValue] = Field(description="Terms")
    statistics: list[KeyValue] = Field(description="How each number was computed")
    noise_band: str = Field(description="δ and its source")
    multiplicity: str = Field(description="How several comparisons are controlled")
    covariate: list[KeyValue] = Field(
        default_factory=list, description="The covariate adjustment; empty without a covariate"
    )
    covariate_rows: list[CovariateRow] = Field(
        default_factory=list, description="Every comparison raw and adjusted"
    )
    plan: list[KeyValue] = Field(description="What was planned")
    limitations: list[str] = Field(description="What the measurement cannot say")


class ChecklistRow(View):
    """One checklist item and its state."""

    item: str = Field(description="List and item text")
    status: str = Field(description="done, not done, not applicable, not evaluated")
    status_class: str = Field(description="done, not_done, not_applicable or none (CSS)")
    evidence: str = Field(description="What the automatic check found, who ticked it, the note")
