"""A report PDF's objects against those of the report re-rendered from its bundle: each page's
drawing (content streams, with the forms and images they paint), its annotations and boxes, the
attachments, the document information (Title, Author, …) and the catalog (actions, forms,
XMP), and the file's end (bytes after %%EOF, incremental updates). The pages check compares
what the text layer reads; this one what is drawn and carried besides it: a white rectangle
over a figure, a figure removed, a FreeText annotation, an extra attachment, a changed Title.

Each part is compared by a digest of its objects (references followed, /Parent left out,
another page named by its number); attachments' dates and checksums are not compared (they
are those of the moment of rendering), nor the bytes of analysis.json (the analysis check
compares its figures). It needs the same rendering as the report's: the same diagnose, whose
pages check it follows, and the same WeasyPrint, matplotlib and DejaVu fonts.
"""

from __future__ import annotations

import hashlib
import io
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from diagnostic.verify.outcome import Check

__all__ = ["Layout", "check_document", "layout"]

_DEPTH = 100  # objects nested deeper than this are no report's
_DATES = {"/CreationDate", "/ModDate", "/CheckSum"}  # an attachment's, of the moment of rendering
_SKIPPED_ATTACHMENTS = {"analysis.json"}  # compared figure by figure by the analysis check
_SIGNATURE = b"\n%diagnose-signature "


class _TooDeep(Exception):
    pass


@dataclass
class Layout:
    """The parts of a PDF by name, each with a digest, and what explains a difference."""

    parts: dict[str, str] = field(default_factory=dict)
    explain: dict[str, Any] = field(default_factory=dict)
    revisions: int = 1
    trailing: int = 0
    problem: str | None = None


def _tail(data: bytes) -> tuple[int, int]:
    """(revisions, bytes after the last %%EOF), the signature line of a signed PDF aside."""
    cut = data.rfind(_SIGNATURE)
    body = data[: cut + 1] if cut >= 0 else data
    end = body.rfind(b"%%EOF")
    trailing = len(body[end + 5 :].strip()) if end >= 0 else len(body)
    return body.count(b"startxref"), trailing


class _Hasher:
    def __init__(self, pages: dict[tuple[int, int], int]) -> None:
        self.pages = pages
        self.memo: dict[tuple[int, int], str] = {}
        self.busy: set[tuple[int, int]] = set()

    def digest(self, obj: Any, depth: int = 0) -> str:
        from pypdf.generic import ArrayObject, DictionaryObject, IndirectObject, StreamObject

        if depth > _DEPTH:
            raise _TooDeep
        if isinstance(obj, IndirectObject):
            ref = (obj.idnum, obj.generation)
            if ref in self.pages and depth:
                return f"page {self.pages[ref]}"
            if ref in self.memo:
                return self.memo[ref]
            if ref in self.busy:
                return "cycle"
            self.busy.add(ref)
            found = self.digest(obj.get_object(), depth + 1)
            self.busy.discard(ref)
            self.memo[ref] = found
            return found
        h = hashlib.sha256(type(obj).__name__.encode())
        if isinstance(obj, DictionaryObject):
            attachment = obj.get("/Type") == "/EmbeddedFile"
            for key in sorted(obj):
                if key == "/Parent" or (attachment and key == "/Params"):
                    continue
                h.update(f"{key}={self.digest(obj[key], depth + 1)};".encode())
            params = obj.get("/Params") if attachment else None
            params = params.get_object() if params is not None else None
            if isinstance(params, DictionaryObject):
                for key in sorted(k for k in params if k not in _DATES):
                    h.update(f"{key}={self.digest(params[key], depth + 1)};".encode())
            if isinstance(obj, StreamObject):
                h.update(_stream_bytes(obj))
        elif isinstance(obj, ArrayObject):
            for item in obj:
                h.update(self.digest(item, depth + 1).encode() + b",")
        else:
            h.update(repr(obj).encode("utf-8", "backslashreplace"))
        return h.hexdigest()


def _stream_bytes(stream: Any) -> bytes:
    try:
        data = stream.get_data()
    except Exception:  # a filter pypdf cannot undo: its encoded bytes stand for it
        data = getattr(stream, "_data", b"")
    return data if isinstance(data, bytes) else str(data).encode()


def _attachments(root: Any) -> Iterator[tuple[str, Any]]:
    names = root.get("/Names", {}).get_object().get("/EmbeddedFiles")
    if names is None:
        return
    pairs = names.get_object().get("/Names", [])
    for i in range(0, len(pairs) - 1, 2):
        yield str(pairs[i]), pairs[i + 1]


def layout(data: bytes) -> Layout:
    """The parts of a PDF and their digests (a PDF that cannot be read says why)."""
    from pypdf import PdfReader

    found = Layout()
    found.revisions, found.trailing = _tail(data)
    try:
        reader = PdfReader(io.BytesIO(data))
        pages = {
            (p.indirect_reference.idnum, p.indirect_reference.generation): n
            for n, p in enumerate(reader.pages, start=1)
            if p.indirect_reference is not None
        }
        hasher = _Hasher(pages)
        _parts(reader, hasher, found)
    except _TooDeep:
        found.problem = f"objects nested more than {_DEPTH} deep: not a report diagnose renders"
    except Exception as exc:  # a hostile PDF: whatever pypdf raises is no traceback here
        found.problem = f"its objects cannot be read ({type(exc).__name__}: {exc})"
    return found


def _parts(reader: Any, hasher: _Hasher, found: Layout) -> None:
    info = reader.trailer.get("/Info")
    found.parts["document information"] = hasher.digest(info) if info is not None else "none"
    found.explain["document information"] = {
        str(k): str(v) for k, v in (info.get_object() if info is not None else {}).items()
    }
    root = reader.trailer["/Root"].get_object()
    for key in sorted(root):
        if key not in ("/Pages", "/Names", "/Type", "/Outlines"):
            found.parts[f"catalog {key}"] = hasher.digest(root[key], 1)
    if "/Outlines" in root:  # a linked list as long as the headings: read as pypdf nests it
        found.parts["bookmarks"] = _outline(reader, reader.outline)
    for key, value in sorted(root.get("/Names", {}).get_object().items()):
        if key != "/EmbeddedFiles":
            found.parts[f"catalog /Names {key}"] = hasher.digest(value, 1)
    for name, spec in _attachments(root):
        skip = name in _SKIPPED_ATTACHMENTS
        found.parts[f"attachment {name}"] = "present" if skip else hasher.digest(spec, 1)
    for number, page in enumerate(reader.pages, start=1):
        where = f"page {number}"
        drawing = [page.get("/Contents"), page.get("/Resources")]
        found.parts[f"{where} drawing"] = hasher.digest(_array(drawing), 1)
        found.explain[f"{where} drawing"] = page
        annots = page.get("/Annots")
        found.parts[f"{where} annotations"] = hasher.digest(annots, 1) if annots else "none"
        found.explain[f"{where} annotations"] = _annotations(annots)
        for key in sorted(page):
            if key not in ("/Parent", "/Contents", "/Resources", "/Annots", "/Type"):
                found.parts[f"{where} {key}"] = hasher.digest(page[key], 1)


def _outline(reader: Any, items: list[Any], depth: int = 0) -> str:
    """Digest of the bookmarks: each one's title and page, nested as in the PDF."""
    if depth > _DEPTH:
        raise _TooDeep
    h = hashlib.sha256(b"outline")
    for item in items:
        if isinstance(item, list):
            h.update(_outline(reader, item, depth + 1).encode())
        else:
            page = reader.get_destination_page_number(item)
            h.update(f"{item.title!r}@{page};".encode("utf-8", "backslashreplace"))
    return h.hexdigest()


def _array(items: list[Any]) -> Any:
    from pypdf.generic import ArrayObject, NullObject

    return ArrayObject([NullObject() if i is None else i for i in items])


def _annotations(annots: Any) -> list[str]:
    out = []
    for ref in annots.get_object() if annots is not None else []:
        annot = ref.get_object()
        kind = str(annot.get("/Subtype", "?")).lstrip("/")
        text = annot.get("/Contents")
        out.append(f"{kind} {str(text)[:40]!r}" if text else kind)
    return out


def _operators(page: Any) -> Counter[str]:
    """Operators of a page's content stream, counted (what a difference in drawing is)."""
    from pypdf.generic import ContentStream

    try:
        contents = page.get_contents()
        ops = ContentStream(contents, page.pdf).operations if contents is not None else []
    except Exception:
        return Counter()
    return Counter(op.decode("latin-1") for _, op in ops)


def _counted(counts: Counter[str]) -> str:
    return ", ".join(f"{op} ×{n}" for op, n in counts.most_common(6)) or "none"


def _why(part: str, given: Layout, wanted: Layout) -> str:
    if part not in wanted.parts:
        return f"{part}: in the PDF, not in the report re-rendered from the bundle"
    if part not in given.parts:
        return f"{part}: in the report re-rendered from the bundle, not in the PDF"
    if part.endswith(" drawing"):
        a, b = _operators(given.explain[part]), _operators(wanted.explain[part])
        more, fewer = a - b, b - a
        return (
            f"{part}: differs from the report re-rendered from the bundle (operators the PDF "
            f"has more: {_counted(more)}; fewer: {_counted(fewer)})"
        )
    if part.endswith(" annotations"):
        return (
            f"{part}: the PDF has {given.explain.get(part) or 'none'}, the report re-rendered "
            f"from the bundle {wanted.explain.get(part) or 'none'}"
        )
    if part == "document information":
        a, b = given.explain[part], wanted.explain[part]
        keys = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
        said = "; ".join(f"{k}: {a.get(k)!r}, re-rendered {b.get(k)!r}" for k in keys[:4])
        return f"{part} (metadata) differs: {said}"
    return f"{part}: differs from the report re-rendered from the bundle"


def check_document(pdf: bytes, rendered: bytes, *, path: str) -> Check:
    """The PDF's parts against the re-rendered report's (the module docstring says which)."""
    given, wanted = layout(pdf), layout(rendered)
    problems = []
    if given.problem:
        problems.append(f"{path}: {given.problem}")
    if given.trailing:
        problems.append(
            f"{path}: {given.trailing} bytes after the end of the PDF (%%EOF): appended after "
            "it was rendered"
        )
    if given.revisions > wanted.revisions:
        problems.append(
            f"{path}: updated {given.revisions - wanted.revisions} times after it was rendered "
            "(incremental updates: objects added or replaced)"
        )
    if not given.problem:
        for part in sorted(set(given.parts) | set(wanted.parts)):
            if given.parts.get(part) != wanted.parts.get(part):
                problems.append(_why(part, given, wanted))
    if problems:
        summary = (
            f"{path} is not drawn as the report re-rendered from the bundle: something was "
            "drawn over, removed, annotated, attached or relabelled"
        )
        return Check.failed("document", "deliverable", summary, problems)
    return Check(
        "document",
        "ok",
        f"every page's drawing and annotations, the attachments and the metadata are the "
        f"report's re-rendered from the bundle ({len(wanted.parts)} parts)",
    )
