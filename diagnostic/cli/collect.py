"""`diagnose collect`: not built yet (issue #4)."""

from __future__ import annotations

import click

from diagnostic.errors import NotImplementedYet


@click.command("collect", context_settings={"ignore_unknown_options": True})
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def command(args: tuple[str, ...]) -> None:
    """Measure a running server's decode speed into a bundle.

    \b
    Example:
      diagnose collect http://127.0.0.1:8000 --out bundle --arm baseline
    """
    raise NotImplementedYet("`diagnose collect` is not implemented yet (issue #4)")
