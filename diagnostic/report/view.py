"""ReportContext: every value the report templates lay out, already formatted as text."""

from __future__ import annotations

from pydantic import Field

from diagnostic.report.telemetry_view import TelemetryView
from diagnostic.report.view_base import Chart
from diagnostic.report.view_base import View as _View

__all__ = [
    "ArmRow",
    "CaptureRun",
    "Chart",
    "ChecklistRow",
    "ComparisonTable",
    "Cover",
    "DivergentPrompt",
    "EquivalenceRow",
    "EquivalenceView",
    "Evidence",
    "FailureRow",
    "FailuresView",
    "FindingView",
    "Flag",
    "Glance",
    "GlanceCell",
    "GlanceRow",
    "KeyValue",
    "Methodology",
    "Profile",
    "Recommendation",
    "ReportContext",
    "RestartRow",
    "Summary",
    "SweepRow",
    "SweepTable",
    "SweepView",
    "VarianceView",
    "VerdictLine",
    "WorkloadTable",
]


class KeyValue(_View):
    """A labelled value (cover facts, environment rows, definitions)."""

    key: str = Field(description="Label")
    value: str = Field(description="Formatted value; 'not measured' when missing")


class Evidence(_View):
    """One quoted log line with its line number."""

    line: str = Field(description="Line number in the log, or '' when unknown")
    text: str = Field(description="The line, verbatim (escaped by the template)")


class Cover(_View):
    """First-page facts; a fact the bundle did not record is None and left off the page."""

    title: str = Field(description="Report title")
    client: str | None = Field(None, description="Client organisation")
    site: str | None = Field(None, description="Site or cluster")
    date: str = Field(description="Engagement date (bundle creation)")
    consultant: str | None = Field(None, description="Consultant")
    engine: str | None = Field(None, description="Engine and version")
    model: str | None = Field(None, description="Model served, as the bundle recorded it")
    drafter: str | None = Field(None, description="Speculation method and drafter")
    hardware: str | None = Field(None, description="GPU or CPU of the server")


class VerdictLine(_View):
    """One verdict sentence of the executive summary."""

    workload: str = Field(description="Workload")
    verdict: str = Field(description="WIN, LOSS, EQUIVALENT, INCONCLUSIVE or NONE (CSS class)")
    sentence: str = Field(description="The sentence")


class Profile(_View):
    """Recommended serving profile of one workload."""

    workload: str = Field(description="Workload")
    profile: str = Field(description="What to serve it with")
    reason: str = Field(description="The measurement behind it")


class Cause(_View):
    """A problem found in the logs, for the first page, with the log line that shows it."""

    text: str = Field(description="What went wrong, and in which arms")
    quote: Evidence | None = Field(None, description="The most telling log line, when quoted")


class AnswerLine(_View):
    """One workload's answer: as found → after, one ratio, its range, a plain word."""

    workload: str = Field(description="Workload")
    verdict: str = Field(description="Badge class: the analysis' verdict, WITHHELD or NONE")
    word: str = Field(description="The verdict in the client's words ('faster', 'not decided')")
    sentence: str = Field(description="The answer in one sentence, tok/s and ratio with range")


class Answer(_View):
    """Page 1's answer box: the before-and-after, or what page 1 compares instead."""

    label: str = Field("The answer: as found → after the fix", description="The box's title")
    head: str = Field(description="What is compared: as found and after, or why not")
    lines: list[AnswerLine] = Field(description="One per workload")
    note: str = Field("", description="What a range means, in plain words")
    why: str = Field("", description="The finding on the as-found arm that says why; '' if none")
    quote: Evidence | None = Field(None, description="Its telling log line")
    why_on_page1: bool = Field(
        False, description="Page 1 shows why and the line too (the root-cause box does not)"
    )


class Summary(_View):
    """Executive summary."""

    headline: str = Field(
        description="One sentence for the engineering lead; '' when the before-and-after box "
        "already says it (its 'after' is the headline's arm)"
    )
    verdicts: list[VerdictLine] = Field(description="One line per workload")
    losses: list[str] = Field(description="Speculative settings measured slower, per workload")
    missing: str = Field("", description="What the bundle lacks to answer the question at all")
    unmeasured: str = Field("", description="Page 1's alarm: no measured request can be used")
    root_causes: list[Cause] = Field(
        description="Problems of check that explain or bear on the headline; empty when none"
    )
    root_cause_label: str = Field("Root cause found in the server logs", description="Box title")
    root_cause_note: str = Field(description="Sentence shown above or instead of the causes")
    degenerate: str = Field("", description="Why acceptance is not representative; '' if it is")
    profiles: list[Profile] = Field(description="Recommended serving profiles")
    chart: Chart | None = Field(None, description="Baseline vs recommended, per workload")
    warning: str = Field(
        "", description="The caveat every verdict carries (a failed A/A check); '' if none"
    )
    caveats: list[str] = Field(description="Short caveats (one restart, uncalibrated δ)")
    actions: list[str] = Field(description="The first recommendations, for the first page")
    more_actions: int = Field(description="Recommendations beyond those listed")
    telemetry_line: str = Field(
        "", description="Restart noise with a visible cause (a labelled sensitivity); '' if none"
    )
    answer: Answer | None = Field(
        None, description="Page 1's answer: as found → after, or the best setting vs none"
    )


class CaptureRun(_View):
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


class FindingView(_View):
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


class ComparisonTable(_View):
    """Rows of facts side by side (spec vs no spec)."""

    headers: list[str] = Field(description="Column headers")
    rows: list[list[str]] = Field(description="Rows of cells")


class GlanceCell(_View):
    """One arm on one workload in the at-a-glance matrix."""

    ratio: str = Field(description="Speedup, e.g. '1.23×'")
    verdict: str = Field(description="Verdict word (CSS class), or '—'")


class GlanceRow(_View):
    """One arm across workloads."""

    arm: str = Field(description="Arm")
    setting: str = Field(description="What the arm runs")
    cells: list[GlanceCell] = Field(description="One per workload, in header order")


class Glance(_View):
    """Every arm against the baseline on every workload, one cell each."""

    workloads: list[str] = Field(description="Column headers")
    rows: list[GlanceRow] = Field(description="One per non-baseline arm")


class ArmRow(_View):
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


class WorkloadTable(_View):
    """Before/after table of one workload at one concurrency level."""

    title: str = Field(description="Workload (and concurrency)")
    anchor: str = Field(description="HTML id")
    rows: list[ArmRow] = Field(description="Baseline first")
    footnote: str = Field(description="Caveat shared by the rows marked †; '' when none")


class SweepRow(_View):
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


class SweepTable(_View):
    """The sweep of one workload."""

    title: str = Field(description="Workload (and concurrency)")
    rows: list[SweepRow] = Field(description="k = 0 first")
    best_k: str = Field(description="Sentence naming the best k")
    theory: str = Field(description="Theory fit in words")


class SweepView(_View):
    """Draft-length sweep section."""

    tables: list[SweepTable] = Field(description="Per workload")
    chart: Chart | None = Field(None, description="tok/s vs k, measured and predicted")
    acceptance_chart: Chart | None = Field(None, description="Per-position acceptance")
    note: str = Field(description="Text shown above the tables")


class RestartRow(_View):
    """Restart means of one arm on one workload."""

    arm: str = Field(description="Arm")
    workload: str = Field(description="Workload")
    restarts: str = Field(description="Restart means, in restart order")
    cv_between: str = Field(description="CV of the restart means, prompt effects removed")
    cv_within: str = Field(description="Within-restart CV on one prompt")
    restart_share: str = Field(description="Share of variance from restarts")
    advice: str = Field(description="Planning advice")


class VarianceView(_View):
    """Variance section."""

    chart: Chart | None = Field(None, description="Per-restart strip plot with the A/A band")
    band: str = Field(description="Noise band in words")
    rows: list[RestartRow] = Field(description="Per arm and workload")


class DivergentPrompt(_View):
    """A prompt whose greedy output differs from the baseline's, alike in every arm named."""

    arms: str = Field(description="Arms whose output differs from the baseline's this same way")
    workload: str = Field(description="Workload")
    prompt_id: str = Field(description="Prompt id")
    position: str = Field(description="First differing character")
    baseline: str = Field(description="Baseline excerpt (escaped by the template)")
    arm: str = Field(description="Arm excerpt (escaped by the template)")


class EquivalenceRow(_View):
    """Greedy output equivalence of one arm."""

    arm: str = Field(description="Arm")
    identical: str = Field(description="n identical of N prompts")
    rate: str = Field(description="Share identical")


class Flag(_View):
    """A warm-up drift or outlier flag."""

    kind: str = Field(description="drift or outlier")
    where: str = Field(description="arm / restart / workload")
    detail: str = Field(description="What was seen")


class TimingRow(_View):
    """The client's decode throughput against the engine's own clock, one arm."""

    arm: str = Field(description="Arm")
    runs: str = Field(description="Runs with engine timing")
    client: str = Field(description="Client decode tok/s, mean over runs")
    engine: str = Field(description="Engine decode tok/s, mean over runs")
    ratio: str = Field(description="Client / engine, lowest–highest run")
    tokens: str = Field(description="Whether token counts agree")


class EquivalenceView(_View):
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


class FailureRow(_View):
    """Failed requests or runs with one reason."""

    where: str = Field(description="Arm / restart")
    count: str = Field(description="How many")
    reason: str = Field(description="Why (escaped by the template)")


class FailuresView(_View):
    """Failures summary."""

    summary: str = Field(description="One sentence")
    rows: list[FailureRow] = Field(description="Failed runs and requests")


class ChecklistRow(_View):
    """One checklist item and its state."""

    item: str = Field(description="List and item text")
    status: str = Field(description="done, not done, not applicable, not evaluated")
    status_class: str = Field(description="done, not_done, not_applicable or none (CSS)")
    evidence: str = Field(description="What the automatic check found, who ticked it, the note")


class Recommendation(_View):
    """One numbered recommendation with the evidence behind it."""

    text: str = Field(description="What to do")
    evidence: str = Field(description="The measurement or finding behind it")


class Methodology(_View):
    """Definitions, statistics and limitations."""

    definitions: list[KeyValue] = Field(description="Terms")
    statistics: list[KeyValue] = Field(description="How each number was computed")
    noise_band: str = Field(description="δ and its source")
    multiplicity: str = Field(description="How several comparisons are controlled")
    plan: list[KeyValue] = Field(description="What was planned")
    limitations: list[str] = Field(description="What the measurement cannot say")


class ReportContext(_View):
    """Everything the templates render; every string is final text."""

    cover: Cover = Field(description="Cover facts")
    tool_version: str = Field(description="diagnose version rendering the report")
    margin: str = Field("2.0%", description="The plan's margin δ, e.g. '2.0%'")
    min_restarts: int = Field(description="Restarts a side needs for a verdict")
    summary: Summary = Field(description="Executive summary")
    capture_runs: list[CaptureRun] = Field(description="Per-run capture evidence")
    capture_note: str = Field(description="Text when no log evidence exists")
    spec_pairs: ComparisonTable | None = Field(None, description="check's spec/no-spec pairs")
    spec_table: ComparisonTable | None = Field(None, description="Spec vs no spec facts")
    node_table: ComparisonTable | None = Field(
        None, description="Capture per node and worker, when a run has several"
    )
    findings: list[FindingView] = Field(description="check findings")
    glance: Glance | None = Field(None, description="All verdicts in one matrix")
    before_after: list[WorkloadTable] = Field(description="Per workload")
    before_after_chart: Chart | None = Field(None, description="All arms per workload")
    sweep: SweepView | None = Field(None, description="None when the bundle has no sweep")
    variance: VarianceView = Field(description="Variance section")
    telemetry: TelemetryView | None = Field(
        None, description="GPU and host telemetry; None when no run recorded any"
    )
    equivalence: EquivalenceView = Field(description="Output equivalence and flags")
    failures: FailuresView = Field(description="Failures summary")
    recommendations: list[Recommendation] = Field(description="Numbered recommendations")
    methodology: Methodology = Field(description="Method section")
    environment: list[KeyValue] = Field(description="Environment appendix")
    engine_args: list[KeyValue] = Field(description="Launch command or server args per arm")
    checklist: list[ChecklistRow] = Field(description="Checklist state; empty when absent")
