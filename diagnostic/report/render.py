"""Render a ReportContext to HTML (jinja2) and HTML to PDF (WeasyPrint with a sandboxed fetcher)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup, escape

from diagnostic.bundle.files import atomic_write_bytes
from diagnostic.bundle.redact import redact_attachment, redact_text
from diagnostic.common.resources import templates_dir
from diagnostic.errors import DiagnosticError
from diagnostic.report import fmt as f
from diagnostic.report.context import ReportContext

__all__ = [
    "breakable",
    "environment",
    "keep_names",
    "render_html",
    "render_pdf",
    "report_templates",
]

BASE_TEMPLATE = "base.html.j2"


def report_templates() -> Path:
    """The folder of the report templates and print CSS."""
    return templates_dir() / "report"


# A value that is only one of these is marked up: muted, and free to wrap between its words
# in a number cell that keeps a number on one line ('not measured' over a narrow column).
_ABSENT = frozenset({f.MISSING, f.NOT_RECORDED})


# A home directory of the recording machine (its user's name) is printed as ~.
_HOME = re.compile(r"(?<![\w.~-])(?:/home/[^/\s]+|/Users/[^/\s]+|/root)(?=/|\s|$|['\")\],;:])")


def printed(text: str) -> str:
    """A text as the report prints it: secrets redacted, home directories written as ~."""
    return _HOME.sub("~", redact_text(text))


def _redacted(value: Any) -> Any:
    """Every text the templates print, redacted first: a bundle a client sends was not made by
    diagnose's gate (its requests, logs or run.json may hold secrets). Markup comes only from
    `keep_names` and `breakable`, which redact and escape before they mark anything up, and
    for the fixed words of _ABSENT."""
    if isinstance(value, Markup):
        return value
    if value in _ABSENT:
        return Markup('<span class="missing">{}</span>').format(value)
    return printed(value) if isinstance(value, str) else value


# A hyphenated name (an arm, a run: fa-ngram-k3, ngram-k3-eager-r1), not a --flag's tail.
_NAME = re.compile(r"(?<![\w&#;.-])[A-Za-z0-9][\w.+=]*(?:-[\w.+=]+)+")


def keep_names(value: Any) -> Markup:
    """Text, redacted and escaped, with each hyphenated name kept on one line (a line may
    break after a hyphen: 'fa-' here, 'ngram-k3' on the next line reads as two words)."""
    text = str(escape(printed(str(value))))
    return Markup(_NAME.sub(lambda m: f'<span class="nobr">{m.group()}</span>', text))


# Where a path or identifier may break: after / _ always (no word holds them), and in a
# long token (over 20 characters: no word is that long, many paths and hashes are) also
# after = . , : ; & ? and, past those, every 20 characters. A hyphen breaks by itself.
_ALWAYS = re.compile(r"([/_]+)(?=.)")
_IN_LONG = re.compile(r"([/_=.,:;&?-]+)(?=.)")
_LONG = 20


def breakable(value: Any) -> Markup:
    """Text, redacted and escaped, where paths and identifiers may break at a <wbr> after
    their separators (see _ALWAYS and _IN_LONG) and words stay whole: the print CSS never
    breaks a word anywhere ('CHANG/ED', 'measure/d'), so a long token needs these."""
    out = []
    for part in re.split(r"(\s+)", printed(str(value))):
        pieces = (_IN_LONG if len(part) > _LONG else _ALWAYS).sub("\\1\0", part).split("\0")
        chunks = [p[i : i + _LONG] for p in pieces for i in range(0, len(p), _LONG)]
        out.append("<wbr>".join(str(escape(c)) for c in chunks))
    return Markup("".join(out))


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
    env.filters["breakable"] = breakable
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
    `attachments` (name → text, e.g. the analysis.json the report shows) are embedded,
    redacted as the bundle's files are (unchanged when they hold nothing to mask)."""
    from diagnostic.common.pdf import html_to_pdf  # imported here: WeasyPrint is slow to load

    if attachments is not None:
        attachments = {name: redact_attachment(text) for name, text in attachments.items()}
    pdf = html_to_pdf(html, report_templates(), attachments)
    try:
        atomic_write_bytes(Path(out), pdf)
    except OSError as exc:
        raise DiagnosticError(f"{out}: cannot write the PDF ({exc}); check the folder") from None
    return Path(out)
