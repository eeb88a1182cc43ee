"""Analysis + check report + bundle → ReportContext: every section as formatted text."""

from __future__ import annotations

from diagnostic import __version__, defaults
from diagnostic.report import advice, answer, capture, quality, sections, summary, telemetry
from diagnostic.report.inputs import Inputs
from diagnostic.report.view import FindingView, ReportContext, Summary

__all__ = ["Inputs", "build_context"]


def build_context(inputs: Inputs) -> ReportContext:
    """Every section of the report as formatted text and SVG charts."""
    a, setting = inputs.analysis, inputs.setting
    day = inputs.day
    problems = capture.problems(inputs)
    recommendations = advice.recommendations(a, problems, inputs.describe, day)
    return ReportContext(
        cover=summary.cover(inputs),
        tool_version=__version__,
        margin=f"{a.noise_band.delta:.1%}",
        min_restarts=defaults.MIN_RESTARTS,
        summary=_summary(inputs, [r.text for r in recommendations], problems).model_copy(
            update={"telemetry_line": telemetry.page_one_line(a)}
        ),
        capture_runs=capture.capture_runs(inputs),
        capture_note=capture.capture_note(inputs),
        spec_pairs=capture.spec_pairs(inputs),
        spec_table=capture.spec_table(inputs),
        node_table=capture.node_table(inputs),
        findings=capture.findings(inputs),
        glance=sections.glance(a, setting=setting),
        before_after=sections.before_after(a, setting=setting, day=day),
        before_after_chart=sections.before_after_chart(a),
        sweep=sections.sweep(a),
        variance=quality.variance(a, day),
        telemetry=telemetry.telemetry_view(a, inputs.bundle, inputs.runs),
        equivalence=quality.equivalence(a),
        failures=quality.failures(inputs.bundle, inputs.runs),
        recommendations=recommendations,
        methodology=advice.methodology(a, inputs.bundle.manifest, day),
        environment=advice.environment(a, inputs.bundle, inputs.runs, inputs.signature),
        engine_args=advice.engine_args(inputs.bundle.manifest, inputs.runs),
        checklist=advice.checklist(inputs.bundle),
    )


def _summary(inputs: Inputs, actions: list[str], problems: list[FindingView]) -> Summary:
    """Page 1: the answer box first, with its log line only when the root-cause box does not
    quote it already."""
    found = answer.answer(inputs, problems)
    shown = summary.summary(inputs, actions)
    if found is not None and found.quote is not None:
        quoted = {c.quote.text for c in shown.root_causes if c.quote is not None}
        found = found.model_copy(update={"why_on_page1": found.quote.text not in quoted})
    return shown.model_copy(update={"answer": found})
