"""The `diagnose` command line: the only layer that prints or exits."""

from __future__ import annotations

import sys
from typing import Any

import click

from diagnostic import __version__
from diagnostic.cli import check, checklist, collect, report, sweep, verify
from diagnostic.cli._common import console_err, print_labelled
from diagnostic.errors import DiagnosticError


class _Group(click.Group):
    """Maps DiagnosticError to `Error: <message>` and an exit code: no traceback for users."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except DiagnosticError as exc:
            print_labelled(console_err, "Error:", "bold red", str(exc))
            sys.exit(exc.exit_code)
        except KeyboardInterrupt:
            console_err.print("Interrupted; the bundle keeps every completed request (--resume).")
            sys.exit(130)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="diagnose")
def main() -> None:
    """Find out why speculative decoding does not speed up an LLM inference server.

    \b
    A day on site:
      diagnose collect   measure a running server (spec off and on) into a bundle
      diagnose sweep     restart the server per configuration (k sweep, A/A) into a bundle
      diagnose check     read the startup logs: what did the engine really resolve?
      diagnose report    the client's PDF (or HTML, JSON, CSV) from a bundle
      diagnose verify    a bundle against its seals, and does the report follow from it?
      diagnose checklist the consultant's checklist, evaluated against a bundle
    """


for _module in (collect, sweep, check, report, verify, checklist):
    main.add_command(_module.command)
