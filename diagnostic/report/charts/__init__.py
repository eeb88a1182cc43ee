"""The report's charts: matplotlib figures rendered to deterministic SVG strings, one module per
chart (the look they share in `style.py`, their value axis in `axis.py`)."""

from diagnostic.report.charts.axis import CUT, REACH, AxisRange, axis_range
from diagnostic.report.charts.before_after import Bar, bar_axis, before_after_chart
from diagnostic.report.charts.style import GREY, data_uri, palette
from diagnostic.report.charts.sweep import Point, Series, acceptance_chart, sweep_axis, sweep_chart
from diagnostic.report.charts.telemetry import Panel, telemetry_chart
from diagnostic.report.charts.variance import Strip, variance_chart

__all__ = [
    "CUT",
    "GREY",
    "REACH",
    "AxisRange",
    "Bar",
    "Panel",
    "Point",
    "Series",
    "Strip",
    "acceptance_chart",
    "axis_range",
    "bar_axis",
    "before_after_chart",
    "data_uri",
    "palette",
    "sweep_axis",
    "sweep_chart",
    "telemetry_chart",
    "variance_chart",
]
