"""The report's telemetry chapter (issue 30): chart, outlier table with causes, associations,
page 1's labelled sensitivity line; a bundle without telemetry renders without any of it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from analyse_bundles import synthetic_bundle
from pypdf import PdfReader
from test_telemetry_analysis import POWER_CAP, add_telemetry, gpu_rows, host_rows, restarts

from diagnostic.bundle.store import Bundle
from diagnostic.report import build_report, render_html
from diagnostic.report.build import report_context


@pytest.fixture
def throttled(tmp_path: Path) -> Bundle:
    bundle = synthetic_bundle(
        tmp_path / "b",
        {
            "base": restarts([100, 101, 99, 100.5, 70]),
            "spec": restarts([120, 121, 119, 120.5, 119.5]),
        },
    )
    for arm in ("base", "spec"):
        for r in range(5):
            slow = arm == "base" and r == 4
            rows = gpu_rows(1410.0 if slow else 1980.0, reasons=POWER_CAP, capped=0.64 * slow)
            add_telemetry(bundle, arm, r, "nvml", rows)
            add_telemetry(bundle, arm, r, "host", host_rows(30.0))
    return bundle


def test_chapter_shows_chart_outliers_causes_and_associations(throttled: Bundle) -> None:
    ctx = report_context(throttled)
    assert ctx.telemetry is not None and ctx.telemetry.chart is not None
    html = render_html(ctx)
    assert 'id="telemetry"' in html and "GPU and host telemetry" in html
    assert "SM clock (MHz) 1,410 median vs 1,980 in the other restarts" in html
    assert "GPU held at its power cap" in html
    assert "association, not cause" in html
    line = ctx.summary.telemetry_line
    assert line.startswith("Restart noise with a visible cause (sensitivity only; no restart")
    assert re.search(r"base-r4 on code ran at 70\.\d tok/s against 100\.\d in its other ", line)
    assert "(SM clock lower than in the other restarts, GPU held at its power cap)" in line
    assert re.search(r"restart-to-restart variation 1\d\.\d% with it, 0\.\d% without it", line)


def test_page_one_says_so_in_the_pdf(throttled: Bundle, tmp_path: Path) -> None:
    out = build_report(throttled.path, tmp_path / "r.pdf")
    first = PdfReader(str(out)).pages[0].extract_text()
    assert "Telemetry:" in first and "visible cause" in first


def test_a_bundle_without_telemetry_has_no_chapter_and_no_line(tmp_path: Path) -> None:
    bundle = synthetic_bundle(tmp_path / "b", {"base": restarts([100, 101, 99, 100.5, 70])})
    ctx = report_context(bundle)
    assert ctx.telemetry is None and ctx.summary.telemetry_line == ""
    html = render_html(ctx)
    assert "telemetry" not in html.lower()


def test_associations_say_which_variables_follow_the_decode_rate() -> None:
    """On the recorded H200 sweep (NVML and host telemetry of 15 runs) the strongest
    associations are GPU utilisation and power, which rise with the decode rate itself: the
    table says so beside each, and names the conditions of the run apart."""
    sample = Path(__file__).resolve().parents[1] / "samples" / "vllm-h200-mla-remedy"
    view = report_context(Bundle.open(sample)).telemetry
    assert view is not None and view.variance
    reads = {v.variable: v.reads for v in view.variance}
    assert reads["nvml.utilization_pct"] == reads["nvml.power_w"] == "follows the decode rate"
    assert reads["host.other_cpu_pct"] == "condition of the run"
    assert {v.reads for v in view.variance} == {"follows the decode rate", "condition of the run"}
