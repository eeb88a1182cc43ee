"""The client's report: bundle → ReportContext → HTML (jinja2) and PDF (WeasyPrint).

By what the client sees: the cover and page 1 (`page_one/`), the contents' glance table
(`toc.py`), the chapters (`chapters/`), their charts (`charts/`); the view models they fill
(`views/`), put together in `context.py`; the CSV tables (`export.py`). Shared by all: the
formatting of every value (`fmt.py`), which comparisons a page speaks of (`select.py`), what
the report is built from (`inputs.py`), what a day on site allows (`budget.py`), launch
commands as they ran (`launch.py`). The templates mirror the names (`templates/report/`)."""

from diagnostic.report.build import build_report, report_context
from diagnostic.report.context import ReportContext
from diagnostic.report.render import render_html, render_pdf

__all__ = ["ReportContext", "build_report", "render_html", "render_pdf", "report_context"]
