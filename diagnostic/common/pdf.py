"""HTML to PDF with WeasyPrint, fetching only data: URIs and files inside one templates folder."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit
from urllib.request import url2pathname

from weasyprint import URLFetcher

from diagnostic.errors import DiagnosticError, RefusedURL

__all__ = ["SandboxedFetcher", "check_url", "html_to_pdf"]

log = logging.getLogger(__name__)


def check_url(url: str, root: Path) -> None:
    """Raise RefusedURL unless `url` is a data: URI or a file:// path to a file inside `root`."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme == "data":
        return
    if scheme == "file" and parts.netloc in ("", "localhost"):
        # resolve() follows symlinks and "..", so neither can step outside the folder.
        path = Path(url2pathname(unquote(parts.path))).resolve()
        if path.is_relative_to(root.resolve()) and path.is_file():
            return
    raise RefusedURL(f"refused to fetch {url!r}: the report may only use its own templates")


class SandboxedFetcher(URLFetcher):
    """Serves data: URIs and files under `root`; refuses http(s), ftp and every other file.

    Nothing in a client's bundle can then make the PDF read local files or reach the network.
    Refused URLs are kept in `refused` (WeasyPrint itself only logs a failed fetch).
    """

    def __init__(self, root: Path) -> None:
        super().__init__(allowed_protocols=("data", "file"), allow_redirects=False)
        self.root = Path(root).resolve()
        self.refused: list[str] = []

    def fetch(self, url: str, headers: Any = None) -> Any:
        """Fetch `url` if check_url allows it, else record and raise RefusedURL."""
        try:
            check_url(url, self.root)
        except RefusedURL:
            self.refused.append(url)
            log.warning("refused to fetch %s while rendering the report", url)
            raise
        return super().fetch(url, headers)


def html_to_pdf(html: str, root: Path, attachments: Mapping[str, str] | None = None) -> bytes:
    """Render `html` to PDF bytes; relative URLs resolve in `root`, the only folder readable.

    `attachments` (file name → text) are embedded as PDF file attachments; given as strings
    they fetch nothing."""
    try:  # imported here: WeasyPrint loads Pango, slow and absent on some hosts
        from weasyprint import HTML, Attachment
    except OSError as exc:
        raise DiagnosticError(
            f"WeasyPrint cannot load its system libraries ({exc}); install Pango "
            "(apt-get install libpango-1.0-0 libpangoft2-1.0-0) or use --format html"
        ) from None
    root = Path(root).resolve()
    fetcher = SandboxedFetcher(root)
    document = HTML(string=html, base_url=root.as_uri() + "/", url_fetcher=fetcher)
    files = [
        Attachment(string=text, name=name, url_fetcher=fetcher, relationship="Data")
        for name, text in (attachments or {}).items()
    ]
    pdf = document.write_pdf(presentational_hints=False, attachments=files)
    assert pdf is not None  # write_pdf without a target returns the bytes
    return bytes(pdf)
