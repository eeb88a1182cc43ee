"""`diagnose report --format json`: analysis.json from a real bundle, and clear errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from analyse_bundles import build_h200_bundle
from click.testing import CliRunner

from diagnostic.cli import main
from diagnostic.cli._common import RichReporter
from diagnostic.schema.analysis import ANALYSIS_SCHEMA_VERSION, Analysis

ARMS = {"base": (False, {}), "ngram3": (True, {"k": 3})}


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("cli") / "bundle"
    build_h200_bundle(path, ARMS)
    return path


def test_json_defaults_to_bundle_analysis_json(bundle: Path) -> None:
    result = CliRunner().invoke(main, ["report", str(bundle), "--format", "json"])
    assert result.exit_code == 0, result.output
    data = json.loads((bundle / "analysis.json").read_text())
    analysis = Analysis.model_validate(data)
    (headline,) = [c for c in analysis.comparisons if c.workload == "all"]
    assert (headline.arm, headline.baseline, headline.verdict) == ("ngram3", "base", "WITHHELD")
    assert headline.within_process_only and headline.withheld  # one restart each: no verdict
    assert "analysis.json" in result.output


def test_out_file_with_client_and_title(bundle: Path, tmp_path: Path) -> None:
    out = tmp_path / "a.json"
    args = ["report", str(bundle), "-o", str(out), "--client", "ACME", "--title", "Spec check"]
    result = CliRunner().invoke(main, args)  # format inferred from the .json suffix
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())
    assert (data["client"], data["title"]) == ("ACME", "Spec check")
    assert data["schema_version"] == ANALYSIS_SCHEMA_VERSION
    assert [a["id"] for a in data["arms"]] == ["base", "ngram3"]


@pytest.mark.parametrize("fmt", ["pdf", "html"])
def test_pdf_and_html_are_written(bundle: Path, fmt: str, tmp_path: Path, bars: list[str]) -> None:
    out = tmp_path / f"r.{fmt}"
    result = CliRunner().invoke(main, ["report", str(bundle), "-o", str(out), "--client", "ACME"])
    assert result.exit_code == 0, result.output
    assert bars == ["bars"]  # what the error tests below look for
    head = out.read_bytes()[:5]
    assert head == b"%PDF-" if fmt == "pdf" else b"<!DOC" in head.upper() or b"<html" in head


def test_missing_bundle_is_a_one_line_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["report", str(tmp_path / "nope"), "--format", "json"])
    assert result.exit_code == 2
    flat = " ".join(result.output.split())  # rich wraps long lines
    assert "no such bundle folder" in flat and "Traceback" not in result.output


@pytest.fixture
def bars(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Records each start of report's progress display."""
    started: list[str] = []
    enter = RichReporter.__enter__

    def record(self: RichReporter) -> RichReporter:
        started.append("bars")
        return enter(self)

    monkeypatch.setattr(RichReporter, "__enter__", record)
    return started


@pytest.mark.parametrize("fmt", ["pdf", "json"])
def test_missing_bundle_fails_before_any_progress_bar(
    tmp_path: Path, fmt: str, bars: list[str]
) -> None:
    result = CliRunner().invoke(main, ["report", str(tmp_path / "nope"), "-o", f"r.{fmt}"])
    assert result.exit_code == 2 and "no such bundle folder" in result.output
    assert not bars


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-o", "report.docx"], "report.docx: the name says no format (.docx); end -o with .pdf, "),
        (["-o", "report"], "report: the name says no format (.?)"),
        (["--format", "pdf", "-o", "r.html"], "r.html: the name says html but --format is pdf"),
        (["--format", "json", "-o", "tables/"], "tables/: the name says csv but --format is json"),
    ],
)
def test_an_output_naming_no_or_another_format_is_refused(
    bundle: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    args: list[str],
    message: str,
    bars: list[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["report", str(bundle), *args])
    assert not list(tmp_path.iterdir())  # nothing written
    flat = " ".join(result.output.split())
    assert result.exit_code == 2 and message in flat, flat
    assert ".pdf, .html, .json or .csv, or name a folder/" in flat
    assert not bars


def test_the_format_follows_the_output_name(bundle: Path, tmp_path: Path) -> None:
    tables = tmp_path / "tables"
    tables.mkdir()
    result = CliRunner().invoke(main, ["report", str(bundle), "-o", str(tables)])
    assert result.exit_code == 0, result.output  # an existing folder: the CSV tables
    assert sorted(p.name for p in tables.iterdir()) == [
        "comparisons.csv",
        "requests.csv",
        "restarts.csv",
    ]
    fresh = f"{tmp_path / 'new'}/"  # a folder to make, said by its trailing slash
    result = CliRunner().invoke(main, ["report", str(bundle), "-o", fresh])
    assert result.exit_code == 0 and (tmp_path / "new" / "requests.csv").is_file()
    named = tmp_path / "a.txt"  # a name saying no format, with --format: as asked
    result = CliRunner().invoke(main, ["report", str(bundle), "-o", str(named), "--format", "json"])
    assert (
        result.exit_code == 0
        and json.loads(named.read_text())["schema_version"] == ANALYSIS_SCHEMA_VERSION
    )


@pytest.mark.parametrize("fmt", ["pdf", "json", "csv"])
def test_an_unwritable_output_fails_first_naming_it(
    bundle: Path, tmp_path: Path, fmt: str, bars: list[str]
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    dest = blocker / f"report.{fmt}"  # under a file: no one, root included, can write there
    result = CliRunner().invoke(main, ["report", str(bundle), "-o", str(dest)])
    flat = " ".join(result.output.split())
    assert result.exit_code == 2, flat
    assert f"{dest}: cannot be written, {blocker} is a file, not a folder" in flat
    assert ".tmp" not in flat and not bars


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="a kernel file system: Linux only")
def test_an_output_where_no_file_can_be_made_fails_first(bundle: Path, bars: list[str]) -> None:
    result = CliRunner().invoke(main, ["report", str(bundle), "-o", "/proc/report.pdf"])
    flat = " ".join(result.output.split())
    assert result.exit_code == 2 and "/proc/report.pdf: cannot be written (" in flat
    assert not bars


def test_the_old_out_spelling_still_works(bundle: Path, tmp_path: Path) -> None:
    out = tmp_path / "a.json"
    result = CliRunner().invoke(main, ["report", str(bundle), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert json.loads(out.read_text())["schema_version"] == ANALYSIS_SCHEMA_VERSION


def _all_failed(path: Path, *, run_status: str) -> Path:
    """The H200 bundle as collect leaves it against a web server that is no inference server:
    every request answered with an HTML error page (run.json failed, or left ok by hand)."""
    bundle = build_h200_bundle(path, ARMS)
    page = "HTTP 404: <html><head><title>Error response</title></head></html>"
    for run in bundle.runs():
        records = bundle.read_requests(run.arm, run.restart).records
        failed = [
            r.model_copy(
                update={
                    "error": page,
                    "ttft_s": None,
                    "e2e_s": None,
                    "chunk_times_s": [],
                    "chunk_tokens": None,
                    "completion_tokens": None,
                    "text": "",
                }
            )
            for r in records
        ]
        bundle.run_file(run.arm, run.restart, "requests.jsonl").write_text(
            "".join(r.model_dump_json() + "\n" for r in failed)
        )
        bundle.write_run(run.model_copy(update={"status": run_status}))
    return path


@pytest.mark.parametrize("run_status", ["failed", "ok"])
def test_a_bundle_whose_requests_all_failed_says_so_first_and_exits_3(
    tmp_path: Path, run_status: str
) -> None:
    """Never 'nothing to compare' alone: page 1 opens with the alarm naming the failures and
    the server's answer; the report is written and the exit code is 3 (said in --help)."""
    bundle = _all_failed(tmp_path / "b", run_status=run_status)
    out = tmp_path / "r.html"
    result = CliRunner().invoke(main, ["report", str(bundle), "-o", str(out)])
    assert result.exit_code == 3, result.output
    assert "none of its measured requests can be used (60 failed)" in result.output
    page = out.read_text(encoding="utf-8")
    summary = page[page.index('<section class="summary"') :]
    box = summary.index('<div class="unmeasured"><div class="label">Nothing was measured</div>')
    assert box < summary.index('class="headline"')
    assert "Every one of the 60 measured requests failed (2 server runs of 2 arms)" in page
    assert "HTTP 404: &lt;html&gt;&lt;head&gt;&lt;title&gt;Error response" in page  # escaped
    assert "What this bundle cannot answer" not in page
    json_out = CliRunner().invoke(main, ["report", str(bundle), "-o", str(tmp_path / "a.json")])
    assert json_out.exit_code == 3 and (tmp_path / "a.json").is_file()
    assert "Exit code: 0 written" in CliRunner().invoke(main, ["report", "--help"]).output
