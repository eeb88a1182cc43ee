"""A report PDF against its bundle: the root hash its pages print, the bundle it says it was made
from (deliverable.json), and its pages' text against the report re-rendered from the bundle."""

from __future__ import annotations

import difflib
import io
import json
import re
from dataclasses import dataclass
from pathlib import Path

from diagnostic.analyse.verify import ANALYSIS_FILE
from diagnostic.bundle.seal import Root
from diagnostic.bundle.store import Bundle
from diagnostic.errors import DiagnosticError
from diagnostic.schema.analysis import Analysis
from diagnostic.schema.bundle import Engagement
from diagnostic.schema.logfacts import CheckReport
from diagnostic.schema.seal import DELIVERABLE_FILE, Deliverable
from diagnostic.verify.outcome import Check

__all__ = ["PdfReport", "Rendered", "check_pages", "check_root", "read_pdf", "rerender"]

ROOT_LABEL = "Bundle root hash (sha256)"
LEGACY_LABEL = "Bundle hash (sha256)"  # reports rendered before seals: Bundle.content_hash
_SHOWN = 90  # characters of a differing line shown on each side


@dataclass
class PdfReport:
    """What verify reads from a report PDF: each page's text and what it says it came from."""

    path: Path
    pages: list[str]
    made_from: Deliverable | None  # deliverable.json; None in reports rendered before seals
    data: bytes = b""  # the file's bytes

    def printed(self, label: str) -> tuple[int, str] | None:
        """(page, value) of the environment row `label`, as the text layer reads it."""
        pattern = re.compile(re.escape(label) + r"[ \t]+(\S+)")
        for number, text in enumerate(self.pages, start=1):
            found = pattern.search(text)
            if found:
                return number, found[1]
        return None


def read_pdf(path: Path, *, text: bool = True) -> PdfReport:
    """The text of every page (pypdf; none without `text`) and the deliverable.json the PDF
    embeds, if any."""
    from pypdf import PdfReader  # imported here: only a PDF needs it
    from pypdf.errors import PyPdfError

    try:
        data = Path(path).read_bytes()
        # A signed PDF is read as signed: what follows its signature line is a change the
        # signature check names, whatever a PDF reader would make of it.
        cut = data.rfind(b"\n%diagnose-signature ")
        reader = PdfReader(io.BytesIO(data[: cut + 1] if cut >= 0 else data))
        pages = [page.extract_text() or "" for page in reader.pages] if text else []
        found = reader.attachments.get(DELIVERABLE_FILE, [])
    except (PyPdfError, ValueError, KeyError, TypeError, OSError, RecursionError) as exc:
        raise DiagnosticError(f"{path}: not a readable PDF ({exc})") from None
    made_from = None
    if len(found) == 1:
        try:
            made_from = Deliverable.model_validate(json.loads(found[0]))
        except ValueError as exc:
            raise DiagnosticError(f"{path}: its {DELIVERABLE_FILE} is damaged ({exc})") from None
    return PdfReport(Path(path), pages, made_from, data)


def _identity(pdf: PdfReport) -> tuple[str | None, str | None]:
    """The bundle id and creation time the PDF names (its record, else its printed rows)."""
    if pdf.made_from is not None:
        return pdf.made_from.bundle_id, pdf.made_from.bundle_created_at
    bundle_id, created = pdf.printed("Bundle id"), pdf.printed("Bundle created")
    return (bundle_id[1] if bundle_id else None), (created[1] if created else None)


def _another_bundle(pdf: PdfReport, bundle: Bundle) -> str | None:
    """Why the PDF was made from another bundle, when what it names is not this bundle."""
    pdf_id, pdf_created = _identity(pdf)
    m = bundle.manifest
    if pdf_id and m.bundle_id and pdf_id != m.bundle_id:
        return f"it names bundle {pdf_id}; {bundle.path} is bundle {m.bundle_id}"
    if pdf_created and m.created_at and pdf_created != m.created_at:
        return f"its bundle was created {pdf_created}; {bundle.path} was created {m.created_at}"
    return None


def _changed_runs(made_from: Deliverable, root: Root) -> list[str]:
    """The runs whose seal differs between the bundle the PDF was made from and this one."""
    then, now = made_from.runs, root.runs
    out = [
        f"runs/{rid}: seal {then[rid]} in the report, {now[rid]} in the bundle"
        for rid in sorted(set(then) & set(now))
        if then[rid] != now[rid]
    ]
    out += [
        f"runs/{rid}: in the report's bundle, not in this one"
        for rid in sorted(set(then) - set(now))
        if rid in made_from.unsealed  # a sealed one is named by _lost_runs
    ]
    out += [
        f"runs/{rid}: in this bundle, not in the report's" for rid in sorted(set(now) - set(then))
    ]
    if made_from.manifest_sha256 != root.manifest_sha256:
        out.append("manifest.json: differs from the one the report was made from")
    return out


def check_root(pdf: PdfReport, bundle: Bundle, root: Root, *, seals_hold: bool) -> Check:
    """The root hash the pages print against this bundle's; the PDF from another bundle said
    as such; the PDF's own record (deliverable.json) against its pages."""
    printed = pdf.printed(ROOT_LABEL)
    now, label = root.digest, ROOT_LABEL
    if printed is None and (legacy := pdf.printed(LEGACY_LABEL)) is not None:
        printed, now, label = legacy, bundle.content_hash(), LEGACY_LABEL
    if printed is None:
        return Check.failed(
            "root",
            "deliverable",
            f"{pdf.path} prints no bundle hash",
            [
                f"{pdf.path}: no "
                f"'{ROOT_LABEL}' row on any page: not a diagnose report, or its pages were replaced"
            ],
        )
    page, value = printed
    problems = []
    made_from = pdf.made_from
    if made_from is not None and label == ROOT_LABEL and made_from.root != value:
        problems.append(
            f"{DELIVERABLE_FILE}: names root {made_from.root}, the pages print {value}: the "
            "attachment and the pages come from different bundles (forged pages?)"
        )
    if value == now and not problems:
        return Check("root", "ok", f"the root hash printed on page {page} is this bundle's ({now})")
    if value == now:
        return Check.failed(
            "root", "deliverable", "the PDF's record disagrees with its pages", problems
        )
    other = _another_bundle(pdf, bundle)
    if other is not None:
        summary = f"the PDF came from another bundle: {other}"
        problems.insert(0, f"page {page} prints root {value}; {bundle.path} has root {now}")
        return Check.failed("root", "another-bundle", summary, problems)
    why = (
        "this bundle's files match their seals, so the pages were made from a modified copy "
        "of it (or the bundle was changed and sealed again: compare the seals noted on site)"
        if seals_hold
        else "the bundle changed after the report was made (see seals), or the pages come "
        "from a modified copy of it"
    )
    problems.insert(0, f"page {page} prints root {value}; {bundle.path} has root {now}: {why}")
    if made_from is not None and made_from.root == value:
        lost = _lost_runs(made_from, root)
        problems += lost + _changed_runs(made_from, root)
        if lost:
            summary = (
                f"this bundle holds {len(lost)} sealed runs fewer than the one the report was "
                "made from: rolled back to an earlier copy, or runs removed"
            )
            return Check.failed("root", "integrity", summary, problems)
    summary = "the PDF's pages were made from another state of this bundle"
    return Check.failed("root", "deliverable", summary, problems)


def _lost_runs(made_from: Deliverable, root: Root) -> list[str]:
    """The runs sealed in the bundle the report was made from that this bundle lacks, or holds
    without a seal (a copy taken before they ended, or the runs deleted)."""
    then = set(made_from.runs) - set(made_from.unsealed)
    now = set(root.runs) - set(root.unsealed)
    return [
        f"runs/{rid}: sealed in the bundle the report was made from, "
        + ("unsealed here" if rid in root.runs else "absent here")
        for rid in sorted(then - now)
    ]


@dataclass
class Rendered:
    """The report rendered again from the bundle: its bytes and each page's text."""

    pdf: bytes
    pages: list[str]


def rerender(
    bundle: Bundle,
    analysis: Analysis,
    check: CheckReport | None,
    made_from: Deliverable | None,
) -> Rendered:
    """The report rendered from `bundle` now, with the options the PDF records (client, site,
    consultant, title, signature): what its pages and their drawing must be."""
    from pypdf import PdfReader

    from diagnostic.common.pdf import html_to_pdf  # imported here: WeasyPrint loads slowly
    from diagnostic.report.build import report_context
    from diagnostic.report.render import render_html, report_templates

    engagement = made_from.engagement if made_from else Engagement(client=analysis.client)
    ctx = report_context(
        bundle,
        analysis=analysis,
        check=check,
        engagement=engagement,
        title=made_from.title if made_from else analysis.title,
        signature=made_from.signature if made_from else None,
    )
    attachments = {
        ANALYSIS_FILE: analysis.model_dump_json(indent=2) + "\n",
        DELIVERABLE_FILE: _record(bundle, engagement, made_from, analysis.title),
    }
    pdf = html_to_pdf(render_html(ctx), report_templates(), attachments)
    return Rendered(pdf, [page.extract_text() or "" for page in PdfReader(io.BytesIO(pdf)).pages])


def _record(
    bundle: Bundle, engagement: Engagement | None, made_from: Deliverable | None, title: str | None
) -> str:
    """deliverable.json as the report would record it from the bundle now (the folder's name
    and the signature, which needs the key, as the PDF recorded them)."""
    from diagnostic.report.build import deliverable

    record = deliverable(bundle, engagement=engagement, title=title)
    if made_from is not None:
        same = {"bundle": made_from.bundle, "signature": made_from.signature}
        record = record.model_copy(update={"title": made_from.title, **same})
    return record.model_dump_json(indent=2) + "\n"


def _lines(text: str) -> list[str]:
    return [" ".join(line.split()) for line in text.splitlines() if line.strip()]


def _excerpt(a: str, b: str) -> tuple[str, str]:
    """Both sides around where they first differ."""
    pairs = enumerate(zip(a, b, strict=False))
    k = next((i for i, (x, y) in pairs if x != y), min(len(a), len(b)))
    start = max(0, k - _SHOWN // 3)
    return _cut(a, start), _cut(b, start)


def _cut(text: str, start: int) -> str:
    end = start + _SHOWN
    return ("…" if start else "") + text[start:end] + ("…" if len(text) > end else "")


def _page_problems(number: int, given: str, expected: str) -> list[str]:
    a, b = _lines(given), _lines(expected)
    out = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        x, y = _excerpt(" / ".join(a[i1:i2]), " / ".join(b[j1:j2]))
        out.append(f"page {number}: the PDF reads {x!r}, the bundle gives {y!r}")
    return out


def check_pages(pdf: PdfReport, expected: list[str]) -> Check:
    """Each page's text against the report re-rendered from the bundle (by this version)."""
    problems = []
    if len(pdf.pages) != len(expected):
        problems.append(
            f"{pdf.path} has {len(pdf.pages)} pages, the report re-rendered from the bundle "
            f"{len(expected)}"
        )
    for number, (given, wanted) in enumerate(zip(pdf.pages, expected, strict=False), start=1):
        problems += _page_problems(number, given, wanted)
    if problems:
        summary = (
            f"the text of {pdf.path} differs from the report re-rendered from the bundle: its "
            "pages do not show what the bundle gives"
        )
        return Check.failed("pages", "deliverable", summary, problems)
    return Check(
        "pages",
        "ok",
        f"all {len(expected)} pages read as the report re-rendered from the bundle",
    )
