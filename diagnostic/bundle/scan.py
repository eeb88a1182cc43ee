"""Free text scanned for secrets, one line (or one string) at a time: first as the scanner
reads it (normalise: escapes, encodings and look-alike characters undone), a secret found there
masked in the text as written; then as written. The rules: textrules (names, known prefixes,
headers, signed URLs, base64), forms (URLs, command-line forms, schemes, reprs, PuTTY, the
entropy rule) and detector (detect-secrets)."""

from __future__ import annotations

from diagnostic.bundle.detector import mask_detected
from diagnostic.bundle.forms import redact_forms
from diagnostic.bundle.normalise import needs_reading, read
from diagnostic.bundle.textrules import MASK, mask_encoded_runs, redact_plain

__all__ = ["scan_line"]


def _rules(text: str) -> str:
    return mask_encoded_runs(mask_detected(redact_plain(redact_forms(text))))


def scan_line(text: str) -> str:
    """`text` (a line, or a string with no line structure to keep) with every secret masked."""
    if needs_reading(text):
        text = _mask_read(text)
    return _rules(text)


def _mask_read(text: str) -> str:
    """`text` with the secrets its reading shows masked where they are written."""
    reading = read(text)
    if reading.text == text:
        return text
    masked = _rules(reading.text)
    if masked == reading.text:
        return text
    spans = _masked_spans(reading.text, masked)
    if spans is None:  # the reading's masks cannot be placed: mask the whole text
        ending = text[len(text.rstrip("\r\n")) :]
        return MASK + ending
    for start, end in reversed(spans):
        a, b = reading.span(start, end)
        if a < b:
            text = text[:a] + MASK + text[b:]
    return text


def _masked_spans(original: str, masked: str) -> list[tuple[int, int]] | None:
    """Where in `original` the masks of `masked` (the original with some runs replaced by the
    mask) stand, as (start, end) spans; None when they cannot be placed."""
    pieces = masked.split(MASK)
    if not original.startswith(pieces[0]):
        return None
    spans: list[tuple[int, int]] = []
    at = len(pieces[0])
    for k, piece in enumerate(pieces[1:], start=1):
        if k == len(pieces) - 1:
            end = len(original) - len(piece)
            if end < at or not original.endswith(piece):
                return None
        elif not piece:
            continue  # two masks side by side: one span up to the next piece
        else:
            end = original.find(piece, at)
            if end < 0:
                return None
        spans.append((at, end))
        at = end + len(piece)
    return spans
