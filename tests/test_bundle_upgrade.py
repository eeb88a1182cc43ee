"""Bundle formats v1 and v2 -> v3: the recorded samples open, check and report as before."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from diagnostic.analyse.core import analyse
from diagnostic.bundle.store import Bundle
from diagnostic.bundle.upgrade import upgrade_to_2
from diagnostic.logcheck.stage import FINDINGS_FILE, check_paths
from diagnostic.schema.bundle import SCHEMA_VERSION

SAMPLES = Path(__file__).resolve().parent.parent / "samples"
NAMES = ["llamacpp-cpu-gemma3", "vllm-h200-mla", "vllm-h200-validation"]
NEW_IN_V2 = {"run_id", "source", "log_sources", "schema_version"}


def _copy(name: str, tmp_path: Path) -> Path:
    copy = tmp_path / name
    shutil.copytree(SAMPLES / name, copy)
    return copy


def _as_v2(bundle: Path) -> None:
    """Rewrite a v1 bundle the way v2 writes it: logs/server.log, sources in run.json."""
    for run_json in sorted((bundle / "runs").glob("*/run.json")):
        data = json.loads(run_json.read_text())
        assert data["schema_version"] == 1
        (run_json.parent / "logs").mkdir()
        (run_json.parent / "server.log").rename(run_json.parent / "logs" / "server.log")
        data.update(schema_version=2, logs=["logs/server.log"])
        data["sources"] = {"server": "logs/server.log"}
        run_json.write_text(json.dumps(data))
    manifest = bundle / "manifest.json"
    manifest.write_text(json.dumps({**json.loads(manifest.read_text()), "schema_version": 2}))


def _plain(value: Any, root: Path, label: str) -> Any:
    """JSON without the fields v2 added, paths made relative to the sample folder."""
    if isinstance(value, dict):
        return {k: _plain(v, root, label) for k, v in value.items() if k not in NEW_IN_V2}
    if isinstance(value, list):
        return [_plain(v, root, label) for v in value]
    if isinstance(value, str):
        return value.replace(str(root), label).replace("/logs/server.log", "/server.log")
    return value


def _verdicts(report: Any) -> Any:
    runs = [(r["label"], r["capture"]["resolved"]) for r in report["runs"]]
    return runs, [(f["rule"], f["severity"], f["run"]) for f in report["findings"]]


def _check(bundle: Path, label: str) -> Any:
    return _plain(check_paths([bundle]).model_dump(mode="json"), bundle, label)


@pytest.mark.parametrize("name", NAMES)
def test_a_v1_sample_opens_as_v2_without_being_rewritten(name: str, tmp_path: Path) -> None:
    copy = _copy(name, tmp_path)
    before = {p: p.read_bytes() for p in copy.rglob("*") if p.is_file()}
    bundle = Bundle.open(copy)
    assert bundle.manifest.schema_version == SCHEMA_VERSION == 3
    runs = bundle.runs()
    assert runs and all(r.sources == {"server": "server.log"} for r in runs)
    assert all(set(bundle.log_sources(r)) == {"server"} for r in runs)
    analyse(bundle)
    assert {p: p.read_bytes() for p in copy.rglob("*") if p.is_file()} == before


@pytest.mark.parametrize("name", NAMES)
def test_a_v1_sample_checks_as_its_stored_findings_and_as_its_v2_form(
    name: str, tmp_path: Path
) -> None:
    label = f"samples/{name}"
    stored = _plain(json.loads((SAMPLES / name / FINDINGS_FILE).read_text()), SAMPLES, "samples")
    v1 = _check(_copy(name, tmp_path / "v1"), label)
    # The stored findings.json predates later parser work (the MLA one: the launch command
    # read from run.json), so only what it concluded is compared: modes and findings.
    assert _verdicts(v1) == _verdicts(stored)
    v2 = _copy(name, tmp_path / "v2")
    _as_v2(v2)
    assert _check(v2, label) == v1
    # one table per run, one source each, nothing to disagree on
    report = check_paths([v2])
    assert len(report.log_sources) == len(report.runs)
    assert all(len(g.sources) == 1 and not g.differences for g in report.log_sources)


@pytest.mark.parametrize("name", NAMES)
def test_a_v1_sample_reports_as_its_v2_form(name: str, tmp_path: Path) -> None:
    v1, v2 = _copy(name, tmp_path / "v1"), _copy(name, tmp_path / "v2")
    _as_v2(v2)
    first, second = (analyse(Bundle.open(b)).model_dump(mode="json") for b in (v1, v2))
    for a in (first, second):
        a.pop("created_at", None)
    assert _plain(first, v1, "b") == _plain(second, v2, "b")


def test_upgrade_to_2_maps_v1_logs_to_sources_and_leaves_v2_alone() -> None:
    v1 = {"schema_version": 1, "arm": "a", "restart": 0, "logs": ["server.log", "server-2.log"]}
    assert upgrade_to_2(v1)["sources"] == {"server": "server.log", "server-2": "server-2.log"}
    assert v1["schema_version"] == 1 and "sources" not in v1  # the input is not changed
    attempt = {"schema_version": 1, "arm": "a", "restart": 0, "logs": ["server.attempt1.log"]}
    assert upgrade_to_2(attempt)["sources"] == {"server": "server.log"}
    assert upgrade_to_2({"schema_version": 1, "tool_version": "x"}) == {
        "schema_version": 2,
        "tool_version": "x",
    }
    v2 = {"schema_version": 2, "arm": "a", "restart": 0, "sources": {}}
    assert upgrade_to_2(v2) is v2
