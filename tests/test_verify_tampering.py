"""`diagnose verify` against the tamperings of issue 34, done to copies of the recorded MLA
sample (0.56× under a capture downgrade) sealed as a bundle recorded today is, and to unsealed
copies as the samples are: each tampering named, with the exit code a client's auditor acts on
(1 the deliverable does not follow, 3 the bundle's integrity fails, 4 another bundle)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import NamedTuple

import pytest
from click.testing import CliRunner
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from verify_bundles import (
    MLA,
    SAMPLES,
    SPEC,
    copy,
    graft,
    hide_downgrade,
    seal_all,
    sealed_copy,
    speed_up,
    write_analysis,
)

from diagnostic.analyse.core import analyse
from diagnostic.bundle.pdfsign import sign_pdf_file
from diagnostic.bundle.signing import private_key
from diagnostic.bundle.store import Bundle
from diagnostic.cli import main
from diagnostic.logcheck.stage import check_paths
from diagnostic.report import build_report
from diagnostic.schema.bundle import Engagement
from diagnostic.verify.pages import read_pdf
from diagnostic.verify.stage import check_report_signature


class Keys(NamedTuple):
    private: Path
    public: Path
    other: Path  # another consultancy's public key, OpenSSH form


def _verify(*args: str | Path) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["verify", *map(str, args)])
    assert "Traceback" not in result.output, result.output
    return result.exit_code, result.output


def _spec_ratio(path: Path) -> float:
    """The speedup of the downgraded arm on code, as the analysis of `path` gives it."""
    analysis = analyse(Bundle.open(path, strict=False))
    (c,) = [c for c in analysis.comparisons if c.arm == SPEC and c.workload == "code"]
    assert c.ratio is not None
    return c.ratio


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> Keys:
    folder = tmp_path_factory.mktemp("keys")
    key, other = Ed25519PrivateKey.generate(), Ed25519PrivateKey.generate()
    pem = serialization.Encoding.PEM
    (folder / "key.pem").write_bytes(
        key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    (folder / "key.pub").write_bytes(
        key.public_key().public_bytes(pem, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    (folder / "other.pub").write_bytes(
        other.public_key().public_bytes(
            serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
        )
    )
    return Keys(folder / "key.pem", folder / "key.pub", folder / "other.pub")


@pytest.fixture(scope="module")
def genuine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The MLA sample as recorded today: every run sealed; its analysis.json written."""
    path = sealed_copy(MLA, tmp_path_factory.mktemp("genuine") / "mla")
    write_analysis(path)
    return path


@pytest.fixture(scope="module")
def genuine_pdf(genuine: Path, keys: Keys) -> Path:
    """The signed deliverable of the genuine bundle (rendered once: about 15 s)."""
    out = genuine.parent / "report.pdf"
    people = Engagement(client="ACME Corp", site="dc-1")
    key = private_key(path=keys.private)
    build_report(
        genuine, out, "pdf", engagement=people, title="Speculation review", signing_key=key
    )
    sign_pdf_file(out, key)  # as `report --sign-key` does once the PDF is written
    return out


def _tampered(genuine: Path, tmp_path: Path) -> Path:
    """A copy of the genuine bundle: the same bundle id, the same seals."""
    path = tmp_path / "mla"
    shutil.copytree(genuine, path)
    return path


@pytest.mark.slow
def test_the_genuine_deliverable_verifies(genuine: Path, genuine_pdf: Path, keys: Keys) -> None:
    code, out = _verify(genuine, genuine_pdf, "--key", keys.public)
    assert code == 0, out
    for name in (
        "seals",
        "schedule",
        "findings",
        "root",
        "analysis",
        "pages",
        "document",
        "signature",
    ):
        assert f"OK   {name}" in out, name
    assert "12 runs sealed as they ended" in out
    assert "VERIFIED: the report is byte for byte the one the key given signed" in out
    assert "(every run sealed as it ended)" in out


def test_raw_requests_edited_consistently_and_the_analysis_regenerated(
    genuine: Path, tmp_path: Path
) -> None:
    bundle = _tampered(genuine, tmp_path)
    speed_up(bundle)
    write_analysis(bundle)
    assert _spec_ratio(genuine) < 0.6 < 1.1 < _spec_ratio(bundle)  # the loss now reads a win
    code, out = _verify(bundle)
    assert code == 3, out
    for r in range(3):
        assert f"runs/{SPEC}-r{r}/requests.jsonl: differs from its seal" in out
    assert "OK   analysis" in out  # regenerated: consistent, and only the seals catch it
    assert "INTEGRITY FAILS (exit 3)" in out


@pytest.mark.slow
def test_requests_edited_and_sealed_again_the_report_does_not_follow(
    genuine: Path, genuine_pdf: Path, tmp_path: Path
) -> None:
    """A consistent attacker seals the edited runs again: the report's printed root hash and
    its record of each run's seal name the runs that changed, and its pages differ."""
    bundle = _tampered(genuine, tmp_path)
    speed_up(bundle)
    seal_all(bundle)
    write_analysis(bundle)
    code, out = _verify(bundle, genuine_pdf, "--all")
    assert code == 1, out
    assert "OK   seals" in out
    assert "FAIL root      the PDF's pages were made from another state of this bundle" in out
    for r in range(3):
        assert f"runs/{SPEC}-r{r}: seal " in out
    assert "FAIL analysis" in out and f"comparisons[arm={SPEC}, baseline=triton-base" in out
    assert "FAIL pages" in out and "the PDF reads" in out


@pytest.mark.parametrize("sealed", [True, False], ids=["sealed", "unsealed"])
def test_a_baseline_restart_deleted_and_the_analysis_regenerated(
    genuine: Path, tmp_path: Path, sealed: bool
) -> None:
    bundle = _tampered(genuine, tmp_path) if sealed else copy(MLA, tmp_path / "mla")
    shutil.rmtree(bundle / "runs" / "triton-base-r1")
    write_analysis(bundle)
    code, out = _verify(bundle)
    assert code == 3, out
    assert (
        "runs/triton-base-r1: planned (block 2) and absent, with no reason recorded: deleted, "
        "or never run" in out
    )
    assert "OK   analysis" in out


def test_log_lines_edited_so_check_misses_the_downgrade_sealed(
    genuine: Path, tmp_path: Path
) -> None:
    bundle = _tampered(genuine, tmp_path)
    hide_downgrade(bundle)
    rules = {f.rule for f in check_paths([bundle]).findings}  # findings.json regenerated
    assert "capture-downgraded-under-spec" not in rules
    code, out = _verify(bundle)
    assert code == 3, out
    for r in range(3):
        assert f"runs/{SPEC}-r{r}/server.log: differs from its seal" in out
    assert "OK   findings" in out  # regenerated: only the seals catch it


def test_log_lines_edited_so_check_misses_the_downgrade_unsealed(tmp_path: Path) -> None:
    """Without seals the findings the report shows (findings.json) are held against the logs."""
    bundle = copy(MLA, tmp_path / "mla")
    hide_downgrade(bundle)
    code, out = _verify(bundle)
    assert code == 1, out
    assert "recorded before sealing: integrity not provable, consistency checked" in out
    assert "FAIL findings" in out
    assert (
        f"findings.json: findings[rule=capture-downgraded-under-spec, "
        f"run=BUNDLE/runs/{SPEC}-r0/server.log]: stored" in out
    )


@pytest.mark.slow
def test_forged_pages_carrying_the_genuine_attachments(
    genuine: Path, genuine_pdf: Path, tmp_path: Path
) -> None:
    """Pages rendered from a tampered bundle, the genuine analysis.json (and deliverable.json)
    embedded: the analysis matches, the pages and the root hash they print do not, and the
    genuine record's signed root says the PDF was signed: its bytes no longer are."""
    forged_bundle = _tampered(genuine, tmp_path)
    speed_up(forged_bundle)
    seal_all(forged_bundle)
    forged_render = build_report(
        forged_bundle,
        tmp_path / "forged-render.pdf",
        "pdf",
        engagement=Engagement(client="ACME Corp", site="dc-1"),
        title="Speculation review",
    )
    forged = graft(forged_render, genuine_pdf, tmp_path / "forged.pdf")
    code, out = _verify(genuine, forged)
    assert code == 3, out
    assert "FAIL signature" in out and "but its bytes carry none: the PDF was rewritten" in out
    assert "OK   analysis" in out  # the genuine attachment: what a figure-only check saw
    assert "deliverable.json: names root" in out and "(forged pages?)" in out
    assert "FAIL pages" in out and "the PDF reads" in out
    assert "this bundle's files match their seals" in out


@pytest.mark.slow
def test_a_report_of_another_bundle_is_said_to_be_one(genuine_pdf: Path, tmp_path: Path) -> None:
    code, out = _verify(SAMPLES / "vllm-h200-validation", genuine_pdf)
    assert code == 4, out
    assert "FAIL root      the PDF came from another bundle: its bundle was created" in out
    assert "ANOTHER BUNDLE (exit 4)" in out and "SKIP analysis" in out
    # The same sample recorded twice: two bundles, told apart by their ids.
    twin = sealed_copy(MLA, tmp_path / "twin")
    code, out = _verify(twin, genuine_pdf)
    assert code == 4 and "the PDF came from another bundle: it names bundle" in out


def test_a_file_appended_after_sealing(genuine: Path, tmp_path: Path) -> None:
    bundle = _tampered(genuine, tmp_path)
    with open(bundle / "runs" / "fa-base-r0" / "server.log", "ab") as fh:
        fh.write(b"INFO a line added later\n")
    (bundle / "runs" / "fa-base-r0" / "notes.txt").write_text("added\n")
    code, out = _verify(bundle)
    assert code == 3, out
    assert "runs/fa-base-r0/server.log: differs from its seal" in out
    assert "runs/fa-base-r0/notes.txt: not in the seal: added after the run ended" in out


def test_a_run_copied_from_another_bundle(genuine: Path, tmp_path: Path) -> None:
    bundle = _tampered(genuine, tmp_path)
    other = sealed_copy(MLA, tmp_path / "other")
    shutil.rmtree(bundle / "runs" / "fa-base-r1")
    shutil.copytree(other / "runs" / "fa-base-r1", bundle / "runs" / "fa-base-r1")
    other_id = Bundle.open(other, strict=False).manifest.bundle_id
    code, out = _verify(bundle)
    assert code == 3, out
    assert f"runs/fa-base-r1: sealed in bundle {other_id}, not in this one" in out


def test_a_manifest_whose_schedule_was_edited(genuine: Path, tmp_path: Path) -> None:
    bundle = _tampered(genuine, tmp_path)
    manifest = json.loads((bundle / "manifest.json").read_text())
    manifest["plan"]["restarts"] = 4
    (bundle / "manifest.json").write_text(json.dumps(manifest, indent=2))
    code, out = _verify(bundle)
    assert code == 3, out
    assert "runs/fa-base-r0: sealed under another schedule than manifest.json's" in out
    assert "runs/fa-base-r3: planned (block 4) and absent, with no reason recorded" in out


def test_run_json_or_a_seal_edited_after_sealing(genuine: Path, tmp_path: Path) -> None:
    bundle = _tampered(genuine, tmp_path)
    path = bundle / "runs" / "fa-base-r2" / "run.json"
    run = json.loads(path.read_text())
    run["status"] = "failed"  # left out of every figure
    path.write_text(json.dumps(run))
    path = bundle / "runs" / "fa-ngram-k3-r2" / "run.json"
    run = json.loads(path.read_text())
    run["seal"]["files"]["requests.jsonl"] = "0" * 64
    path.write_text(json.dumps(run))
    code, out = _verify(bundle)
    assert code == 3, out
    assert "runs/fa-base-r2/run.json: changed after the run was sealed" in out
    assert "runs/fa-ngram-k3-r2/run.json: its seal's digest is not the digest of its own" in out


@pytest.mark.parametrize(
    "name",
    [
        "llamacpp-cpu-gemma3",
        "llamacpp-cpu-adaptive",
        "vllm-h200-mla",
        "vllm-h200-validation",
        "vllm-h200-gemma3",
    ],
)
def test_the_recorded_samples_say_they_predate_sealing(name: str) -> None:
    sample = SAMPLES / name
    before = {p: p.stat().st_mtime_ns for p in sample.rglob("*")}
    code, out = _verify(sample)
    assert code == 0, out
    assert (
        "NOTE seals     recorded before sealing: integrity not provable, consistency checked" in out
    )
    assert "OK   schedule" in out and "OK   findings" in out
    assert "CONSISTENT, NOT PROVEN: the bundle, recorded before sealing, and what" in out
    assert "anyone could have produced a consistent bundle" in out
    assert {p: p.stat().st_mtime_ns for p in sample.rglob("*")} == before  # nothing written
    if name == "llamacpp-cpu-adaptive":  # the arm stopped at a look: absent with its reason
        assert "runs/selfdraft-k4-r4: not run: selfdraft-k4 stopped at look 1 (LOSS)" in out
    if name == "vllm-h200-validation":  # the 30-minute GPU budget ended it mid-run
        assert "not ok: ngram-k7-r1 (running)" in out


def test_the_sealed_cpu_vllm_sample_verifies_its_integrity() -> None:
    """samples/vllm-cpu-0.32 was recorded with seals: every file is checked against them."""
    sample = SAMPLES / "vllm-cpu-0.32"
    before = {p: p.stat().st_mtime_ns for p in sample.rglob("*")}
    code, out = _verify(sample)
    assert code == 0, out
    assert "OK   seals     6 runs sealed as they ended" in out
    assert "CONSISTENT, NOT PROVEN: the bundle and what was made from it agree" in out
    assert {p: p.stat().st_mtime_ns for p in sample.rglob("*")} == before  # nothing written


@pytest.mark.slow
def test_the_signature_checks_only_with_the_consultancys_key(
    genuine_pdf: Path, keys: Keys, tmp_path: Path
) -> None:
    pdf = read_pdf(genuine_pdf)
    good = check_report_signature(pdf, keys.public)
    assert good is not None and good.status == "ok"
    bad = check_report_signature(pdf, keys.other)
    assert bad is not None and bad.status == "failed" and bad.fault == "integrity"
    assert "not by the key given (SHA256:" in bad.problems[0]
    assert "does not check with the key given (SHA256:" in bad.problems[1]
    assert "the report says it was signed with SHA256:" in bad.problems[1]
    note = check_report_signature(pdf, None)
    assert note is not None and note.status == "note" and "pass --key KEY.pub" in note.summary
