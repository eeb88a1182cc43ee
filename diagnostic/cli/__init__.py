"""The `diagnose` command line: the only layer that prints or exits."""

from __future__ import annotations

import difflib
import importlib
import sys
from typing import Any

import click

from diagnostic import __version__
from diagnostic.cli._common import canonical_hint, console_err, print_labelled
from diagnostic.errors import DiagnosticError

# The commands in the order of a day on site, each with the line `diagnose --help` shows. A
# command's module (and the stages it imports: scipy, pandas, WeasyPrint…) loads only when that
# command runs or shows its own help, so `diagnose --help` and every command start quickly.
COMMANDS = {
    "collect": "measure a running server (spec off and on) into a bundle",
    "sweep": "restart the server per configuration (k sweep, A/A) into a bundle",
    "check": "read the startup logs: what did the engine really resolve?",
    "plan": "the next sweep plan: the fixes of the findings, as found against after",
    "report": "the client's PDF (or HTML, JSON, CSV) from a bundle",
    "verify": "a bundle against its seals, and does the report follow from it?",
    "checklist": "the consultant's checklist, evaluated against a bundle",
}


class _Group(click.Group):
    """Loads each command's module on first use; maps DiagnosticError to `Error: <message>` and
    an exit code (no traceback for users); names options in error hints as --help does."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        """The commands, in the order of a day on site."""
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        """The command, its module imported now (None for an unknown name)."""
        if cmd_name not in COMMANDS:
            return None
        command = importlib.import_module(f"diagnostic.cli.{cmd_name}").command
        assert isinstance(command, click.Command)
        return command

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        """The command named by args[0]; an unknown name fails naming the closest command."""
        name = args[0] if args else ""
        if name and not name.startswith("-") and name not in COMMANDS:
            close = difflib.get_close_matches(name, COMMANDS, n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            ctx.fail(f"No such command {name!r}{hint}; the commands are {', '.join(COMMANDS)}.")
        return super().resolve_command(ctx, args)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The command list of --help, from COMMANDS: no command module is imported for it."""
        with formatter.section("Commands (a day on site, in order)"):
            formatter.write_dl(list(COMMANDS.items()))

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.NoSuchOption as exc:
            raise canonical_hint(exc) from None
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

    A day on site: `collect` (and `sweep`) against the client's server, `check` on its logs,
    `report` for the client's PDF. `diagnose COMMAND --help` shows a command's options and
    examples.
    """
