"""ReportContext, everything the templates lay out, and build_context, which makes it from the
analysis, check's report and the bundle: every page and chapter as formatted text and SVG
charts."""

from __future__ import annotations

from pydantic import Field

from diagnostic import __version__, defaults
from diagnostic.report import page_one, toc
from diagnostic.report.chapters import (
    before_after,
    capture,
    environment,
    equivalence,
    methodology,
    recommendations,
    sweep,
    telemetry,
    variance,
)
from diagnostic.report.inputs import Inputs
from diagnostic.report.page_one.cover import cover
from diagnostic.report.views.base import Chart, KeyValue, View
from diagnostic.report.views.chapters import (
    CaptureRun,
    ChecklistRow,
    ComparisonTable,
    EquivalenceView,
    FailuresView,
    FindingView,
    Glance,
    Methodology,
    Recommendation,
    SweepView,
    TelemetryView,
    VarianceView,
    WorkloadTable,
)
from diagnostic.report.views.page_one import Cover, Summary

__all__ = ["ReportContext", "build_context"]


class ReportContext(View):
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


def build_context(inputs: Inputs) -> ReportContext:
    """Every page and chapter of the report as formatted text and SVG charts."""
    a, setting, day = inputs.analysis, inputs.setting, inputs.day
    bundle, runs = inputs.bundle, inputs.runs
    problems = capture.problems(inputs)
    recs = recommendations.recommendations(a, problems, inputs.describe, day)
    return ReportContext(
        cover=cover(inputs),
        tool_version=__version__,
        margin=f"{a.noise_band.delta:.1%}",
        min_restarts=defaults.MIN_RESTARTS,
        summary=page_one.summary(inputs, [r.text for r in recs], problems),
        capture_runs=capture.capture_runs(inputs),
        capture_note=capture.capture_note(inputs),
        spec_pairs=capture.spec_pairs(inputs),
        spec_table=capture.spec_table(inputs),
        node_table=capture.node_table(inputs),
        findings=capture.findings(inputs),
        glance=toc.glance(a, setting=setting),
        before_after=before_after.before_after(a, setting=setting, day=day),
        before_after_chart=before_after.before_after_chart(a),
        sweep=sweep.sweep(a),
        variance=variance.variance(a, day),
        telemetry=telemetry.telemetry_view(a, bundle, runs),
        equivalence=equivalence.equivalence(a),
        failures=equivalence.failures(bundle, runs),
        recommendations=recs,
        methodology=methodology.methodology(a, bundle.manifest, day),
        environment=environment.environment(a, bundle, runs, inputs.signature),
        engine_args=environment.engine_args(bundle.manifest, runs),
        checklist=environment.checklist(bundle),
    )
