"""build_report: bundle → analysis + check findings → ReportContext → HTML or PDF file."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Literal

from diagnostic import __version__
from diagnostic.analyse.core import analyse
from diagnostic.analyse.verify import ANALYSIS_FILE
from diagnostic.bundle.files import atomic_write_text
from diagnostic.bundle.seal import bundle_root
from diagnostic.bundle.signing import sign_root
from diagnostic.bundle.store import Bundle
from diagnostic.common.progress import NullReporter, Reporter
from diagnostic.errors import DiagnosticError
from diagnostic.logcheck.stage import FINDINGS_FILE, check_paths
from diagnostic.report.context import ReportContext, build_context
from diagnostic.report.inputs import Inputs
from diagnostic.report.render import render_html, render_pdf
from diagnostic.schema.analysis import Analysis
from diagnostic.schema.bundle import Engagement
from diagnostic.schema.logfacts import CheckReport
from diagnostic.schema.seal import DELIVERABLE_FILE, Deliverable, RootSignature

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

__all__ = [
    "ReportFormat",
    "build_report",
    "deliverable",
    "load_check",
    "report_context",
    "warnings",
]

ReportFormat = Literal["pdf", "html"]


def load_check(bundle: Bundle, reporter: Reporter | None = None) -> CheckReport | None:
    """check's report: findings.json as `diagnose check` stored it; when absent, check the
    bundle's server logs now (which stores findings.json). None when there is no usable log."""
    stored = bundle.read_json(FINDINGS_FILE, CheckReport)
    if stored is not None:
        return stored
    if not any(bundle.log_sources(r) for r in bundle.runs()):
        return None
    try:
        return check_paths([bundle.path], reporter=reporter)
    except (DiagnosticError, OSError) as exc:  # no engine log, or a read-only bundle
        (reporter or NullReporter()).note(f"server logs not checked: {exc}")
        return None


def report_context(
    bundle: Bundle,
    *,
    analysis: Analysis | None = None,
    check: CheckReport | None = None,
    engagement: Engagement | None = None,
    title: str | None = None,
    reporter: Reporter | None = None,
    signature: RootSignature | None = None,
) -> ReportContext:
    """Everything the report shows, formatted: analyses the bundle and reads (or makes)
    findings.json unless given them; `signature` (the root's) is printed with the root."""
    if analysis is None:
        analysis = analyse(bundle, title=title, client=engagement.client if engagement else None)
    if check is None:
        check = load_check(bundle, reporter)
    inputs = Inputs(
        analysis=analysis,
        bundle=bundle,
        check=check,
        engagement=engagement,
        title=title,
        signature=signature,
    )
    return build_context(inputs)


def warnings(ctx: ReportContext) -> list[str]:
    """What the report's reader must hear at once, also said on page 1: a bundle none of whose
    measured requests can be used, or that cannot say whether speculation pays (one arm, no
    speculative arm)."""
    return [w for w in (ctx.summary.unmeasured, ctx.summary.missing) if w]


def deliverable(
    bundle: Bundle,
    *,
    engagement: Engagement | None,
    title: str | None,
    signing_key: Ed25519PrivateKey | None = None,
) -> Deliverable:
    """What the report records about the bundle it is made from (its root, each run's seal,
    the options that changed its text) and, given a key, the root's signature."""
    root = bundle_root(bundle)
    m = bundle.manifest
    return Deliverable(
        tool_version=__version__,
        bundle=Path(bundle.path).name,
        bundle_id=m.bundle_id,
        bundle_created_at=m.created_at,
        root=root.digest,
        manifest_sha256=root.manifest_sha256,
        runs=root.runs,
        unsealed=list(root.unsealed),
        engagement=engagement,
        title=title,
        signature=sign_root(signing_key, root.digest) if signing_key is not None else None,
    )


def build_report(
    bundle_path: Path,
    out: Path,
    fmt: ReportFormat = "pdf",
    *,
    engagement: Engagement | None = None,
    title: str | None = None,
    reporter: Reporter | None = None,
    signing_key: Ed25519PrivateKey | None = None,
    analysis: Analysis | None = None,
) -> Path:
    """Render the bundle's report to `out` as a PDF or one self-contained HTML file.

    This is what `diagnose report BUNDLE -o OUT --format pdf|html` calls; it reads only the
    bundle (check's findings.json is made from the server logs when missing) and analyses it
    unless given its `analysis` (made with the same title and client). The PDF embeds the
    analysis it shows as the attachment analysis.json and what it was made from as
    deliverable.json (`diagnose verify` reads both); `signing_key` signs the root hash."""
    reporter = reporter or NullReporter()
    reporter.start("report", 3)
    bundle = Bundle.open(Path(bundle_path), strict=False)
    if analysis is None:
        client = engagement.client if engagement else None
        analysis = analyse(bundle, title=title, client=client)
    analysis_json = analysis.model_dump_json(indent=2) + "\n"  # as analyse made it
    made_from = deliverable(bundle, engagement=engagement, title=title, signing_key=signing_key)
    ctx = report_context(
        bundle,
        analysis=analysis,
        engagement=engagement,
        title=title,
        reporter=reporter,
        signature=made_from.signature,
    )
    reporter.advance("report", status="analysed")
    for warning in warnings(ctx):
        reporter.note(f"Warning: {warning}")
    html = render_html(ctx)
    reporter.advance("report", status="HTML rendered")
    if fmt == "html":
        atomic_write_text(Path(out), html)
    else:  # the PDF carries the analysis it shows, for `diagnose verify BUNDLE REPORT.pdf`
        record = made_from.model_dump_json(indent=2) + "\n"
        render_pdf(html, Path(out), {ANALYSIS_FILE: analysis_json, DELIVERABLE_FILE: record})
    reporter.advance("report", status=f"wrote {out}")
    return Path(out)
