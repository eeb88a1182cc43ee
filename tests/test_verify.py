"""`diagnose verify`: the stored analysis (analysis.json or the one a report PDF embeds) against
the analysis recomputed from a real sample bundle; differences named by path, exit 0/1/2."""

from __future__ import annotations

import copy
import io
import json
import random
import shutil
import types
import typing
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from pydantic import BaseModel
from pypdf import PdfReader, PdfWriter

from diagnostic.analyse.core import analyse
from diagnostic.analyse.verify import (
    ABSENT,
    ANALYSIS_FILE,
    LIST_KEYS,
    compare,
    load_stored,
)
from diagnostic.bundle.store import Bundle
from diagnostic.cli import main
from diagnostic.errors import DiagnosticError
from diagnostic.report import build_report
from diagnostic.schema.analysis import Analysis
from diagnostic.schema.bundle import Engagement
from diagnostic.schema.seal import DELIVERABLE_FILE

SAMPLE = Path(__file__).resolve().parent.parent / "samples" / "vllm-h200-mla"


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the MLA sample with its analysis.json, as `report --format json` writes it."""
    path = tmp_path_factory.mktemp("verify") / "mla"
    shutil.copytree(SAMPLE, path)
    opened = Bundle.open(path, strict=False)
    opened.write_json(ANALYSIS_FILE, analyse(opened))
    return path


@pytest.fixture(scope="module")
def pdf(bundle: Path) -> Path:
    """The client's PDF of the bundle, rendered once (about 5 s), with a client and a title."""
    out = bundle.parent / "report.pdf"
    build_report(
        bundle, out, "pdf", engagement=Engagement(client="ACME Corp"), title="Speculation review"
    )
    return out


@pytest.fixture(scope="module")
def stored(bundle: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((bundle / ANALYSIS_FILE).read_text())
    return data


def _verify(*args: str | Path) -> Any:
    return CliRunner().invoke(main, ["verify", *map(str, args)])


def _comparison(data: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = next(c for c in data["comparisons"] if c["ci_low"] is not None)
    return found


def _path(c: dict[str, Any]) -> str:
    keys = ("arm", "baseline", "workload", "concurrency", "kind")
    return "comparisons[" + ", ".join(f"{k}={c[k]}" for k in keys) + "]"


# -- compare: pure ---------------------------------------------------------------------------
def test_an_analysis_equals_itself_and_every_figure_is_counted(stored: dict[str, Any]) -> None:
    result = compare(stored, copy.deepcopy(stored))
    assert result.ok and result.differences == []
    assert result.compared > 1000  # every number, string, bool and null below the top level


def test_reordered_lists_are_no_difference(stored: dict[str, Any]) -> None:
    shuffled = copy.deepcopy(stored)
    rng = random.Random(0)
    rng.shuffle(shuffled["arms"])
    rng.shuffle(shuffled["comparisons"])
    for arm in shuffled["arms"]:
        rng.shuffle(arm["workloads"])
        rng.shuffle(arm["runs"])
    if shuffled["sweep"]:
        shuffled["sweep"]["workloads"].reverse()
    assert shuffled["comparisons"] != stored["comparisons"]
    assert compare(shuffled, stored).ok


def test_a_changed_figure_is_named_with_both_values(stored: dict[str, Any]) -> None:
    changed = copy.deepcopy(stored)
    target = _comparison(changed)
    original = target["ci_low"]
    target["ci_low"] = original * 1.001
    (diff,) = compare(changed, stored).differences
    assert diff.path == f"{_path(target)}.ci_low"
    assert (diff.stored, diff.recomputed) == (original * 1.001, original)
    assert str(diff) == f"{diff.path}: stored {original * 1.001!r}, recomputed {original!r}"


def test_missing_and_extra_items_are_differences(stored: dict[str, Any]) -> None:
    changed = copy.deepcopy(stored)
    gone = changed["comparisons"].pop(0)
    extra = {**changed["arms"][0], "id": "eagle3-k9"}
    changed["arms"].append(extra)
    diffs = {d.path: d for d in compare(changed, stored).differences}
    assert set(diffs) == {_path(gone), "arms[id=eagle3-k9]"}
    assert diffs[_path(gone)].stored is ABSENT and diffs[_path(gone)].recomputed == gone
    assert diffs["arms[id=eagle3-k9]"].recomputed is ABSENT
    assert "not in the stored analysis" in str(diffs[_path(gone)])


def test_relative_tolerance_integers_and_types(stored: dict[str, Any]) -> None:
    target = _comparison(stored)
    for factor, equal in ((1 + 1e-12, True), (1 + 1e-7, False)):
        changed = copy.deepcopy(stored)
        _comparison(changed)["ratio"] = target["ratio"] * factor
        assert compare(changed, stored).ok is equal, factor
    changed = copy.deepcopy(stored)
    _comparison(changed)["n_restarts_arm"] += 1  # integers exactly
    _comparison(changed)["paired"] = int(target["paired"])  # a bool is not a number
    _comparison(changed)["verdict"] = target["verdict"].lower()  # strings exactly
    paths = {d.path.rsplit(".", 1)[1] for d in compare(changed, stored).differences}
    assert paths == {"n_restarts_arm", "paired", "verdict"}


def test_run_dependent_fields_are_ignored_and_new_fields_compared(
    stored: dict[str, Any],
) -> None:
    changed = copy.deepcopy(stored)
    changed.update(created_at="2030-01-01T00:00:00Z", tool_version="9.9", bundle="/elsewhere")
    assert compare(changed, stored).ok
    # A field the schema gains later is compared without a change to verify.py.
    newer, older = copy.deepcopy(stored), copy.deepcopy(stored)
    newer["noise_band"]["future_figure"] = 1.5
    older["noise_band"]["future_figure"] = 1.25
    (diff,) = compare(newer, older).differences
    assert diff.path == "noise_band.future_figure"


def test_every_list_of_objects_in_the_schema_has_identity_keys() -> None:
    """Add an entry to verify.LIST_KEYS when the schema gains a list of objects."""

    def models(tp: Any) -> list[type[BaseModel]]:
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            return [tp]
        return [m for arg in typing.get_args(tp) for m in models(arg)]

    seen: set[type[BaseModel]] = set()
    todo: list[type[BaseModel]] = [Analysis]
    while todo:
        model = todo.pop()
        if model in seen:
            continue
        seen.add(model)
        for name, info in model.model_fields.items():
            tp = info.annotation
            origin = typing.get_origin(tp)
            if origin in (typing.Union, types.UnionType):  # X | None
                tp = next(a for a in typing.get_args(tp) if a is not type(None))
                origin = typing.get_origin(tp)
            if origin is list and models(tp):
                (item,) = models(tp)
                assert name in LIST_KEYS, f"{model.__name__}.{name}: add it to LIST_KEYS"
                assert set(LIST_KEYS[name]) <= set(item.model_fields), (name, item.__name__)
            todo += models(tp)


# -- reading the stored side -------------------------------------------------------------------
def test_the_pdf_embeds_the_analysis_it_shows(pdf: Path, bundle: Path) -> None:
    embedded = load_stored(pdf)
    assert (embedded["client"], embedded["title"]) == ("ACME Corp", "Speculation review")
    plain = json.loads((bundle / ANALYSIS_FILE).read_text())  # made without --client/--title
    assert {d.path for d in compare(embedded, plain).differences} == {"client", "title"}
    assert list(PdfReader(pdf).attachments) == [ANALYSIS_FILE, DELIVERABLE_FILE]


def test_unreadable_inputs_are_clear_errors(tmp_path: Path) -> None:
    (tmp_path / "x.json").write_text("{not json")
    (tmp_path / "list.json").write_text("[1, 2]")
    writer = PdfWriter()
    writer.add_blank_page(72, 72)
    writer.write(tmp_path / "bare.pdf")
    (tmp_path / "broken.pdf").write_bytes(b"%PDF-1.7\ngarbage")
    expected = {
        "x.json": "not JSON",
        "list.json": "not an analysis",
        "bare.pdf": "embeds no analysis.json",
        "broken.pdf": "not a readable PDF",
        "missing.json": "cannot read",
    }
    for name, message in expected.items():
        with pytest.raises(DiagnosticError, match=message):
            load_stored(tmp_path / name)


# -- the command -------------------------------------------------------------------------------
def test_verify_the_bundles_own_analysis_json(bundle: Path) -> None:
    result = _verify(bundle)
    assert result.exit_code == 0, result.output
    assert "OK   analysis  all " in result.output
    assert "figures of" in result.output and "analysis.json" in result.output


@pytest.mark.slow
def test_verify_the_pdf_deliverable(pdf: Path) -> None:
    # The original sample folder: another path and name, the same raw files: the same figures,
    # the same root hash and pages (the report names the bundle as it was analysed).
    result = _verify(SAMPLE, pdf)
    assert result.exit_code == 0, result.output
    for name in ("root", "analysis", "pages", "document"):
        assert f"OK   {name}" in result.output, name
    assert (
        "CONSISTENT, NOT PROVEN: the bundle, recorded before sealing, and what was made from it "
        "agree, but anyone could have produced a consistent bundle" in result.output
    )


@pytest.mark.slow
def test_a_tampered_pdf_names_the_figure(pdf: Path, bundle: Path, tmp_path: Path) -> None:
    data = load_stored(pdf)
    target = _comparison(data)
    honest = target["ci_low"]
    target["ci_low"] = round(honest + 0.0123, 4)
    reader = PdfReader(pdf)
    writer = PdfWriter()
    for page in reader.pages:
        writer.add_page(page)
    writer.add_attachment(ANALYSIS_FILE, json.dumps(data, indent=2).encode())
    writer.add_attachment(DELIVERABLE_FILE, reader.attachments[DELIVERABLE_FILE][0])
    tampered = tmp_path / "tampered.pdf"
    with io.BytesIO() as buffer:
        writer.write(buffer)
        tampered.write_bytes(buffer.getvalue())
    result = _verify(bundle, tampered)
    assert result.exit_code == 1, result.output
    line = f"{_path(target)}.ci_low: stored {target['ci_low']!r}, recomputed {honest!r}"
    assert line in result.output
    assert "FAIL analysis  1 of " in result.output
    assert "OK   pages" in result.output  # the pages are the genuine ones


def test_a_tampered_json_lists_every_difference(
    bundle: Path, stored: dict[str, Any], tmp_path: Path
) -> None:
    changed = copy.deepcopy(stored)
    for c in changed["comparisons"]:
        c["verdict"] = "WIN"
    changed["comparisons"].pop()
    path = tmp_path / "a.json"
    path.write_text(json.dumps(changed))
    result = _verify(bundle, path)
    assert result.exit_code == 1
    n = sum(c["verdict"] != "WIN" for c in stored["comparisons"][:-1]) + 1
    assert f"FAIL analysis  {n} of " in result.output
    assert "DIFFERS (exit 1)" in result.output


def test_no_analysis_and_unreadable_input(tmp_path: Path, bundle: Path) -> None:
    bare = tmp_path / "bare"
    shutil.copytree(SAMPLE, bare)
    result = _verify(bare)  # the bundle's own checks still run
    assert result.exit_code == 0, result.output
    assert "SKIP analysis  no analysis.json in the bundle and no report given" in result.output
    (tmp_path / "junk.json").write_text("nope")
    result = _verify(bundle, tmp_path / "junk.json")
    assert result.exit_code == 2 and "not JSON" in " ".join(result.output.split())
    result = _verify(tmp_path / "nothing", bundle / ANALYSIS_FILE)
    assert result.exit_code == 2 and "Error:" in result.output
    for option in ("--key", "--public-key"):  # --public-key: the older spelling
        result = _verify(bundle, option, tmp_path / "junk.json")
        said = " ".join(result.output.split())
        assert result.exit_code == 2 and "--key checks the signatures a report PDF" in said


def test_help_says_what_is_checked_ignored_and_the_exit_codes() -> None:
    result = CliRunner().invoke(main, ["verify", "--help"])
    text = " ".join(result.output.split())
    assert "created_at, tool_version and bundle" in text
    assert "1e-9" in text
    assert "recorded before sealing: integrity not provable, consistency checked" in text
    for code in (
        "0 everything checked holds (VERIFIED with --key, else consistent)",
        "1 the deliverable",
        "2 an input",
        "3 the bundle's integrity",
        "4 the report PDF was made from another bundle",
    ):
        assert code in text, code


def test_an_analysis_json_the_bundle_wrote_through_its_redaction_verifies(tmp_path: Path) -> None:
    """`report --format json` writes analysis.json through the bundle's gate, which redacts
    texts (the gemma3 sample's theory prose holds 'token: CUDA graphs'): the same analysis."""
    bundle = tmp_path / "gemma3"
    shutil.copytree(SAMPLE.parent / "vllm-h200-gemma3", bundle)
    made = CliRunner().invoke(main, ["report", str(bundle), "--format", "json"])
    assert made.exit_code == 0, made.output
    result = _verify(bundle)
    assert result.exit_code == 0, result.output
    assert "OK   analysis" in result.output
