"""The report PDF signed byte for byte (docs/verify.md, "Signatures"): `report --sign-key`
appends one PDF comment line after the file's last `%%EOF`,

    %diagnose-signature {"algorithm":"ed25519","format":"diagnose-pdf/1","key_id":…,
                         "public_key":…,"signature":…}

(one line), whose ed25519 signature signs `diagnose-pdf/1 <sha256 of every byte before the
line>` and a newline. PDF readers skip a comment after %%EOF, so the file reads as before. Any
change to the bytes before the line (a page, an annotation, an attachment, the metadata, an
incremental update) breaks the signature; bytes after the line are a change too; a PDF rewritten
by a PDF tool loses the line, and its deliverable.json's signed root then says it was signed.
"""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from diagnostic.bundle.files import atomic_write_bytes
from diagnostic.bundle.signing import key_id, openssh_public_key
from diagnostic.errors import DiagnosticError

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import (
        Ed25519PrivateKey,
        Ed25519PublicKey,
    )

__all__ = [
    "PDF_FORMAT",
    "PdfSignature",
    "check_pdf_signature",
    "pdf_message",
    "read_pdf_signature",
    "sign_pdf",
    "sign_pdf_file",
]

PDF_FORMAT = "diagnose-pdf/1"
MARKER = b"%diagnose-signature "
_MAX_LINE = 4096  # the line is about 330 bytes; a longer one is not diagnose's


@dataclass(frozen=True)
class PdfSignature:
    """The signature line of a PDF and the bytes it signs."""

    key_id: str
    public_key: str  # OpenSSH form
    signature: str  # base64
    signed_sha256: str  # sha256 of every byte before the line
    after: int  # bytes found after the line (0 for a PDF as signed)


def pdf_message(sha256: str) -> bytes:
    """The bytes signed: the PDF's sha256 with its format, so a signature means nothing else."""
    return f"{PDF_FORMAT} {sha256}\n".encode("ascii")


def sign_pdf(data: bytes, key: Ed25519PrivateKey) -> bytes:
    """The PDF with its signature line appended (a newline first if it lacks one)."""
    if not data.endswith(b"\n"):
        data += b"\n"
    digest = hashlib.sha256(data).hexdigest()
    openssh = openssh_public_key(key.public_key())
    fields = {
        "algorithm": "ed25519",
        "format": PDF_FORMAT,
        "key_id": key_id(openssh),
        "public_key": openssh,
        "signature": base64.b64encode(key.sign(pdf_message(digest))).decode("ascii"),
    }
    line = json.dumps(fields, sort_keys=True, separators=(",", ":")).encode("ascii")
    return data + MARKER + line + b"\n"


def sign_pdf_file(path: Path, key: Ed25519PrivateKey) -> None:
    """Sign a PDF in place (written atomically)."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise DiagnosticError(f"{path}: cannot read it to sign it ({exc.strerror})") from None
    atomic_write_bytes(Path(path), sign_pdf(data, key))


def read_pdf_signature(data: bytes) -> PdfSignature | None:
    """The PDF's last signature line, or None when it has none; DiagnosticError when the line
    is there but cannot be read."""
    start = data.rfind(b"\n" + MARKER)
    if start < 0:
        return None
    start += 1
    end = data.find(b"\n", start)
    end = len(data) if end < 0 else end
    line = data[start + len(MARKER) : end]
    try:
        if len(line) > _MAX_LINE:
            raise ValueError("too long")
        fields = json.loads(line.decode("ascii"))
        if not isinstance(fields, dict) or fields.get("format") != PDF_FORMAT:
            raise ValueError(f"not {PDF_FORMAT}")
        found = PdfSignature(
            key_id=str(fields["key_id"]),
            public_key=str(fields["public_key"]),
            signature=str(fields["signature"]),
            signed_sha256=hashlib.sha256(data[:start]).hexdigest(),
            after=len(data) - min(end + 1, len(data)),
        )
    except (ValueError, KeyError, UnicodeDecodeError) as exc:
        raise DiagnosticError(f"its signature line cannot be read ({exc})") from None
    return found


def check_pdf_signature(found: PdfSignature, key: Ed25519PublicKey) -> str | None:
    """None when `found` signs the bytes before it with `key`; else why not, in words."""
    from cryptography.exceptions import InvalidSignature

    try:
        raw = base64.b64decode(found.signature, validate=True)
        key.verify(raw, pdf_message(found.signed_sha256))
    except (InvalidSignature, ValueError):
        return (
            f"the PDF's bytes are not those {found.key_id} signed: it was changed after it "
            "was signed (a page, an annotation, an attachment, its metadata)"
        )
    return None
