"""The rendered PDFs of the samples, read back as text and as WeasyPrint's laid-out boxes:
the layout defects of issues 23 and 36 (joined cells, split names and words, a cell's text
under the next cell, a heading alone at a page's foot) stay fixed; charts have a colour per
arm, legends without duplicates and captions that promise only what is drawn."""

from __future__ import annotations

import base64
import io
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pypdf import PdfReader
from report_bundles import check_report, sweep_bundle

from diagnostic.bundle.store import Bundle
from diagnostic.common.pdf import SandboxedFetcher
from diagnostic.logcheck.stage import FINDINGS_FILE
from diagnostic.report import charts
from diagnostic.report.build import build_report, report_context
from diagnostic.report.render import breakable, keep_names, report_templates
from diagnostic.report.views.base import Chart

SAMPLES = Path(__file__).resolve().parent.parent / "samples"
NAMES = (
    "llamacpp-cpu-gemma3",
    "llamacpp-cpu-adaptive",
    "vllm-h200-mla",
    "vllm-h200-mla-remedy",
    "vllm-h200-validation",
    "vllm-h200-gemma3",
    "vllm-h200-gemma3-noise",
    "sglang-h200-gemma3",
    "vllm-cpu-0.32",
)
# A bundle collected by hand (tests/data/collect/README.md): its capture table printed
# "CHANG/ED" and "measure/d" in columns too narrow for them.
COLLECTED = Path(__file__).parent / "data" / "collect" / "llamacpp-ngram-no-k"
# A synthetic sweep over six workloads (the glance table's columns) whose capture changed.
WIDE = "six-workloads"
_FOOTER = re.compile(r"^Page \d+ of \d+$|^diagnose \S+$")
# Words of badges, verdicts and cells that narrow columns broke ('CHANG/ED', 'measure/d').
BADGE_WORDS = ("WIN", "LOSS", "INCONCLUSIVE", "EQUIVALENT", "WITHHELD", "BASELINE", "CHANGED",
               "DIFFERS", "unknown", "measured", "recorded", "speculation")  # fmt: skip


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Each report laid out once by WeasyPrint (a few seconds each): its Document."""
    from weasyprint import HTML

    out = tmp_path_factory.mktemp("pdf")
    bundles = {name: SAMPLES / name for name in NAMES} | {COLLECTED.name: COLLECTED}
    wide = sweep_bundle(
        out / WIDE, ks=(1, 3), workloads=("code", "prose", "qa", "rag", "math", "summary")
    )
    (wide.path / FINDINGS_FILE).write_text(check_report(wide).model_dump_json())  # CHANGED
    bundles[WIDE] = wide.path
    root = report_templates()
    docs = {}
    for name, path in bundles.items():
        html = build_report(path, out / f"{name}.html", "html").read_text()
        fetcher = SandboxedFetcher(root)
        docs[name] = HTML(string=html, base_url=root.as_uri() + "/", url_fetcher=fetcher).render()
    return docs


@pytest.fixture(scope="module")
def pages(rendered: dict[str, Any]) -> dict[str, list[str]]:
    """Each report's PDF, page by page as pypdf extracts the text."""
    texts = {}
    for name, doc in rendered.items():
        reader = PdfReader(io.BytesIO(doc.write_pdf()))
        texts[name] = [page.extract_text() for page in reader.pages]
    return texts


def _arms(name: str) -> list[str]:
    return [a.name for a in Bundle.open(SAMPLES / name, strict=False).manifest.plan.arms]


@pytest.mark.parametrize("name", [*NAMES, COLLECTED.name, WIDE])
def test_every_badge_word_appears_whole(pages: dict[str, list[str]], name: str) -> None:
    """No badge or cell word is broken over two lines ('CHANG' then 'ED') in the text."""
    text = "\n".join(pages[name])
    for word in BADGE_WORDS:
        for i in range(1, len(word)):
            broken = rf"(?<![A-Za-z]){word[:i]}[ \t]*\n\s*{word[i:]}(?![A-Za-z])"
            assert re.search(broken, text) is None, (name, word[:i], word[i:])


def _cells(box: Any, cell: Any = None) -> Iterator[tuple[Any, Any]]:
    """(text or badge box, the table cell holding it) of a laid-out page, depth first."""
    from weasyprint.formatting_structure import boxes

    if isinstance(box, boxes.TableCellBox):
        cell = box
    if cell is not None and isinstance(box, (boxes.TextBox, boxes.InlineBlockBox)):
        yield box, cell
    for child in getattr(box, "children", []):
        yield from _cells(child, cell)


@pytest.mark.parametrize("name", [*NAMES, COLLECTED.name, WIDE])
def test_no_word_breaks_and_no_cell_runs_into_the_next(rendered: dict[str, Any], name: str) -> None:
    """Laid out, no text may break inside a word (a line breaks at a space, after a hyphen or
    at a path's <wbr>: the CSS allows no other break), and no text or badge reaches past its
    cell: nothing lies under the next one."""
    from weasyprint.formatting_structure import boxes

    past: list[tuple[int, str, float]] = []  # every text past its cell, not only the first
    for number, page in enumerate(rendered[name].pages, start=1):
        root = page._page_box
        for text in (b for b in root.descendants() if isinstance(b, boxes.TextBox)):
            style = (text.style["overflow_wrap"], text.style["word_break"], text.style["hyphens"])
            assert style == ("normal", "normal", "manual"), (name, number, text.text, style)
        for box, cell in _cells(root):
            left = cell.border_box_x()
            right, end = left + cell.border_width(), box.position_x + box.margin_width()
            if not (box.position_x >= left - 0.5 and end <= right + 0.5):
                past.append((number, getattr(box, "text", "badge"), round(end - right, 1)))
    assert not past, (name, past)


def test_paths_break_at_separators_and_words_never() -> None:
    out = str(breakable("/srv/.cache/models/gemma-3-270m-q4_k_m.gguf CHANGED <b>"))
    assert out.startswith("/<wbr>srv/.<wbr>cache/<wbr>models/<wbr>gemma-")
    home = str(breakable("/home/alice/models/m.gguf and /root/m"))  # a home folder is ~
    assert home == "~/<wbr>models/<wbr>m.gguf and ~/<wbr>m"
    assert " CHANGED &lt;b&gt;" in out  # a word stays whole, markup stays text
    assert str(breakable("FULL_AND_PIECEWISE")) == "FULL_<wbr>AND_<wbr>PIECEWISE"
    hashed = str(breakable("k=3 " + "f" * 45))  # a hash: every 20 characters
    assert hashed == "k=3 " + "<wbr>".join(["f" * 20, "f" * 20, "f" * 5])


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
    swept = 0
    for name in NAMES:
        ctx = report_context(Bundle.open(SAMPLES / name, strict=False))
        if name in ("vllm-h200-mla-remedy", "vllm-h200-gemma3-noise"):  # one k, or none
            assert ctx.sweep is None
            continue
        assert ctx.sweep is not None and ctx.sweep.chart is not None
        swept += 1
        drawn = "stroke-dasharray" in _svg(ctx.sweep.chart)
        assert ("dashed" in ctx.sweep.chart.title) == drawn, name
    assert swept == len(NAMES) - 2


def test_names_stay_whole_and_escaped() -> None:
    out = str(keep_names('fa-ngram-k3 <script>x-y</script> --spec-ngram-simple-size-m "a"'))
    assert '<span class="nobr">fa-ngram-k3</span>' in out
    assert "<script>" not in out and "&lt;script&gt;" in out
    assert "--spec-ngram-simple-size-m" in out and "&#34;a&#34;" in out  # flags left as they are


# Page 1 speaks the client's language: the statistics' words live in the method chapter and
# docs/statistics.md's glossary. Matched as words, case-sensitive where a word is an acronym.
PAGE_ONE_BANNED = re.compile(
    r"\bCV\b|Pocock|[Mm]oderat|confidence distribution|[Ss]imultaneous|\bleans\b|"
    r"p-value|Welch|Bonferroni|\bdf\b|\bt interval"
)
_HOME_DIR = re.compile(r"/home/[^/\s]+/|/root/|/Users/[^/\s]+/")


@pytest.mark.parametrize("name", NAMES)
def test_page_one_is_one_page_in_plain_words(pages: dict[str, list[str]], name: str) -> None:
    """Page 1 holds the whole executive summary (page 2 opens with the contents), leads with
    the answer, names no statistic and prints no folder of the recording machine."""
    first, second = pages[name][0], pages[name][1]
    body = [x.strip() for x in second.splitlines() if x.strip() and not _FOOTER.match(x.strip())]
    assert "Contents" in body[:4], (name, body[:4])
    assert re.search(r"THE ANSWER|RESTART NOISE", first.upper()), name
    assert PAGE_ONE_BANNED.search(first) is None, (name, PAGE_ONE_BANNED.search(first))
    assert _HOME_DIR.search(first) is None, (name, _HOME_DIR.search(first))


@pytest.mark.parametrize("name", NAMES)
def test_no_home_directory_anywhere_in_the_report(pages: dict[str, list[str]], name: str) -> None:
    text = "\n".join(pages[name])
    assert _HOME_DIR.search(text) is None, (name, _HOME_DIR.search(text))
