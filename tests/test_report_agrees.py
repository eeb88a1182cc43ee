"""The deliverable agrees with itself (issue 36 item 5): a bundle collected by hand, whose
plan names no method or k and whose logs name no capture mode, reads what is known."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from diagnostic.analyse.core import analyse
from diagnostic.bundle.store import Bundle
from diagnostic.logcheck.stage import FINDINGS_FILE
from diagnostic.report import capture
from diagnostic.report.build import report_context
from diagnostic.report.inputs import Inputs
from diagnostic.report.view import ReportContext
from diagnostic.schema.logfacts import CheckReport, RunSources, SourceCapture

# Recorded by `diagnose collect` and `diagnose check` against the real llama-server.
COLLECT = Path(__file__).parent / "data" / "collect" / "llamacpp-ngram-no-k"


def _cells(ctx: ReportContext) -> list[str]:
    """Every table cell and fact that names a setting: cover, chapters 1 and 2."""
    rows = [r.role for t in ctx.before_after for r in t.rows]
    rows += [r.spec for r in ctx.capture_runs]
    rows += [c for t in (ctx.spec_pairs, ctx.spec_table) if t for row in t.rows for c in row]
    return [ctx.cover.drafter or "", *rows]


@pytest.fixture(scope="module")
def collected() -> ReportContext:
    return report_context(Bundle.open(COLLECT, strict=False))


@pytest.fixture(scope="module")
def unnamed(tmp_path_factory: pytest.TempPathFactory) -> ReportContext:
    """The same bundle had its server named no method either (a server without /slots)."""
    root = tmp_path_factory.mktemp("collect") / "bundle"
    shutil.copytree(COLLECT, root)
    for run in root.glob("runs/*/run.json"):
        info = json.loads(run.read_text())
        info["server_args"].pop("speculative.types", None)
        run.write_text(json.dumps(info))
    return report_context(Bundle.open(root, strict=False))


def test_an_unknown_capture_mode_is_not_flagged_changed(collected: ReportContext) -> None:
    pairs = collected.spec_pairs
    assert pairs is not None
    assert [row[3:6] for row in pairs.rows] == [["UNKNOWN", "UNKNOWN", "unknown"]]
    assert capture.SAMENESS == {True: "same", False: "CHANGED", None: "unknown"}


def test_nodes_whose_mode_is_unknown_are_not_said_to_agree(collected: ReportContext) -> None:
    bundle = Bundle.open(COLLECT, strict=False)
    check = CheckReport.model_validate_json((COLLECT / FINDINGS_FILE).read_text())
    sources = [
        SourceCapture(source=name, path=f"{name}.log", engine="llamacpp", resolved=mode)
        for name, mode in (("head", "UNKNOWN"), ("node2", "UNKNOWN"))
    ]
    known = [s.model_copy(update={"resolved": "FULL"}) for s in sources]
    check.log_sources = [
        RunSources(run_id="ngram-r0", sources=sources),
        RunSources(run_id="baseline-r0", sources=known),
    ]
    table = capture.node_table(Inputs(analysis=analyse(bundle), bundle=bundle, check=check))
    assert table is not None
    verdicts = {row[0]: row[-1] for row in table.rows}
    assert verdicts == {"ngram-r0": "unknown", "baseline-r0": "agree"}


def test_check_says_unknown_in_words(tmp_path: Path) -> None:
    bundle = tmp_path / "bundle"
    shutil.copytree(COLLECT, bundle)  # check writes findings.json into it
    done = subprocess.run(
        [sys.executable, "-m", "diagnostic", "check", str(bundle)],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "200", "NO_COLOR": "1"},
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    row = next(line for line in done.stdout.splitlines() if "│ ngram-r0 (" in line)
    cells = [c.strip() for c in row.strip("│").split("│")]
    assert cells[-1] == "unknown" and "(method not recorded)" in cells[3], cells
    assert "│ ? " not in done.stdout and "(?)" not in done.stdout
    assert "? →" not in done.stdout


def test_what_is_known_of_the_setting_is_said(collected: ReportContext) -> None:
    """The server reported n-gram (llama.cpp's /slots); nothing recorded k."""
    cells = _cells(collected)
    assert "speculation" not in cells
    assert collected.cover.drafter == "n-gram"
    role = {r.arm: r.role for t in collected.before_after for r in t.rows}
    assert role["ngram"] == "n-gram, k not recorded"
    assert {r.spec for r in collected.capture_runs} == {"off", "n-gram, k not recorded"}
    assert collected.spec_pairs is not None and collected.spec_pairs.rows[0][1] == "n-gram"
    assert collected.summary.headline.startswith("Speculation with n-gram is")


def test_a_setting_nothing_names_says_so(unnamed: ReportContext) -> None:
    cells = _cells(unnamed)
    assert "speculation" not in cells
    assert unnamed.cover.drafter == "on (method not recorded)"
    role = {r.arm: r.role for t in unnamed.before_after for r in t.rows}
    assert role["ngram"] == "speculation on (method and k not recorded)"
    spec = {r.spec for r in unnamed.capture_runs}
    assert spec == {"off", "speculation on (method and k not recorded)"}
    assert unnamed.spec_pairs is not None and unnamed.spec_pairs.rows[0][1] == "not recorded"
