"""Page 1, the executive summary, one module per box: nothing measured (`unmeasured.py`) or
nothing to compare (`missing.py`), the answer (`answer.py`), the root cause (`why.py`), the
serving profiles and their chart (`profiles.py`), the telemetry line (`telemetry.py`) and the
caveats (`caveats.py`); the cover above it (`cover.py`). `summary` puts them together."""

from __future__ import annotations

from diagnostic.report import select as sel
from diagnostic.report.chapters.verdicts import headline, losses, verdict_line
from diagnostic.report.inputs import Inputs
from diagnostic.report.page_one import profiles
from diagnostic.report.page_one.answer import answer
from diagnostic.report.page_one.caveats import caveats, design_warning
from diagnostic.report.page_one.missing import missing
from diagnostic.report.page_one.telemetry import telemetry_line
from diagnostic.report.page_one.unmeasured import unmeasured
from diagnostic.report.page_one.why import degenerate, root_causes
from diagnostic.report.views.chapters import FindingView
from diagnostic.report.views.page_one import Summary

__all__ = ["summary"]


def summary(
    inputs: Inputs, actions: list[str], problems: list[FindingView], shown: int = 2
) -> Summary:
    """Page 1: the answer box first, then the root cause of check's `problems`, the serving
    profiles, the caveats and the first `shown` recommendations (`actions`); with the headline
    and verdict lines chapter 2 opens with. The answer's log line is on page 1 only when the
    root-cause box does not quote it already."""
    a, describe = inputs.analysis, inputs.describe
    causes, label, note = root_causes(inputs, problems)
    found = answer(inputs, problems)
    if found is not None and found.quote is not None:
        quoted = {c.quote.text for c in causes if c.quote is not None}
        found = found.model_copy(update={"why_on_page1": found.quote.text not in quoted})
    alarm = unmeasured(inputs)  # then what the bundle lacks is beside the point
    return Summary(
        headline=headline(a, describe),
        verdicts=[verdict_line(a, w, describe, inputs.day) for w in sel.workloads(a)],
        losses=losses(a, describe),
        missing="" if alarm else missing(a),
        unmeasured=alarm,
        root_causes=causes,
        root_cause_label=label,
        root_cause_note=note,
        degenerate=degenerate(inputs),
        profiles=[profiles.profile(a, w, describe) for w in sel.workloads(a)],
        chart=profiles.chart(a),
        warning=design_warning(inputs),
        caveats=caveats(inputs),
        actions=actions[:shown],
        more_actions=max(0, len(actions) - shown),
        telemetry_line=telemetry_line(a),
        answer=found,
    )
