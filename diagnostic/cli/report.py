"""`diagnose report`: the client's report of a bundle as PDF or HTML, or its analysis as JSON."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import click

from diagnostic.bundle.files import atomic_write_text
from diagnostic.bundle.store import Bundle
from diagnostic.cli._common import (
    RichReporter,
    console,
    engagement_from,
    engagement_options,
    output_option,
)
from diagnostic.common.files import writable_destination
from diagnostic.errors import DiagnosticError, NothingMeasured

if TYPE_CHECKING:
    from diagnostic.schema.analysis import Analysis

ANALYSIS_JSON = "analysis.json"
FORMATS = ("pdf", "html", "json", "csv")
_NAMES = "end -o with .pdf, .html, .json or .csv, or name a folder/ for the CSV tables"


def _format(fmt: str | None, out: str | None) -> str:
    """--format, else the one -o names (its suffix; a folder: csv), else pdf without -o; an -o
    naming no format, or another than --format, is refused with the list."""
    if out is None:
        return fmt or "pdf"
    path = Path(out)
    suffix = path.suffix.lower().lstrip(".")
    named = "csv" if out.endswith(("/", os.sep)) or path.is_dir() else suffix
    if named not in FORMATS:
        if fmt is None:
            raise DiagnosticError(
                f"{out}: the name says no format (.{suffix or '?'}); {_NAMES} (or add --format)"
            )
        return fmt
    if fmt is not None and fmt != named:
        raise DiagnosticError(f"{out}: the name says {named} but --format is {fmt}; {_NAMES}")
    return named


@click.command("report")
@click.argument("bundle", type=click.Path(path_type=Path))
@output_option(
    "Output file: .pdf, .html or .json (default: report.pdf / report.html here; json: "
    "BUNDLE/analysis.json); a folder for csv: requests.csv, restarts.csv and comparisons.csv "
    "(default: here).",
    path_type=str,
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(FORMATS),
    default=None,
    help="pdf, html, json or csv (default: from the -o name, else pdf).",
)
@engagement_options("overrides the bundle's")
@click.option("--title", default=None, help="Report title.")
@click.option(
    "--sign-key",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="Sign the PDF, byte for byte, and the bundle's root hash with this ed25519 private "
    "key (PEM or OpenSSH); the PDF carries the signatures and the public key, the key itself "
    "is stored nowhere.",
)
@click.option(
    "--sign-key-env",
    metavar="VAR",
    default=None,
    help="Sign with the ed25519 private key whose text the environment variable VAR holds.",
)
def command(
    bundle: Path,
    output: str | None,
    fmt: str | None,
    title: str | None,
    sign_key: Path | None,
    sign_key_env: str | None,
    **given: str | None,
) -> None:
    """Render a bundle into the client's report (PDF, HTML, JSON or CSV tables).

    Runs offline on the bundle only: per-arm decode tokens/s with restart-aware 95%
    intervals, speedup ratios with WIN/LOSS/EQUIVALENT/INCONCLUSIVE verdicts, the k sweep,
    acceptance and greedy output equivalence. The PDF embeds its analysis.json, so
    `diagnose verify BUNDLE report.pdf` can check it. --format csv writes tables into the
    folder -o names: requests.csv (every request record, with why it was excluded),
    restarts.csv (the restart summaries), comparisons.csv (ratios, intervals, verdicts) and,
    when the runs recorded telemetry, telemetry.csv (median and worst per run and window).

    The report prints the bundle's root hash (over every run's seal); --sign-key signs it and
    the PDF's bytes, and `diagnose verify BUNDLE report.pdf --key KEY.pub` checks both.

    \b
    Examples:
      diagnose report bundle --format json            # writes bundle/analysis.json
      diagnose report bundle -o analysis.json
      diagnose report bundle -o report.pdf --client "ACME"
      diagnose report bundle --format csv -o tables/   # tables/requests.csv, …
      diagnose report bundle -o report.pdf --sign-key ~/.keys/consultancy.pem

    Exit code: 0 written; 2 unusable input (no bundle, a bad -o); 3 written, but no measured
    request of the bundle can be used (every one failed): page 1 says so in a box, and there
    is no figure or verdict to read.
    """
    engagement = engagement_from(given)
    kind = _format(fmt, output)
    signing = sign_key is not None or sign_key_env is not None
    if signing and kind != "pdf":
        raise DiagnosticError("--sign-key signs the PDF deliverable: write a .pdf (-o report.pdf)")
    opened = Bundle.open(bundle, strict=False)  # a missing bundle fails before any bar is drawn
    default = {"csv": Path(), "json": bundle / ANALYSIS_JSON}.get(kind, Path(f"report.{kind}"))
    out = writable_destination(Path(output) if output else default, folder=kind == "csv")
    from diagnostic.analyse.core import analyse  # imported here: scipy loads slowly

    if kind in ("pdf", "html"):
        from diagnostic.bundle.signing import private_key
        from diagnostic.report import build_report  # imported here: WeasyPrint loads slowly

        key = private_key(path=sign_key, env=sign_key_env) if signing else None
        with RichReporter() as reporter:
            analysis = analyse(opened, title=title, client=engagement.client)
            written = [
                build_report(
                    bundle,
                    out,
                    "pdf" if kind == "pdf" else "html",
                    engagement=engagement,
                    title=title,
                    reporter=reporter,
                    analysis=analysis,
                    signing_key=key,
                )
            ]
        if key is not None:  # the PDF's bytes, once written: any change after this shows
            from diagnostic.bundle.pdfsign import sign_pdf_file

            sign_pdf_file(written[0], key)
    else:
        analysis = analyse(opened, title=title, client=engagement.client)
        written = (
            _tables(opened, analysis, out)
            if kind == "csv"
            else [_json(opened, analysis, out, output)]
        )
    for path in written:
        console.print(f"Wrote {path}", markup=False, highlight=False)
    _refuse_unmeasured(bundle, analysis)


def _tables(opened: Bundle, analysis: Analysis, out: Path) -> list[Path]:
    from diagnostic.report.export import write_csv  # imported here: pandas loads slowly

    return list(write_csv(opened, analysis, out))


def _json(opened: Bundle, analysis: Analysis, out: Path, output: str | None) -> Path:
    if output is None:
        return opened.write_json(ANALYSIS_JSON, analysis)
    atomic_write_text(out, analysis.model_dump_json(indent=2) + "\n")
    return out


def _refuse_unmeasured(bundle: Path, analysis: Analysis) -> None:
    """Exit 3 once written when no measured request can be used: the report's page 1 says so,
    and a script must not take the empty report for a result."""
    from diagnostic.report.page_one.unmeasured import nothing_measured

    if nothing_measured(analysis):
        raise NothingMeasured(
            f"{bundle}: none of its measured requests can be used ({analysis.failed_requests} "
            "failed): the report says so on page 1 and holds no figure or verdict; check the "
            "server, then collect again"
        )
