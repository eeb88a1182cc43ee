"""`diagnose report`: the client's report of a bundle as PDF or HTML, or its analysis as JSON."""

from __future__ import annotations

from pathlib import Path

import click

from diagnostic.bundle.store import Bundle, atomic_write_text
from diagnostic.cli._common import RichReporter, console, engagement_from, engagement_options

ANALYSIS_JSON = "analysis.json"
FORMATS = ("pdf", "html", "json", "csv")


def _format(fmt: str | None, out: Path | None) -> str:
    if fmt:
        return fmt
    suffix = out.suffix.lower().lstrip(".") if out else ""
    return suffix if suffix in FORMATS else "pdf"


@click.command("report")
@click.argument("bundle", type=click.Path(path_type=Path))
@click.option(
    "-o",
    "--out",
    type=click.Path(path_type=Path),
    default=None,
    help="Output file (default: report.pdf / report.html here; json: BUNDLE/analysis.json); "
    "csv: the folder for requests.csv, restarts.csv and comparisons.csv (default: here).",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(FORMATS),
    default=None,
    help="pdf, html, json or csv (default: from the -o suffix, else pdf).",
)
@engagement_options("overrides the bundle's")
@click.option("--title", default=None, help="Report title.")
def command(
    bundle: Path, out: Path | None, fmt: str | None, title: str | None, **given: str | None
) -> None:
    """Render a bundle into the client's report (PDF, HTML, JSON or CSV tables).

    Runs offline on the bundle only: per-arm decode tokens/s with restart-aware 95%
    intervals, speedup ratios with WIN/LOSS/EQUIVALENT/INCONCLUSIVE verdicts, the k sweep,
    acceptance and greedy output equivalence. The PDF embeds its analysis.json, so
    `diagnose verify BUNDLE report.pdf` can check it. --format csv writes three tables into
    the folder -o names: requests.csv (every request record, with why it was excluded),
    restarts.csv (the restart summaries) and comparisons.csv (ratios, intervals, verdicts).

    \b
    Examples:
      diagnose report bundle --format json            # writes bundle/analysis.json
      diagnose report bundle -o analysis.json
      diagnose report bundle -o report.pdf --client "ACME"
      diagnose report bundle --format csv -o tables/   # tables/requests.csv, …
    """
    engagement = engagement_from(given)
    kind = _format(fmt, out)
    if kind in ("pdf", "html"):
        from diagnostic.report import build_report  # imported here: WeasyPrint loads slowly

        with RichReporter() as reporter:
            path = build_report(
                bundle,
                out or Path(f"report.{kind}"),
                "pdf" if kind == "pdf" else "html",
                engagement=engagement,
                title=title,
                reporter=reporter,
            )
        console.print(f"Wrote {path}", markup=False, highlight=False)
        return
    from diagnostic.analyse.core import analyse  # imported here: scipy loads slowly

    opened = Bundle.open(bundle, strict=False)
    analysis = analyse(opened, title=title, client=engagement.client)
    if kind == "csv":
        from diagnostic.report.export import write_csv  # imported here: pandas loads slowly

        for written in write_csv(opened, analysis, out or Path()):
            console.print(f"Wrote {written}", markup=False, highlight=False)
        return
    if out is None:
        path = opened.write_json(ANALYSIS_JSON, analysis)
    else:
        path = out
        atomic_write_text(path, analysis.model_dump_json(indent=2) + "\n")
    console.print(f"Wrote {path}", markup=False, highlight=False)
