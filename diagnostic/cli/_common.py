"""Shared CLI helpers: consoles, numeric options and the rich progress reporter."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from types import TracebackType
from typing import Any

import click
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text

from diagnostic.errors import DiagnosticError
from diagnostic.schema.bundle import Engagement

__all__ = [
    "RichReporter",
    "api_key_from_env",
    "api_key_option",
    "console",
    "console_err",
    "engagement_from",
    "engagement_options",
    "number_option",
    "output_option",
    "print_labelled",
]

console = Console()
console_err = Console(stderr=True)


def print_labelled(target: Console, label: str, style: str, message: str) -> None:
    """`label message` with the label styled and the message printed literally: it quotes user
    text (an arm named `[/red]x`, a plan location `[[arms]] #2`) that is never markup."""
    target.print(Text.assemble((label, style), " ", message), highlight=False, soft_wrap=True)


api_key_option = click.option(
    "--api-key-env", metavar="VAR", help="Environment variable holding the API key."
)


def api_key_from_env(var: str | None) -> str | None:
    """The API key held by environment variable `var` (the key itself is never an argument, so
    it stays out of shell history and of the bundle's recorded command line)."""
    if var is None:
        return None
    key = os.environ.get(var)
    if not key:
        raise DiagnosticError(f"--api-key-env {var}: the environment variable {var} is not set")
    return key


def engagement_options(where: str) -> Callable[[Any], Any]:
    """--client, --site and --consultant, gathered into one `engagement` argument (an
    Engagement with the fields given; `where` says what they override)."""

    def decorate(command: Any) -> Any:
        for flag, what in reversed(_ENGAGEMENT):
            command = click.option(flag, default=None, help=f"{what} on the report ({where}).")(
                command
            )
        return command

    return decorate


_ENGAGEMENT = (
    ("--client", "Client organisation"),
    ("--site", "Site or cluster"),
    ("--consultant", "Consultant"),
)


def engagement_from(options: dict[str, Any]) -> Engagement:
    """The Engagement of --client/--site/--consultant, popped from a command's options."""
    return Engagement(
        client=options.pop("client", None),
        site=options.pop("site", None),
        consultant=options.pop("consultant", None),
    )


def number_option(
    flag: str,
    default: float,
    minimum: float,
    help: str,
    dest: str | None = None,
    maximum: float | None = None,
) -> Callable[[Any], Any]:
    """A bounded int option (float when `default` is a float) that shows its default; a value
    past `maximum` (defaults.LIMIT_*) is refused naming the range."""
    kind = click.FloatRange if isinstance(default, float) else click.IntRange
    names = (flag, dest) if dest else (flag,)
    return click.option(
        *names, type=kind(min=minimum, max=maximum), default=default, show_default=True, help=help
    )


class _AliasedOption(click.Option):
    """An option whose old spellings still parse but stay out of --help and error hints."""

    def __init__(self, *args: Any, aliases: tuple[str, ...] = (), **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.aliases = aliases

    @contextlib.contextmanager
    def _shown(self) -> Iterator[None]:
        opts = self.opts
        self.opts = [o for o in opts if o not in self.aliases]
        try:
            yield
        finally:
            self.opts = opts

    def get_help_record(self, ctx: click.Context) -> tuple[str, str] | None:
        """The help line, without the aliases."""
        with self._shown():
            return super().get_help_record(ctx)

    def get_error_hint(self, ctx: click.Context | None) -> str:
        """How errors name the option, without the aliases."""
        with self._shown():
            return super().get_error_hint(ctx)


def output_option(
    help: str, *, required: bool = False, path_type: type[Any] = Path
) -> Callable[[Any], Any]:
    """`-o/--output PATH`, the one spelling of every command's output (bundle folder, report
    file, export); `--out`, the old spelling of collect, sweep and report, still parses."""
    return click.option(
        "-o",
        "--output",
        "--out",
        "output",
        cls=_AliasedOption,
        aliases=("--out",),
        type=click.Path(path_type=path_type),
        required=required,
        help=help,
    )


class RichReporter:
    """A Reporter drawing one progress bar per task (per run and workload) on stderr.

    Use as a context manager: the live display stops on exit, even on Ctrl-C.
    """

    def __init__(self, target: Console | None = None) -> None:
        self._progress = Progress(
            # Labels and statuses quote arm names and servers' errors: literal, never markup.
            TextColumn("{task.description}", style="bold", markup=False),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("eta"),
            TimeRemainingColumn(),
            TextColumn("{task.fields[status]}", markup=False),
            console=target or console_err,
            transient=False,
        )
        self._tasks: dict[str, TaskID] = {}

    def __enter__(self) -> RichReporter:
        self._progress.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._progress.stop()

    def start(self, label: str, total: int | None) -> None:
        """Add a bar for a task (a second start of the same label resets it)."""
        if label in self._tasks:
            self._progress.reset(self._tasks[label], total=total, status="")
            return
        self._tasks[label] = self._progress.add_task(label, total=total, status="")

    def advance(self, label: str, steps: int = 1, status: str | None = None) -> None:
        """Move a bar on; `status` replaces the text after it (e.g. the last tok/s)."""
        if label not in self._tasks:
            self.start(label, None)
        task = self._tasks[label]
        self._progress.update(task, advance=steps)
        if status is not None:
            self._progress.update(task, status=status)

    def note(self, message: str) -> None:
        """Print a line above the bars."""
        self._progress.console.print(message, markup=False, highlight=False)
