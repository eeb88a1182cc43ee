"""`diagnose verify`: a bundle's integrity (seals, schedule) and its deliverable's consistency
(findings, analysis, a report PDF's root hash, pages and signature), each check named."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from diagnostic import __version__
from diagnostic.analyse.verify import ANALYSIS_FILE, compare, load_stored
from diagnostic.bundle.redact import redact_json
from diagnostic.bundle.seal import bundle_root
from diagnostic.bundle.store import Bundle
from diagnostic.common.progress import NullReporter, Reporter
from diagnostic.errors import DiagnosticError
from diagnostic.logcheck.stage import FINDINGS_FILE
from diagnostic.schema.analysis import Analysis
from diagnostic.schema.logfacts import CheckReport
from diagnostic.verify.document import check_document
from diagnostic.verify.findings import check_findings, recompute_findings
from diagnostic.verify.integrity import check_seals
from diagnostic.verify.outcome import Check, VerifyReport
from diagnostic.verify.pages import check_pages, check_root, read_pdf, rerender
from diagnostic.verify.schedule import check_schedule
from diagnostic.verify.signature import check_report_signature

__all__ = ["check_report_signature", "verify_bundle"]

STEPS = 5  # the reporter's steps: integrity, findings, analysis, root, pages and document


def _is_pdf(path: Path) -> bool:
    try:
        with open(path, "rb") as fh:
            return fh.read(5) == b"%PDF-"
    except OSError as exc:
        raise DiagnosticError(f"{path}: cannot read it ({exc.strerror or exc})") from None


def _analysis(bundle: Bundle, stored: dict[str, Any]) -> Analysis:
    """The analysis of the bundle now, made with the stored title and client (inputs of
    `report`, not figures), and the stored identity fields that differ between two runs."""
    from diagnostic.analyse.core import analyse  # imported here: scipy loads slowly

    title, client = stored.get("title"), stored.get("client")
    analysis = analyse(
        bundle,
        title=title if isinstance(title, str) else None,
        client=client if isinstance(client, str) else None,
    )
    same = {
        k: stored[k]
        for k in ("created_at", "tool_version", "bundle")
        if isinstance(stored.get(k), str)
    }
    return analysis.model_copy(update=same)


def _check_analysis(stored_path: Path, stored: dict[str, Any], analysis: Analysis) -> Check:
    recomputed = json.loads(analysis.model_dump_json())
    result = compare(stored, recomputed)
    if not result.ok:  # an analysis.json the bundle wrote passed its redaction (texts only)
        gated = compare(stored, redact_json(recomputed))
        result = gated if len(gated.differences) < len(result.differences) else result
    what = f"{stored_path}" + (" (its analysis.json)" if _is_pdf(stored_path) else "")
    if result.ok:
        return Check(
            "analysis",
            "ok",
            f"all {result.compared} figures of {what} equal the analysis recomputed from the "
            "bundle (numbers within a relative 1e-9)",
        )
    summary = (
        f"{len(result.differences)} of {result.compared} figures of {what} differ from the "
        "analysis recomputed from the bundle"
    )
    return Check.failed("analysis", "deliverable", summary, [str(d) for d in result.differences])


def verify_bundle(
    bundle_path: Path,
    stored_path: Path | None = None,
    *,
    public_key: Path | None = None,
    reporter: Reporter | None = None,
) -> VerifyReport:
    """Check a bundle and, when given (or BUNDLE/analysis.json is there), what was made from it.

    The bundle: every file against its run's seal, the manifest against its own, every planned
    run present or its absence explained, findings.json against the findings of the logs. The
    deliverable: a report PDF's printed root hash against the bundle's (a PDF of another bundle
    said as such), its signatures (bytes and root) against `public_key`, its embedded
    analysis.json against the analysis recomputed from the raw files, its pages' text and
    drawing against the report re-rendered from the bundle; or an analysis.json's figures.
    Reads only: nothing is written into the bundle."""
    reporter = reporter or NullReporter()
    bundle = Bundle.open(Path(bundle_path), strict=False)
    if public_key is not None and (stored_path is None or not _is_pdf(stored_path)):
        raise DiagnosticError(
            f"--key checks the signatures a report PDF carries: give it, e.g. "
            f"`diagnose verify {bundle_path} report.pdf --key {public_key}`"
        )
    reporter.start("verify", STEPS)
    runs = bundle.runs()
    report = VerifyReport(bundle.path, bundle_root(bundle, runs), stored_path)
    seals = check_seals(bundle, runs)
    report.checks += [seals, check_schedule(bundle, runs)]
    reporter.advance("verify", status="seals and schedule checked")
    findings = _Findings(bundle)
    if (bundle.path / FINDINGS_FILE).is_file():
        report.checks.append(check_findings(bundle, findings.get()))
    else:
        report.checks.append(check_findings(bundle, None))
    reporter.advance("verify", status="findings recomputed")
    if stored_path is None and (bundle.path / ANALYSIS_FILE).is_file():
        stored_path = report.stored = bundle.path / ANALYSIS_FILE
    if stored_path is None:
        report.checks.append(
            Check("analysis", "skipped", f"no {ANALYSIS_FILE} in the bundle and no report given")
        )
        return report
    _deliverable(report, bundle, Path(stored_path), findings, public_key, seals, reporter)
    return report


class _Findings:
    """check's findings of the bundle's logs, recomputed once and only when needed."""

    def __init__(self, bundle: Bundle) -> None:
        self.bundle = bundle
        self._done = False
        self._found: CheckReport | None = None

    def get(self) -> CheckReport | None:
        """The findings (None when no log can be read)."""
        if not self._done:
            self._found, self._done = recompute_findings(self.bundle), True
        return self._found


def _deliverable(
    report: VerifyReport,
    bundle: Bundle,
    path: Path,
    findings: _Findings,
    public_key: Path | None,
    seals: Check,
    reporter: Reporter,
) -> None:
    """The checks of what was made from the bundle: a PDF, or an analysis.json."""
    stored = load_stored(path)
    pdf = read_pdf(path) if _is_pdf(path) else None
    if pdf is not None:
        root = check_root(pdf, bundle, report.root, seals_hold=seals.status != "failed")
        report.checks.append(root)
        reporter.advance("verify", status="root hash compared")
        if root.fault == "another-bundle":  # nothing else of it can follow from this bundle
            report.checks.append(
                Check("analysis", "skipped", "the PDF belongs to another bundle: not compared")
            )
            return
        signature = check_report_signature(pdf, public_key)
        if signature is not None:
            report.checks.append(signature)
        if signature is not None and signature.status == "ok" and root.status == "failed":
            _signed_root(root)  # the signed report stands; the bundle is not the one it signed
            report.checks.append(
                Check("analysis", "skipped", "the bundle is not the one signed: not compared")
            )
            return
    analysis = _analysis(bundle, stored)
    report.checks.append(_check_analysis(path, stored, analysis))
    reporter.advance("verify", status="analysis recomputed")
    if pdf is None:
        return
    rendered_by = pdf.made_from.tool_version if pdf.made_from else stored.get("tool_version")
    if isinstance(rendered_by, str) and rendered_by != __version__:
        report.checks.append(
            Check(
                "pages",
                "skipped",
                f"rendered by diagnose {rendered_by}, this is {__version__}: pages compare "
                f"only with the same version (pip install diagnose=={rendered_by})",
            )
        )
    else:
        rendered = rerender(bundle, analysis, findings.get(), pdf.made_from)
        report.checks.append(check_pages(pdf, rendered.pages))
        report.checks.append(check_document(pdf.data, rendered.pdf, path=str(pdf.path)))
    reporter.advance("verify", status="pages compared")


def _signed_root(root: Check) -> None:
    """With the consultancy's key checked, the root the report signs is what was measured: a
    bundle whose root differs is not the bundle that was signed (changed, sealed again or
    rolled back since), a fault of the bundle, not of the report."""
    root.fault = "integrity"
    if "fewer than the one the report was made from" not in root.summary:
        root.summary = (
            "this bundle is not the one the consultancy signed: its root differs from the "
            "signed root (changed and sealed again, rolled back, or runs replaced)"
        )
