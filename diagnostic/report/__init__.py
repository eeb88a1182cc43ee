"""The client's report: bundle → ReportContext → HTML (jinja2) and PDF (WeasyPrint)."""

from diagnostic.report.build import build_report, report_context
from diagnostic.report.render import render_html, render_pdf
from diagnostic.report.view import ReportContext

__all__ = ["ReportContext", "build_report", "render_html", "render_pdf", "report_context"]
