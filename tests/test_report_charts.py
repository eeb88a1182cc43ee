"""Report charts: valid, deterministic SVG whose text is escaped and stays text."""

from __future__ import annotations

import base64
import math
import xml.etree.ElementTree as ET

import pytest

from diagnostic.report import charts
from diagnostic.report.charts import Bar, Point, Series, Strip

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
