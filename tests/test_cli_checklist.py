"""`diagnose checklist` through click: table, ticks and notes in a bundle, exports, errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from checklist_bundles import GOOD_ARMS, make_bundle
from click.testing import CliRunner
from pypdf import PdfReader

from diagnostic.cli import main


def _run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["checklist", *args], env={"COLUMNS": "200"})
    assert "Traceback" not in result.output
    return result.exit_code, result.output


@pytest.fixture
def bundle(tmp_path: Path) -> Path:
    return make_bundle(tmp_path / "b", arms=GOOD_ARMS[:2], restarts=1).path


def test_help_has_an_example() -> None:
    code, out = _run("--help")
    assert code == 0 and "Example" in out and "diagnose checklist" in out
    for option in ("--list", "--tick", "--note", "--format", "-o"):
        assert option in out


def test_without_a_bundle_the_list_is_printed() -> None:
    code, out = _run()
    assert code == 0
    assert "On site: the diagnostic day" in out and "os-startup-log" in out and "auto" in out


def test_with_a_bundle_items_are_evaluated(bundle: Path) -> None:
    code, out = _run(str(bundle))
    assert code == 0
    assert "engine version in all 2 runs: vllm 0.26.0" in out  # automatic evidence
    assert "no spec-on run" in out and "not done" in out
    assert "not applicable" in out  # single-GPU runs: the worker-log item
    assert "done, " in out.splitlines()[-1] and "of 24 items" in out.splitlines()[-1]


def test_tick_and_note_are_stored_in_the_bundle(bundle: Path) -> None:
    code, out = _run(str(bundle), "--tick", "os-gpu-idle", "--note", "os-gpu-idle", "no co-tenants")
    assert code == 0 and "no co-tenants" in out
    state = json.loads((bundle / "checklist.json").read_text())
    assert state["schema_version"] == 1
    assert state["lists"]["onsite"]["os-gpu-idle"]["ticked"] is True
    code, out = _run(str(bundle))  # still there on the next call
    assert "ticked by hand at" in out and "no co-tenants" in out
    code, _ = _run(str(bundle), "--untick", "os-gpu-idle")
    assert (
        json.loads((bundle / "checklist.json").read_text())["lists"]["onsite"]["os-gpu-idle"][
            "ticked"
        ]
        is False
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--tick", "os-gpu-idle"], "stored in a bundle"),
        (["--list", "nope"], "available: pre-visit, onsite, deliverable"),
        (["--format", "pdf"], "add -o FILE.pdf"),
        (["-o", "x.md"], "-o needs --format md or pdf"),
        (["/nonexistent/bundle"], "no such bundle folder"),
    ],
)
def test_user_errors_are_one_line(args: list[str], message: str) -> None:
    code, out = _run(*args)
    assert code == 2 and "Error:" in out and message in " ".join(out.split())


def test_automatic_items_cannot_be_ticked(bundle: Path) -> None:
    code, out = _run(str(bundle), "--tick", "os-restarts")
    assert code == 2 and "checked automatically" in out
    assert not (bundle / "checklist.json").exists()


def test_pre_visit_as_markdown_on_stdout() -> None:
    code, out = _run("--list", "pre-visit", "--format", "md")
    assert code == 0 and out.startswith("# Before the visit") and "(`pv-metrics`)" in out


def test_exports_to_files(tmp_path: Path, bundle: Path) -> None:
    md = tmp_path / "onsite.md"
    code, _ = _run(str(bundle), "--format", "md", "-o", str(md))
    assert code == 0 and "*Status:* not done — no spec-on run" in md.read_text()
    pdf = tmp_path / "pre-visit.pdf"
    code, out = _run("--list", "pre-visit", "--format", "pdf", "-o", str(pdf))
    assert code == 0 and "Wrote" in out
    assert "pv-access" in PdfReader(str(pdf)).pages[0].extract_text()


def test_an_unwritable_output_fails_before_the_ticks_are_stored(
    tmp_path: Path, bundle: Path
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    dest = blocker / "onsite.pdf"
    code, out = _run(str(bundle), "--tick", "os-gpu-idle", "--format", "pdf", "-o", str(dest))
    assert code == 2 and f"{dest}: cannot be written" in " ".join(out.split())
    assert not (bundle / "checklist.json").exists()
