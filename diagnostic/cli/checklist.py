"""`diagnose checklist`: the consultant's checklist as a table, evaluated on a bundle, exported."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import click
from rich.markup import escape
from rich.table import Table

from diagnostic.checklist.lists import (
    Checklist,
    ItemStatus,
    render_markdown,
    run_checklist,
    write_export,
)
from diagnostic.cli._common import console, console_err, output_option
from diagnostic.common.files import writable_destination
from diagnostic.errors import DiagnosticError

_STYLE = {"done": "green", "not_done": "red", "not_applicable": "dim"}


@click.command("checklist")
@click.argument("bundle", required=False, type=click.Path(path_type=Path))
@click.option(
    "--list",
    "list_name",
    default="onsite",
    show_default=True,
    metavar="NAME",
    help="Checklist to show: pre-visit, onsite or deliverable (a file in checklists/).",
)
@click.option("--tick", multiple=True, metavar="ID", help="Mark a manual item done (repeatable).")
@click.option("--untick", multiple=True, metavar="ID", help="Clear a tick (repeatable).")
@click.option(
    "--note",
    nargs=2,
    multiple=True,
    metavar="ID TEXT",
    help="Attach a note to an item; an empty TEXT clears it (repeatable).",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "md", "pdf"]),
    default="table",
    show_default=True,
    help="Table on the terminal, Markdown, or PDF (needs -o).",
)
@output_option("Write md or pdf to this file.")
def command(
    bundle: Path | None,
    list_name: str,
    tick: tuple[str, ...],
    untick: tuple[str, ...],
    note: tuple[tuple[str, str], ...],
    fmt: str,
    output: Path | None,
) -> None:
    """Show the consultant's checklist, evaluated against a bundle.

    Without BUNDLE, prints the list. With BUNDLE, evaluates the automatic items
    (logs of every run, restarts, requests, A/A arm, …) and stores manual
    ticks and notes in BUNDLE/checklist.json.

    \b
    Example:
      diagnose checklist bundle/
      diagnose checklist bundle/ --tick os-gpu-idle --note os-gpu-idle "clocks locked 1980 MHz"
      diagnose checklist --list pre-visit --format pdf -o pre-visit.pdf
    """
    if fmt == "pdf" and output is None:
        raise DiagnosticError("--format pdf writes a file: add -o FILE.pdf")
    if fmt == "table" and output is not None:
        raise DiagnosticError("-o needs --format md or pdf; the table is for the terminal")
    if output is not None:
        writable_destination(output)
    checklist, statuses = run_checklist(list_name, bundle, tick=tick, untick=untick, notes=note)
    if output is not None:
        write_export(checklist, fmt, output, statuses if bundle else None)
        console_err.print(f"Wrote {escape(str(output))}", highlight=False)
    elif fmt == "md":
        click.echo(render_markdown(checklist, statuses if bundle else None), nl=False)
    else:
        console.print(_table(checklist, statuses, evaluated=bundle is not None))
        if bundle is not None:
            console.print(_tally(statuses), highlight=False)
        if tick or untick or note:
            console_err.print(f"Saved in {escape(str(bundle))}/checklist.json", highlight=False)


def _table(checklist: Checklist, statuses: list[ItemStatus], *, evaluated: bool) -> Table:
    table = Table(title=escape(checklist.title), show_lines=False, expand=False)
    table.add_column("id", style="cyan", no_wrap=True)
    table.add_column("item")
    table.add_column("status", no_wrap=True)
    table.add_column("evidence / note" if evaluated else "how to verify")
    verify = {item.id: item.verify for item in checklist.items}
    for s in statuses:
        if evaluated:
            status = f"[{_STYLE.get(s.status or '', 'default')}]{s.label}[/]"
            detail = escape(s.evidence) + (f"\nnote: {escape(s.note)}" if s.note else "")
        else:
            status = "auto" if s.automatic else "manual"
            detail = escape(verify[s.id])
        table.add_row(escape(s.id), escape(s.text), status, detail)
    return table


def _tally(statuses: list[ItemStatus]) -> str:
    counts = Counter(s.label for s in statuses)
    parts = [f"{counts[label]} {label}" for label in ("done", "not done", "not applicable")]
    return f"{', '.join(parts)} of {len(statuses)} items"
