"""Report rendering: sections in the HTML, data escaped, a sandboxed fetcher, a PDF that reads."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

import jinja2
import pytest
from analyse_bundles import build_h200_bundle
from markupsafe import escape
from pypdf import PdfReader
from report_bundles import HOSTILE, check_report, sweep_bundle
from weasyprint import HTML

from diagnostic.analyse.core import analyse
from diagnostic.bundle.store import Bundle
from diagnostic.common.pdf import SandboxedFetcher, check_url
from diagnostic.errors import RefusedURL
from diagnostic.report import ReportContext, build_report, render_html, render_pdf
from diagnostic.report.build import report_context
from diagnostic.report.render import environment, report_templates
from diagnostic.schema.bundle import Engagement

H200_PAIR = {"base": (False, {}), "ngram3": (True, {"k": 3})}
SECTIONS = {
    "summary": "Executive summary",
    "contents": "Contents",
    "capture": "Capture and configuration evidence",
    "before-after": "Before and after",
    "sweep": "Draft-length sweep",
    "variance": "Variance across restarts",
    "equivalence": "Output equivalence and data quality",
    "failures": "Failures",
    "recommendations": "Recommendations",
    "methodology": "Methodology",
    "environment": "Environment appendix",
}


class _Tags(HTMLParser):
    """Every start tag with its attributes."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))


def _tags(html: str) -> list[tuple[str, dict[str, str | None]]]:
    parser = _Tags()
    parser.feed(html)
    return parser.tags


def _flat(text: str) -> str:
    # Whitespace collapsed; a line may break after the en dash of a range ("2.01–⏎2.40").
    return " ".join(text.split()).replace("– ", "–")


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Bundle:
    """A sweep whose outputs, errors, log lines, findings and client name carry markup."""
    bundle = sweep_bundle(tmp_path_factory.mktemp("render") / "b", ks=(1, 3), restarts=3,
                          requests=5, hostile=True)  # fmt: skip
    bundle.write_json("findings.json", check_report(bundle, hostile=True))
    return bundle


@pytest.fixture(scope="module")
def ctx(hostile: Bundle) -> ReportContext:
    return report_context(hostile, analysis=analyse(hostile), title="Review <i>{{ title }}</i>")


@pytest.fixture(scope="module")
def html(ctx: ReportContext) -> str:
    return render_html(ctx)


@pytest.fixture(scope="module")
def pdf(html: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return render_pdf(html, tmp_path_factory.mktemp("pdf") / "report.pdf")


def test_every_section_is_present_in_order(html: str) -> None:
    positions = []
    for anchor, title in SECTIONS.items():
        head = r'(<div class="chapter-head">\s*)?'  # a chapter's heading kept with its figure
        pattern = rf'id="{anchor}"[^>]*>\s*{head}(<h[23]>)?(\d+\. )?{re.escape(title)}'
        match = re.search(pattern, html)
        assert match, f"section {anchor!r} ({title}) missing"
        positions.append(match.start())
    assert positions == sorted(positions)
    for anchor in SECTIONS:  # the table of contents links every chapter
        if anchor not in ("summary", "contents", "failures"):
            assert f'href="#{anchor}"' in html


def test_summary_sentences_and_numbers_are_in_the_html(ctx: ReportContext, html: str) -> None:
    html = re.sub(r'<span class="nobr">([^<]*)</span>', r"\1", html)  # names kept on one line
    assert str(escape(ctx.summary.headline)) in html
    for line in ctx.summary.verdicts:
        assert str(escape(line.sentence)) in html
    for table in ctx.before_after:
        for row in table.rows:
            assert f'<td class="arm">{escape(row.arm)}</td>' in html
            assert f">{escape(row.decode_tps)}<" in html


def test_data_is_escaped_never_markup(html: str) -> None:
    tags = _tags(html)
    names = {t for t, _ in tags}
    assert "script" not in names and "link" not in names
    assert sum(t == "style" for t, _ in tags) == 1  # the report's own stylesheet only
    for tag, attrs in tags:
        for attr in ("src", "href"):
            value = attrs.get(attr)
            if value is not None:
                assert value.startswith(("data:image/svg+xml;base64,", "#")), (tag, value)
        assert not any(a.startswith("on") for a in attrs), (tag, attrs)
    assert str(escape(HOSTILE)) in html  # shown as text, verbatim
    assert "{{ 7*7 }}" in html  # jinja syntax in data is never evaluated
    assert "Acme &lt;b&gt;Corp&lt;/b&gt;" in html
    assert "Review &lt;i&gt;{{ title }}&lt;/i&gt;" in html


def test_environment_is_autoescaped_and_strict() -> None:
    env = environment()
    assert env.autoescape is True
    assert env.undefined is jinja2.StrictUndefined
    with pytest.raises(jinja2.UndefinedError):
        env.from_string("{{ missing }}").render()


@pytest.mark.parametrize(
    "url",
    [
        "file:///etc/passwd",
        "http://example.com/x.css",
        "https://example.com/font.woff2",
        "ftp://example.com/x",
        "file://otherhost/etc/passwd",
        "file:///nonexistent/report.css",
        "javascript:alert(1)",
    ],
)
def test_fetcher_refuses_everything_outside_the_templates(url: str) -> None:
    fetcher = SandboxedFetcher(report_templates())
    with pytest.raises(RefusedURL):
        fetcher.fetch(url)
    assert fetcher.refused == [url]


def test_fetcher_refuses_escapes_from_the_folder(tmp_path: Path) -> None:
    root = tmp_path / "templates"
    root.mkdir()
    (root / "ok.css").write_text("p { color: red }")
    secret = tmp_path / "secret.txt"
    secret.write_text("token")
    (root / "link.css").symlink_to(secret)
    check_url((root / "ok.css").as_uri(), root)
    for url in (root.as_uri() + "/../secret.txt", (root / "link.css").as_uri(), root.as_uri()):
        with pytest.raises(RefusedURL):
            check_url(url, root)


def test_fetcher_serves_data_uris_and_template_files() -> None:
    fetcher = SandboxedFetcher(report_templates())
    css = fetcher.fetch((report_templates() / "report.css").as_uri())
    assert b"@page" in css.read()
    css.close()
    data = fetcher.fetch("data:text/plain;base64,aGk=")
    assert data.read() == b"hi"
    data.close()


def test_weasyprint_never_fetches_what_markup_asks_for(tmp_path: Path) -> None:
    root = report_templates().resolve()
    fetcher = SandboxedFetcher(root)
    page = (
        '<link rel="stylesheet" href="http://attacker.invalid/x.css">'
        "<style>@import url(file:///etc/passwd);</style>"
        '<img src="file:///etc/passwd"><img src="https://attacker.invalid/pixel.png"><p>ok</p>'
    )
    pdf = HTML(string=page, base_url=root.as_uri() + "/", url_fetcher=fetcher).write_pdf()
    assert pdf is not None and pdf.startswith(b"%PDF")
    assert set(fetcher.refused) == {
        "http://attacker.invalid/x.css",
        "file:///etc/passwd",
        "https://attacker.invalid/pixel.png",
    }


def test_report_is_reproducible(hostile: Bundle, html: str, pdf: Path, tmp_path: Path) -> None:
    analysis = analyse(hostile)
    again = report_context(hostile, analysis=analysis, title="Review <i>{{ title }}</i>")
    assert render_html(again) == html  # charts, hash and wording are byte-identical
    assert render_pdf(html, tmp_path / "again.pdf").read_bytes() == pdf.read_bytes()


def test_pdf_opens_and_reads_like_the_report(ctx: ReportContext, pdf: Path) -> None:
    reader = PdfReader(pdf)
    pages = [_flat(p.extract_text()) for p in reader.pages]
    assert 8 <= len(pages) <= 30
    assert ctx.summary.answer is not None
    for line in ctx.summary.answer.lines:  # the first page tells the story
        assert _flat(line.sentence) in pages[0]
    text = " ".join(pages)
    assert _flat(ctx.summary.headline) in text  # the chapter's headline and verdict lines
    for line in ctx.summary.verdicts:
        assert _flat(line.sentence) in text
    assert f"Page 1 of {len(pages)}" in pages[0]
    assert "Acme <b>Corp</b>" in pages[1]  # running header on later pages, as text
    assert "<script>alert" in text  # hostile text printed, not interpreted


def test_build_report_writes_html_and_pdf(hostile: Bundle, tmp_path: Path) -> None:
    out = build_report(
        hostile.path, tmp_path / "r.html", "html", engagement=Engagement(client="Client X")
    )
    page = out.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and "Client X" in page
    assert "capture resolved to PIECEWISE under speculation" in page  # from findings.json


def test_real_h200_bundle_renders_with_real_log_evidence(tmp_path: Path) -> None:
    bundle = build_h200_bundle(tmp_path / "h200", H200_PAIR)
    out = build_report(
        bundle.path, tmp_path / "h200.html", "html", engagement=Engagement(client="ACME")
    )
    page = out.read_text(encoding="utf-8")
    assert (bundle.path / "findings.json").is_file()  # check ran on the real server logs
    assert "vLLM fell back to another model runner" in page  # a real finding
    log = (bundle.run_file("ngram3", 0, "server.log")).read_text(encoding="utf-8").splitlines()
    fallback = next(i for i, line in enumerate(log, 1) if "Model Runner V2 does not" in line)
    assert f'<span class="ln">{fallback}:</span>' in page  # quoted with its line number
    assert "within-process only; restart variance not measured" in page


def test_capture_chapter_shows_every_node_and_worker(tmp_path: Path) -> None:
    # The n-gram run gets a second node whose log is the run without speculation: one server
    # whose nodes were launched differently. The chapter's table names both, marked.
    bundle = build_h200_bundle(tmp_path / "h200", H200_PAIR)
    run = bundle.find_run("ngram3", 0)
    assert run is not None
    node2 = (bundle.run_file("base", 0, "server.log")).read_bytes()
    bundle.write_log("ngram3", 0, "node2", node2)
    sources = {"server": "server.log", "node2": "logs/node2.log"}
    bundle.write_run(run.model_copy(update={"sources": sources}))
    page = build_report(bundle.path, tmp_path / "r.html", "html").read_text(encoding="utf-8")
    assert '<h3 id="nodes">Nodes and workers</h3>' in page
    table = page[page.index('id="nodes"') : page.index('id="runs"')].replace("<wbr>", "")
    rows = [re.findall(r"<td[^>]*>([^<]*)</td>", r) for r in table.split("<tr>")[2:]]
    assert [(r[0], r[1], r[4], r[5]) for r in rows] == [
        ("base-r0", "server", "off", "agree"),
        ("ngram3-r0", "server", "ngram k=3", "DIFFERS"),
        ("ngram3-r0", "node2", "off", "DIFFERS"),
    ]
    assert all(r[2].startswith("EngineCore pid=") and r[3] == "FULL_AND_PIECEWISE" for r in rows)
    assert '<td class="bad">DIFFERS</td>' in table
    assert "Nodes of one server ran differently" in page  # the nodes-disagree finding
