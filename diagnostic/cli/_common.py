"""Shared CLI helpers: consoles, numeric options and the rich progress reporter."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

import click
from rich.console import Console
from rich.text import Text

from diagnostic.errors import DiagnosticError

if TYPE_CHECKING:  # imported where used: the pydantic models and rich's live display load slowly
    from rich.progress import TaskID
    from rich.table import Table

    from diagnostic.schema.bundle import Engagement

__all__ = [
    "RichReporter",
    "api_key_from_env",
    "api_key_option",
    "canonical_hint",
    "console",
    "console_err",
    "engagement_from",
    "engagement_options",
    "fitted_table",
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
    from diagnostic.schema.bundle import Engagement

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


def fitted_table(
    title: str,
    headers: list[str],
    rows: list[list[str]],
    width: int,
    whole: tuple[int, ...] = (),
) -> Table:
    """A table of rich-markup cells whose words stay whole within `width` columns when the
    longest word of every column fits (rich alone folds a run name or an engine version
    mid-word to fit): each column gets at least that word; then each `whole` column gets
    room for its cells on one line if the room left allows it all; the rest is shared by what
    the other columns' longest cells would need."""
    columns = [[Text.from_markup(c).plain for c in (h, *(r[i] for r in rows))] for i, h in
               enumerate(headers)]  # fmt: skip
    floor = [max((len(w) for c in col for w in c.split()), default=1) for col in columns]
    # What a column's longest cell needs on one line; a header may wrap between its words.
    need = [
        max(f, *(len(line) for c in col[1:] for line in c.splitlines() or [""]))
        for f, col in zip(floor, columns, strict=True)
    ]
    spare = width - (3 * len(headers) + 1) - sum(floor)  # less borders and padding
    widths: list[int | None] = list(need)
    if spare < sum(need) - sum(floor):
        widths = list(floor)
        kept = [i for i in whole if need[i] - floor[i] <= spare]  # one line, or none
        for i in kept:
            spare -= need[i] - floor[i]
            widths[i] = need[i]
        wanted = sum(need[i] - floor[i] for i in range(len(headers)) if i not in kept)
        for i in (i for i in range(len(headers)) if i not in kept and wanted):
            widths[i] = floor[i] + (need[i] - floor[i]) * max(spare, 0) // wanted
        if spare < 0:  # not even every longest word fits: rich folds as best it can
            widths = [None] * len(headers)
    from rich.table import Table

    table = Table(title=title, title_justify="left")
    for header, size in zip(headers, widths, strict=True):
        table.add_column(header, width=size, overflow="fold")
    for row in rows:
        table.add_row(*row)
    return table


def _shown_opts(param: click.Parameter) -> list[str]:
    aliases = param.aliases if isinstance(param, _AliasedOption) else ()
    return [o for o in param.opts if o not in aliases]


def canonical_hint(exc: click.NoSuchOption) -> click.NoSuchOption:
    """`exc` with its "Did you mean" naming each option as --help shows it (`-o/--output`),
    never by a hidden alias (`--out`): click suggests every spelling the parser knows."""
    ctx, asked = exc.ctx, exc.possibilities
    if ctx is None or not asked:
        return exc
    names: list[str] = []
    for spelling in asked:
        owner = next((p for p in ctx.command.params if spelling in p.opts), None)
        name = "/".join(_shown_opts(owner)) if owner is not None else spelling
        if name not in names:
            names.append(name)
    hint = names[0] if len(names) == 1 else f"one of: {', '.join(names)}"
    message = f"No such option: {exc.option_name}. (Did you mean {hint}?)"
    return click.NoSuchOption(exc.option_name, message=message, ctx=ctx)


class RichReporter:
    """A Reporter drawing one progress bar per task (per run and workload) on stderr.

    Use as a context manager: the live display stops on exit, even on Ctrl-C.
    """

    def __init__(self, target: Console | None = None) -> None:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

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
