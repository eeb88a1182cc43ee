"""`diagnose report --format json`: analysis.json from a real bundle, and clear errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from analyse_bundles import build_h200_bundle
from click.testing import CliRunner

from diagnostic.cli import main
from diagnostic.schema.analysis import Analysis

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
    assert (headline.arm, headline.baseline, headline.verdict) == ("ngram3", "base", "INCONCLUSIVE")
    assert headline.within_process_only and headline.withheld  # one restart each: no verdict
    assert "analysis.json" in result.output


def test_out_file_with_client_and_title(bundle: Path, tmp_path: Path) -> None:
    out = tmp_path / "a.json"
    args = ["report", str(bundle), "-o", str(out), "--client", "ACME", "--title", "Spec check"]
    result = CliRunner().invoke(main, args)  # format inferred from the .json suffix
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())
    assert (data["client"], data["title"]) == ("ACME", "Spec check")
    assert data["schema_version"] == 2
    assert [a["id"] for a in data["arms"]] == ["base", "ngram3"]


@pytest.mark.parametrize("fmt", ["pdf", "html"])
def test_pdf_and_html_are_written(bundle: Path, fmt: str, tmp_path: Path) -> None:
    out = tmp_path / f"r.{fmt}"
    result = CliRunner().invoke(main, ["report", str(bundle), "-o", str(out), "--client", "ACME"])
    assert result.exit_code == 0, result.output
    head = out.read_bytes()[:5]
    assert head == b"%PDF-" if fmt == "pdf" else b"<!DOC" in head.upper() or b"<html" in head


def test_missing_bundle_is_a_one_line_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["report", str(tmp_path / "nope"), "--format", "json"])
    assert result.exit_code == 2
    flat = " ".join(result.output.split())  # rich wraps long lines
    assert "no such bundle folder" in flat and "Traceback" not in result.output
