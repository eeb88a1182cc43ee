"""Issue 46's integrity attacks on a real recording and its signed report (tampering.py says
how each is done): `diagnose verify` run on each, alone and with the report signed by the
consultancy's key (`--key`). Alone, a bundle's seals catch every edit that was not sealed
again; a forgery sealed again with the tool's own code is consistent, and verify says that
anyone could have produced it, never VERIFIED; the signed report catches every one.

The report PDF: signed byte for byte, any change fails with the key and without it (a PDF
rewritten by a PDF library loses its signature line while its record says it was signed); an
unsigned report's drawing, annotations, attachments and metadata are held against the report
re-rendered from the bundle (the `document` check)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import NamedTuple

import pytest
import tampering as t
from click.testing import CliRunner
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from diagnostic.bundle.pdfsign import sign_pdf
from diagnostic.cli import main
from diagnostic.verify.document import check_document
from diagnostic.verify.pages import read_pdf
from diagnostic.verify.signature import check_report_signature

NOT_PROVEN = 0  # consistent, and said not to be proof: "anyone could have produced …"
UNPROVEN = "anyone could have produced a consistent bundle"
ANCHORS = (
    "only the report signed with the consultancy's key (--key KEY.pub), or the seals and root "
    "hash noted on site, tie it to what was measured."
)

# name, tampering, exit code of `verify BUNDLE`, of `verify BUNDLE REPORT.pdf --key KEY.pub`
# (SAME: the seals that fail alone fail the same with the report and the key, exit 3 at least;
# not run twice, since verify then re-renders the report, which costs seconds).
SAME = None
BUNDLE_ATTACKS: list[tuple[str, t.Tamper, int, int | None]] = [
    (
        "all seals stripped, a run 3x faster, analysis regenerated",
        t.seals_stripped_and_a_run_3x_faster,
        3,
        3,
    ),
    ("forged as a bundle recorded before sealing", t.forged_as_recorded_before_sealing, 0, 3),
    ("rolled back to a copy taken mid-sweep", t.rolled_back_to_a_copy_taken_mid_sweep, 0, 3),
    ("two runs swapped, sealed again", t.runs_swapped_and_sealed_again, 0, 3),
    (
        "a run replaced from another bundle, sealed again",
        t.run_replaced_from_another_bundle_and_sealed_again,
        0,
        3,
    ),
    ("the plan edited, sealed again", t.plan_edited_and_sealed_again, 0, 3),
    ("a restart hidden as failed, sealed again", t.restart_hidden_as_failed_and_sealed_again, 0, 3),
    ("seal.sealed_at edited", t.sealed_at_edited, 3, SAME),
    ("manifest time_plan edited", t.time_plan_edited, 3, SAME),
    ("manifest created_at edited", t.created_at_edited, 3, 4),
    ("manifest engagement edited", t.engagement_edited, 3, SAME),
    ("the manifest's seal stripped", t.manifest_seal_stripped, 3, SAME),
    ("manifest sealing removed", t.sealing_field_removed, 3, SAME),
    ("one run's seal stripped", t.one_seal_stripped, 3, SAME),
    ("a seal rewritten in the older format", t.seal_rewritten_in_format_1, 3, SAME),
    ("requests 3x faster, not sealed again", t.requests_3x_faster_left_unsealed, 3, SAME),
    ("a run deleted", t.run_deleted, 3, SAME),
    ("a run copied in from another bundle", t.run_copied_in_from_another_bundle, 3, SAME),
    ("run.json edited after sealing", t.run_json_edited, 3, SAME),
]


class Keys(NamedTuple):
    private: Path
    public: Path
    other: Ed25519PrivateKey  # another consultancy's


def _verify(*args: str | Path) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["verify", *map(str, args)])
    assert ("Traceback" not in result.output and result.exception is None) or isinstance(
        result.exception, SystemExit
    ), result.output
    return result.exit_code, " ".join(result.output.split())


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> Keys:
    folder = tmp_path_factory.mktemp("keys")
    key = Ed25519PrivateKey.generate()
    pem = serialization.Encoding.PEM
    (folder / "key.pem").write_bytes(
        key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    (folder / "key.pub").write_bytes(
        key.public_key().public_bytes(pem, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    return Keys(folder / "key.pem", folder / "key.pub", Ed25519PrivateKey.generate())


@pytest.fixture(scope="module")
def genuine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return t.recorded_today(tmp_path_factory.mktemp("genuine") / "cpu")


@pytest.fixture(scope="module")
def signed(genuine: Path, keys: Keys) -> Path:
    """The deliverable as `diagnose report --sign-key` writes it."""
    out = genuine.parent / "report.pdf"
    args = ["report", str(genuine), "-o", str(out), "--sign-key", str(keys.private)]
    result = CliRunner().invoke(main, [*args, "--client", "ACME Corp"])
    assert result.exit_code == 0, result.output
    (genuine / "findings.json").unlink()  # report wrote it; outside the seals, recomputed
    return out


def test_the_genuine_bundle_alone_is_consistent_not_proven(genuine: Path) -> None:
    """(The genuine report verified with the key, pages and drawing re-rendered, is
    tests/test_verify_tampering.py's test_the_genuine_deliverable_verifies.)"""
    code, out = _verify(genuine)
    assert code == 0 and "VERIFIED" not in out and out.endswith(f"{UNPROVEN}; {ANCHORS}"), out


@pytest.mark.parametrize(
    ("tamper", "alone", "with_key"),
    [case[1:] for case in BUNDLE_ATTACKS],
    ids=[case[0] for case in BUNDLE_ATTACKS],
)
def test_a_tampered_bundle(
    tamper: t.Tamper,
    alone: int,
    with_key: int | None,
    genuine: Path,
    signed: Path,
    keys: Keys,
    tmp_path: Path,
) -> None:
    bundle = tmp_path / "cpu"
    shutil.copytree(genuine, bundle)
    tamper(bundle)
    code, out = _verify(bundle)
    assert code == alone, out
    assert "VERIFIED" not in out
    if alone == NOT_PROVEN:  # sealed again with the tool's code: nothing in it can tell
        assert out.endswith(f"{UNPROVEN}; {ANCHORS}"), out
    if with_key is SAME:
        return
    code, out = _verify(bundle, signed, "--key", keys.public)
    assert code == with_key, out
    if with_key == 3 and alone == NOT_PROVEN:
        assert "FAIL root" in out and "OK signature" in out, out


# -- the report PDF --------------------------------------------------------------------------

PDF_ATTACKS = [*t.PDF_EDITS, "an edit appended as an incremental update"]


def _pdf_tampered(data: bytes, name: str) -> bytes:
    if name == "an edit appended as an incremental update":
        return t.pdf_edited(data, "a FreeText annotation 'WIN 3.1x' on page 1", incremental=True)
    return t.pdf_edited(data, name)


def _signature(path: Path, data: bytes, key: Path | None) -> tuple[str, list[str]]:
    path.write_bytes(data)
    found = check_report_signature(read_pdf(path, text=False), key)
    assert found is not None
    return found.status, found.problems


@pytest.mark.parametrize(
    "name",
    [
        *PDF_ATTACKS,
        "bytes appended after %%EOF",
        "a byte changed in place",
        "its signature line stripped",
        "changed, then signed again with another key",
    ],
)
def test_a_changed_signed_report_fails_with_the_key_and_without(
    name: str, signed: Path, keys: Keys, tmp_path: Path
) -> None:
    data = signed.read_bytes()
    if name == "bytes appended after %%EOF":
        changed = t.bytes_appended(data)
    elif name == "a byte changed in place":
        changed = t.byte_changed_in_place(data)
    elif name == "its signature line stripped":
        changed = t.signature_line_stripped(data)
    elif name == "changed, then signed again with another key":
        edited = t.pdf_edited(t.signature_line_stripped(data), "Title and Author changed")
        changed = sign_pdf(edited, keys.other)
    else:
        changed = _pdf_tampered(data, name)
    assert changed != data
    for key in (keys.public, None):
        status, problems = _signature(tmp_path / "changed.pdf", changed, key)
        assert status == "failed", (key, problems)


def test_the_genuine_signed_report_holds_its_signatures(signed: Path, keys: Keys) -> None:
    with_key = check_report_signature(read_pdf(signed, text=False), keys.public)
    assert with_key is not None and with_key.status == "ok", with_key
    alone = check_report_signature(read_pdf(signed, text=False), None)
    assert alone is not None and alone.status == "note" and "pass --key KEY.pub" in alone.summary


def test_a_report_made_elsewhere_fails_only_with_the_key(
    genuine: Path, signed: Path, keys: Keys, tmp_path: Path
) -> None:
    """Signed whole by another key, or not signed: consistent in itself, so only the pinned
    key tells it from the consultancy's."""
    forged = sign_pdf(t.signature_line_stripped(signed.read_bytes()), keys.other)
    unsigned = t.signature_line_stripped(signed.read_bytes())
    status, problems = _signature(tmp_path / "forged.pdf", forged, keys.public)
    assert status == "failed" and any("not by the key given" in p for p in problems), problems
    status, _ = _signature(tmp_path / "unsigned.pdf", unsigned, keys.public)
    assert status == "failed"


@pytest.mark.parametrize("name", [*PDF_ATTACKS, "bytes appended after %%EOF"])
def test_a_changed_unsigned_report_differs_from_the_re_rendered_one(
    name: str, signed: Path
) -> None:
    """Against the genuine report's bytes, which are the re-rendered report's (verify renders
    the same bytes from the same bundle: test_verify_tampering's genuine deliverable)."""
    genuine = t.signature_line_stripped(signed.read_bytes())
    assert check_document(genuine, genuine, path="report.pdf").status == "ok"
    if name == "bytes appended after %%EOF":
        changed = t.bytes_appended(genuine)
    else:
        changed = _pdf_tampered(genuine, name)
    found = check_document(changed, genuine, path="report.pdf")
    assert found.status == "failed" and found.fault == "deliverable", found.problems
