"""A report PDF's signatures: its bytes (bundle/pdfsign.py) and the root hash its
deliverable.json names (bundle/signing.py), checked with the consultancy's public key when
one is pinned (`verify --key`), else against each other only."""

from __future__ import annotations

from pathlib import Path

from diagnostic.bundle.pdfsign import PdfSignature, check_pdf_signature, read_pdf_signature
from diagnostic.bundle.signing import check_signature, key_id, openssh_public_key, parse_openssh
from diagnostic.bundle.signing import public_key as load_key
from diagnostic.errors import DiagnosticError
from diagnostic.verify.outcome import Check
from diagnostic.verify.pages import PdfReport

__all__ = ["check_report_signature"]

_UNPINNED = (
    "not checked against the consultancy's key (pass --key KEY.pub): anyone can sign with a "
    "key of their own"
)


def _failed(summary: str, problems: list[str]) -> Check:
    return Check.failed("signature", "integrity", summary, problems)


def _byte_signature(pdf: PdfReport) -> tuple[PdfSignature | None, list[str]]:
    """The PDF's signature line and what is wrong with it whatever the key: bytes after it, a
    line that cannot be read, a signature its own key does not check (bytes changed)."""
    try:
        found = read_pdf_signature(pdf.data)
    except DiagnosticError as exc:
        return None, [f"{pdf.path}: {exc}"]
    if found is None:
        return None, []
    problems = []
    if found.after:
        problems.append(
            f"{pdf.path}: {found.after} bytes after its signature: appended after the report "
            "was signed"
        )
    own = parse_openssh(found.public_key)
    if own is None or key_id(found.public_key) != found.key_id:
        problems.append(f"{pdf.path}: its signature names no ed25519 key it can be checked with")
    elif (why := check_pdf_signature(found, own)) is not None:
        problems.append(f"{pdf.path}: {why}")
    return found, problems


def check_report_signature(pdf: PdfReport | None, public_key: Path | None) -> Check | None:
    """The PDF's byte signature and its root's signature, with `public_key` when given; None
    when there is no PDF and no key."""
    if pdf is None:
        if public_key is None:
            return None
        return _failed("a public key was given, but no signed report", ["no report PDF given"])
    root = pdf.made_from.signature if pdf.made_from else None
    found, problems = _byte_signature(pdf)
    if found is None and root is None and not problems:
        if public_key is None:
            return Check("signature", "skipped", "the report is not signed")
        return _failed(
            "a public key was given, but the report carries no signature",
            [f"{pdf.path}: not signed"],
        )
    if found is None and root is not None and not problems:
        problems.append(
            f"{pdf.path}: its deliverable.json carries a signature of the root by "
            f"{root.key_id}, but its bytes carry none: the PDF was rewritten after it was "
            "signed (or signed by a diagnose before byte signatures: sign it again)"
        )
    if found is not None and (root is None or root.key_id != found.key_id):
        problems.append(
            f"{pdf.path}: its bytes are signed by {found.key_id}, its root "
            + (f"by {root.key_id}" if root else "by no one")
            + ": signed again by someone else after it was made"
        )
    if public_key is not None:
        problems += _pinned(pdf, found, public_key)
    if problems:
        return _failed("the report's signature does not hold", problems)
    assert found is not None and root is not None and pdf.made_from is not None
    if public_key is None:
        return Check(
            "signature",
            "note",
            f"the PDF is byte for byte as {found.key_id} signed it ({found.public_key}); "
            + _UNPINNED,
        )
    return Check(
        "signature",
        "ok",
        f"the PDF is byte for byte as {found.key_id} signed it, and its root "
        f"{pdf.made_from.root}; checked with {public_key}",
    )


def _pinned(pdf: PdfReport, found: PdfSignature | None, public_key: Path) -> list[str]:
    """Both signatures against the pinned key (what is missing is named above)."""
    key = load_key(public_key)
    given = key_id(openssh_public_key(key))
    out = []
    if found is not None and given != found.key_id:
        out.append(
            f"{pdf.path}: signed by {found.key_id}, not by the key given ({given}, "
            f"{public_key}): signed by someone else (re-signed after a change?)"
        )
    elif found is not None and (why := check_pdf_signature(found, key)) is not None:
        out.append(f"{pdf.path}: {why}")
    root = pdf.made_from.signature if pdf.made_from else None
    if pdf.made_from is not None and root is not None:
        why = check_signature(root, pdf.made_from.root, key)
        if why is not None:
            out.append(why)
    return out
