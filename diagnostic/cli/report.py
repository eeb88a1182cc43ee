"""`diagnose report`: not built yet (issue #7)."""

from __future__ import annotations

import click

from diagnostic.errors import NotImplementedYet


@click.command("report", context_settings={"ignore_unknown_options": True})
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def command(args: tuple[str, ...]) -> None:
    """Render a bundle into the client's report (PDF, HTML or JSON).

    \b
    Example:
      diagnose report bundle -o report.pdf
    """
    raise NotImplementedYet("`diagnose report` is not implemented yet (issue #7)")
