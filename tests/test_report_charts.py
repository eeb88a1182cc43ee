"""Report charts: valid, deterministic SVG whose text is escaped and stays text; axes set by
the bulk of the data, an interval beyond them marked."""

from __future__ import annotations

import base64
import math
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from diagnostic.analyse.core import analyse
from diagnostic.bundle.store import Bundle
from diagnostic.report import charts
from diagnostic.report import select as sel
from diagnostic.report.build import report_context
from diagnostic.report.charts import Bar, Point, Series, Strip

SAMPLES = Path(__file__).resolve().parent.parent / "samples"
SAMPLE_NAMES = ("vllm-h200-validation", "llamacpp-cpu-gemma3", "vllm-h200-mla")

SVG = "{http://www.w3.org/2000/svg}"
BARS = [
    Bar("code", "base", 100.0, 95.0, 105.0, baseline=True),
    Bar("code", "ngram-k3", 123.0, 115.0, 131.0),
    Bar("prose", "base", 90.0, 86.0, 94.0, baseline=True),
    Bar("prose", "ngram-k3", 89.0, None, None),  # no interval: drawn without whiskers
]
SWEEP = [
    Series(
        "code",
        [Point(0, 100, 95, 105), Point(1, 112, 108, 117), Point(3, 125, 118, 131)],
        theory=[Point(0, 100), Point(1, 113), Point(2, 121), Point(3, 126)],
    ),
    Series("prose", [Point(0, 90, 86, 94), Point(1, 95, None, None), Point(3, None)]),
]
STRIPS = [
    Strip("base", "code", [1.0, 0.97, 1.03]),
    Strip("ngram-k3", "code", [1.21, 1.25, 1.19]),
    Strip("ngram-k3", "prose", [0.99, 1.02]),
]


def _all_charts() -> dict[str, str]:
    return {
        "before_after": charts.before_after_chart(BARS),
        "sweep": charts.sweep_chart(SWEEP),
        "acceptance": charts.acceptance_chart([Series("k=3", [Point(1, 0.8), Point(2, 0.6)])]),
        "variance": charts.variance_chart(STRIPS, band=(1 / 1.02, 1.02)),
    }


def _texts(svg: str) -> list[str]:
    root = ET.fromstring(svg)
    return ["".join(t.itertext()) for t in root.iter(f"{SVG}text")]


@pytest.fixture(scope="module")
def rendered() -> dict[str, str]:
    return _all_charts()


def test_charts_are_deterministic_svg(rendered: dict[str, str]) -> None:
    again = _all_charts()
    for name, svg in rendered.items():
        assert svg == again[name], f"{name} differs between two renders"
        assert svg.lstrip().startswith("<?xml")
        ET.fromstring(svg)  # well-formed
        assert "dc:date" not in svg and "<dc:date>" not in svg  # no timestamp in metadata


def test_text_stays_text_with_the_report_font(rendered: dict[str, str]) -> None:
    texts = _texts(rendered["before_after"])
    assert {"code", "prose", "base", "ngram-k3"} <= set(texts)
    assert "DejaVu Sans" in rendered["before_after"]
    sweep = _texts(rendered["sweep"])
    assert "code measured" in sweep and "code predicted" in sweep
    assert "prose predicted" not in sweep  # no theory given for prose
    assert "margin ±δ" in _texts(rendered["variance"])


def test_markup_in_labels_is_escaped() -> None:
    hostile = '<script>alert("x")</script>&<img src=x>'
    svg = charts.before_after_chart([Bar(hostile, hostile, 1.0)])
    assert "<script>" not in svg and "<img" not in svg
    assert hostile in _texts(svg)


def test_missing_values_are_skipped_not_drawn_as_zero() -> None:
    svg = charts.sweep_chart([Series("prose", [Point(0, 90), Point(3, None), Point(4, math.nan)])])
    ET.fromstring(svg)
    assert "nan" not in svg.lower()


def test_data_uri_round_trips(rendered: dict[str, str]) -> None:
    uri = charts.data_uri(rendered["variance"])
    prefix = "data:image/svg+xml;base64,"
    assert uri.startswith(prefix)
    assert base64.b64decode(uri[len(prefix) :]).decode() == rendered["variance"]


def test_one_wide_interval_does_not_set_the_axis() -> None:
    """Speedups of the validation sample: one restart-starved interval [0.006, 1911] and one
    [0.01, 6.23] beside intervals a few tenths wide. The axis follows the bulk; the ends
    beyond it are marked, the others drawn whole."""
    values, lows, highs = (
        [1.14, 0.18, 1.55, 3.51],
        [0.79, 0.01, 0.77, 0.006],
        [1.63, 6.23, 3.12, 1911],
    )
    axis = charts.axis_range(values, lows, highs)
    assert axis.high <= charts.REACH * max(values) * 1.1
    assert axis.beyond(1911) and axis.low == 0.0  # a rate's axis stops at 0
    assert not any(axis.beyond(x) for x in (0.006, 0.01, 0.77, 0.79, 1.63, 3.12, 6.23))
    high = charts.axis_range([100.0, 120.0], [99.0, 2.0], [101.0, 121.0])
    assert high.low > 40 and high.beyond(2.0)  # an end far below is cut too
    assert axis.cuts(lows, highs) and not axis.cuts([0.79], [1.63])
    bars = [
        Bar("code", str(i), v, lo, hi)
        for i, (v, lo, hi) in enumerate(zip(values, lows, highs, strict=True))
    ]
    texts = _texts(charts.before_after_chart(bars))
    assert "1,911" in texts  # the cut end, labelled beside its arrow
    assert charts.bar_axis(BARS).cuts([b.low for b in BARS], [b.high for b in BARS]) is False


def _ticks(svg: str) -> list[float]:
    root = ET.fromstring(svg)
    ticks = [t for g in root.iter(f"{SVG}g") if g.get("id", "").startswith("ytick_")
             for t in g.iter(f"{SVG}text")]  # fmt: skip
    return [float("".join(t.itertext()).replace(",", "").replace("−", "-")) for t in ticks]


@pytest.mark.parametrize("name", SAMPLE_NAMES)
def test_sample_charts_follow_the_bulk_and_mark_what_runs_off(name: str) -> None:
    """Every chart of a sample with intervals: its axis stays within REACH of the largest
    estimate, and its caption speaks of cut intervals exactly when one is drawn cut."""
    bundle = Bundle.open(SAMPLES / name, strict=False)
    ctx = report_context(bundle)
    a = analyse(bundle)
    level = sel.levels(a)[0]
    estimates = [
        aw.decode_tps.estimate
        for arm in a.arms
        for w in sel.workloads(a)
        if (aw := sel.arm_workload(arm, w, level)) is not None and aw.decode_tps.estimate
    ]
    assert ctx.sweep is not None
    for chart in (ctx.before_after_chart, ctx.sweep.chart, ctx.summary.chart):
        assert chart is not None
        svg = base64.b64decode(chart.uri.split(",", 1)[1]).decode()
        assert max(_ticks(svg)) <= charts.REACH * max(estimates) * 1.1, (name, chart.title)
        cut = 'style="font-size: 5.5px' in svg
        assert (charts.CUT in chart.title) == cut, (name, chart.title)
    if name == "vllm-h200-validation":  # eager's [1.2, 3,540] and two more on prose
        svg = base64.b64decode(ctx.before_after_chart.uri.split(",", 1)[1]).decode()
        assert {"3,540", "11,754", "4,679"} <= set(_texts(svg))
