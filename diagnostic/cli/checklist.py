"""`diagnose checklist`: not built yet (issue #10)."""

from __future__ import annotations

import click

from diagnostic.errors import NotImplementedYet


@click.command("checklist", context_settings={"ignore_unknown_options": True})
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def command(args: tuple[str, ...]) -> None:
    """Show the consultant's checklist, evaluated against a bundle.

    \b
    Example:
      diagnose checklist bundle
    """
    raise NotImplementedYet("`diagnose checklist` is not implemented yet (issue #10)")
