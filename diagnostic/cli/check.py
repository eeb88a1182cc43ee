"""`diagnose check`: not built yet (issue #3)."""

from __future__ import annotations

import click

from diagnostic.errors import NotImplementedYet


@click.command("check", context_settings={"ignore_unknown_options": True})
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def command(args: tuple[str, ...]) -> None:
    """Read startup logs and report what the engine really resolved.

    \b
    Example:
      diagnose check bundle/
    """
    raise NotImplementedYet("`diagnose check` is not implemented yet (issue #3)")
