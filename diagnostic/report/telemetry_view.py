"""View models of the report's telemetry chapter: every string final text."""

from __future__ import annotations

from pydantic import Field

from diagnostic.report.view_base import Chart
from diagnostic.report.view_base import View as _View

__all__ = [
    "CauseRow",
    "OutlierRow",
    "TelemetryView",
    "VarianceRow",
    "WindowRow",
]


class OutlierRow(_View):
    """A restart whose mean is a Tukey outlier, beside its telemetry."""

    run: str = Field(description="<arm>-r<restart>")
    workload: str = Field(description="Workload")
    tps: str = Field(description="Its mean against the other restarts' median")
    evidence: str = Field(description="Telemetry against the other restarts")
    causes: str = Field(description="Causes the rules found, or 'none found'")


class CauseRow(_View):
    """A rule that matched a run's window."""

    run: str = Field(description="<arm>-r<restart>")
    window: str = Field(description="Workload window")
    cause: str = Field(description="Rule title")
    evidence: str = Field(description="Figures that matched")
    advice: str = Field(description="What to do")


class VarianceRow(_View):
    """Association of restart means with one telemetry variable."""

    workload: str = Field(description="Workload")
    variable: str = Field(description="Source and variable")
    restarts: str = Field(description="Restarts the association is over")
    r: str = Field(description="Correlation")
    share: str = Field(description="r² as a percentage")
    reads: str = Field(description="A condition of the run, or follows the decode rate")


class WindowRow(_View):
    """One run's headline telemetry over its measured requests."""

    run: str = Field(description="<arm>-r<restart>")
    window: str = Field(description="Workload window")
    figures: str = Field(description="Medians (worst) of the main variables")


class TelemetryView(_View):
    """The telemetry chapter; None in the context when no run recorded telemetry."""

    chart: Chart | None = Field(None, description="SM clock and power per run")
    outliers: list[OutlierRow] = Field(default_factory=list, description="Outlier restarts")
    causes: list[CauseRow] = Field(default_factory=list, description="Causes found")
    variance: list[VarianceRow] = Field(default_factory=list, description="Associations")
    windows: list[WindowRow] = Field(default_factory=list, description="Per run and window")
    absent: list[str] = Field(default_factory=list, description="Sources that gave nothing")
