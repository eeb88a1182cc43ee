"""`diagnose sweep`: not built yet (issue #5)."""

from __future__ import annotations

import click

from diagnostic.errors import NotImplementedYet


@click.command("sweep", context_settings={"ignore_unknown_options": True})
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def command(args: tuple[str, ...]) -> None:
    """Restart the server per configuration, in interleaved blocks, from a plan.

    \b
    Example:
      diagnose sweep plan.toml --out bundle
    """
    raise NotImplementedYet("`diagnose sweep` is not implemented yet (issue #5)")
