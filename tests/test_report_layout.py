"""The rendered PDFs of the three samples, read back as text: the layout defects of issue 23
(joined cells, split names, a heading alone at a page's foot) stay fixed; charts have a
colour per arm, legends without duplicates and captions that promise only what is drawn."""

from __future__ import annotations

import base64
import re
from pathlib import Path

import pytest
from pypdf import PdfReader

from diagnostic.bundle.store import Bundle
from diagnostic.report import charts
from diagnostic.report.build import build_report, report_context
from diagnostic.report.render import keep_names
from diagnostic.report.view import Chart

SAMPLES = Path(__file__).resolve().parent.parent / "samples"
NAMES = (
    "llamacpp-cpu-gemma3",
    "llamacpp-cpu-adaptive",
    "vllm-h200-mla",
    "vllm-h200-validation",
    "vllm-h200-gemma3",
)
_FOOTER = re.compile(r"^Page \d+ of \d+$|^diagnose \S+$")


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[str]]:
    """Each sample's PDF (about 20 s each), page by page as pypdf extracts the text."""
    out = tmp_path_factory.mktemp("pdf")
    texts = {}
    for name in NAMES:
        pdf = build_report(SAMPLES / name, out / f"{name}.pdf")
        texts[name] = [page.extract_text() for page in PdfReader(pdf).pages]
    return texts


def _arms(name: str) -> list[str]:
    return [a.name for a in Bundle.open(SAMPLES / name, strict=False).manifest.plan.arms]


@pytest.mark.parametrize("name", NAMES)
def test_no_joined_cells_or_split_names(pages: dict[str, list[str]], name: str) -> None:
    text = "\n".join(pages[name])
    assert "measurednot" not in text and "recordednot" not in text
    assert re.search(r"tok/\s*\n\s*s\b", text) is None  # "Decode tok/ s"
    for arm in _arms(name):
        parts = arm.split("-")
        for i in range(1, len(parts)):  # "baseline- aa": an arm broken at one of its hyphens
            broken = (
                r"\b"
                + re.escape("-".join(parts[:i]))
                + r"-\s*\n\s*"
                + re.escape("-".join(parts[i:]))
            )
            assert re.search(broken, text) is None, (name, arm)


@pytest.mark.parametrize("name", NAMES)
def test_no_heading_alone_at_a_page_foot(pages: dict[str, list[str]], name: str) -> None:
    headings = re.compile(r"^(\d+\. [A-Z][\w ,/-]+|Workload: \w+|Findings|Per server process)$")
    for number, page in enumerate(pages[name], start=1):
        lines = [x.strip() for x in page.splitlines() if x.strip()]
        body = [x for x in lines if not _FOOTER.match(x)]
        assert body, (name, number)
        assert not headings.match(body[-1]), (name, number, body[-1])


def test_palette_has_a_colour_per_arm() -> None:
    for n in range(1, 41):
        colours = charts.palette(n)
        assert len(set(colours)) == n and charts.GREY not in colours, n


def _svg(chart: Chart | None) -> str:
    assert chart is not None
    return base64.b64decode(chart.uri.split(",", 1)[1]).decode("utf-8")


def test_charts_colour_every_arm_apart_and_legends_say_each_name_once() -> None:
    cpu = report_context(Bundle.open(SAMPLES / NAMES[0], strict=False))
    fills = re.findall(r"fill: ?(#[0-9a-f]{6})", _svg(cpu.before_after_chart))
    bars = [c for c in dict.fromkeys(fills) if c not in ("#ffffff", charts.GREY)]
    assert len(set(bars)) >= len(_arms(NAMES[0])) - 1  # every arm but the grey baseline
    for name in NAMES:  # two arms at k=3 (two backends; eager and not) are named, not "k=3"
        ctx = report_context(Bundle.open(SAMPLES / name, strict=False))
        if ctx.sweep is not None and ctx.sweep.acceptance_chart is not None:
            legend = re.findall(r">([^<>]+)</text>", _svg(ctx.sweep.acceptance_chart))
            named = [t.strip() for t in legend if t.strip().startswith("k=")]
            assert len(named) == len(set(named)), (name, named)


def test_sweep_caption_promises_dashed_lines_only_when_drawn() -> None:
    for name in NAMES:
        ctx = report_context(Bundle.open(SAMPLES / name, strict=False))
        assert ctx.sweep is not None and ctx.sweep.chart is not None
        drawn = "stroke-dasharray" in _svg(ctx.sweep.chart)
        assert ("dashed" in ctx.sweep.chart.title) == drawn, name


def test_names_stay_whole_and_escaped() -> None:
    out = str(keep_names('fa-ngram-k3 <script>x-y</script> --spec-ngram-simple-size-m "a"'))
    assert '<span class="nobr">fa-ngram-k3</span>' in out
    assert "<script>" not in out and "&lt;script&gt;" in out
    assert "--spec-ngram-simple-size-m" in out and "&#34;a&#34;" in out  # flags left as they are
