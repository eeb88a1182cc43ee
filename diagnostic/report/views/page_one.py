"""View models of the cover and page 1: every value the templates lay out, final text."""

from __future__ import annotations

from pydantic import Field

from diagnostic.report.views.base import Chart, Evidence, View

__all__ = [
    "Answer",
    "AnswerLine",
    "Cause",
    "Cover",
    "Profile",
    "Summary",
    "VerdictLine",
]


class Cover(View):
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


class VerdictLine(View):
    """One verdict sentence of the executive summary."""

    workload: str = Field(description="Workload")
    verdict: str = Field(description="WIN, LOSS, EQUIVALENT, INCONCLUSIVE or NONE (CSS class)")
    sentence: str = Field(description="The sentence")


class Profile(View):
    """Recommended serving profile of one workload."""

    workload: str = Field(description="Workload")
    profile: str = Field(description="What to serve it with")
    reason: str = Field(description="The measurement behind it")


class Cause(View):
    """A problem found in the logs, for the first page, with the log line that shows it."""

    text: str = Field(description="What went wrong, and in which arms")
    quote: Evidence | None = Field(None, description="The most telling log line, when quoted")


class AnswerLine(View):
    """One workload's answer: as found → after, one ratio, its range, a plain word."""

    workload: str = Field(description="Workload")
    verdict: str = Field(description="Badge class: the analysis' verdict, WITHHELD or NONE")
    word: str = Field(description="The verdict in the client's words ('faster', 'not decided')")
    sentence: str = Field(description="The answer in one sentence, tok/s and ratio with range")


class Answer(View):
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


class Summary(View):
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
