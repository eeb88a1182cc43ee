"""Render a ReportContext to HTML (jinja2) and HTML to PDF (WeasyPrint with a sandboxed fetcher)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup, escape

from diagnostic.bundle.redact import redact_text
from diagnostic.bundle.store import atomic_write_bytes
from diagnostic.common.resources import templates_dir
from diagnostic.errors import DiagnosticError
from diagnostic.report.view import ReportContext

__all__ = ["environment", "keep_names", "render_html", "render_pdf", "report_templates"]

BASE_TEMPLATE = "base.html.j2"


def report_templates() -> Path:
    """The folder of the report templates and print CSS."""
    return templates_dir() / "report"


def _redacted(value: Any) -> Any:
    """Every text the templates print, redacted first: a bundle a client sends was not made by
    diagnose's gate (its requests, logs or run.json may hold secrets). Markup comes only from
    `keep_names`, which redacts and escapes before it marks anything up."""
    if isinstance(value, Markup):
        return value
    return redact_text(value) if isinstance(value, str) else value


# A hyphenated name (an arm, a run: fa-ngram-k3, ngram-k3-eager-r1), not a --flag's tail.
_NAME = re.compile(r"(?<![\w&#;.-])[A-Za-z0-9][\w.+=]*(?:-[\w.+=]+)+")


def keep_names(value: Any) -> Markup:
    """Text, redacted and escaped, with each hyphenated name kept on one line (a line may
    break after a hyphen: 'fa-' here, 'ngram-k3' on the next line reads as two words)."""
    text = str(escape(redact_text(str(value))))
    return Markup(_NAME.sub(lambda m: f'<span class="nobr">{m.group()}</span>', text))


def environment() -> jinja2.Environment:
    """The jinja2 environment: every value redacted, then autoescaped; undefined names an
    error."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(report_templates()),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        finalize=_redacted,
    )
    env.filters["names"] = keep_names
    return env


def render_html(ctx: ReportContext) -> str:
    """The report as one self-contained HTML document (CSS inline, charts as data: URIs)."""
    try:
        return environment().get_template(BASE_TEMPLATE).render(ctx=ctx)
    except jinja2.TemplateError as exc:
        raise DiagnosticError(
            f"{report_templates()}: report template error ({exc}); reinstall diagnose"
        ) from exc


def render_pdf(html: str, out: Path, attachments: Mapping[str, str] | None = None) -> Path:
    """Write `html` to `out` as a PDF; WeasyPrint may read only the templates folder.
    `attachments` (name → text, e.g. the analysis.json the report shows) are embedded."""
    from diagnostic.common.pdf import html_to_pdf  # imported here: WeasyPrint is slow to load

    pdf = html_to_pdf(html, report_templates(), attachments)
    try:
        atomic_write_bytes(Path(out), pdf)
    except OSError as exc:
        raise DiagnosticError(f"{out}: cannot write the PDF ({exc}); check the folder") from None
    return Path(out)
