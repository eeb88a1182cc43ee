"""`diagnose plan`: the next sweep plan from a bundle's findings (measure/sweep/nextplan.py)."""

from __future__ import annotations

import re
from pathlib import Path

import click

from diagnostic.cli._common import console, console_err, output_option
from diagnostic.common.progress import duration
from diagnostic.errors import DiagnosticError
from diagnostic.measure.sweep.nextplan import next_plan

_SPAN = re.compile(r"^\s*(?:(\d+(?:\.\d+)?)\s*h)?\s*(?:(\d+(?:\.\d+)?)\s*min)?\s*$")


def _seconds(ctx: click.Context, param: click.Parameter, value: str | None) -> float | None:
    """'3h', '45min', '2h30min' -> seconds."""
    if value is None:
        return None
    m = _SPAN.match(value)
    if m is None or not (m[1] or m[2]) or float(m[1] or 0) * 3600 + float(m[2] or 0) * 60 <= 0:
        raise click.BadParameter("give the time left as hours and/or minutes, e.g. 3h, 45min")
    return float(m[1] or 0) * 3600 + float(m[2] or 0) * 60


@click.command("plan")
@click.argument("bundle", type=click.Path(path_type=Path, exists=True, file_okay=False))
@output_option("Plan file to write (TOML), e.g. next.toml.")
@click.option("--dry-run", is_flag=True, help="Print the plan; write nothing.")
@click.option("--force", is_flag=True, help="Replace an existing plan file.")
@click.option(
    "--as-found",
    metavar="ARM",
    help="The arm that is the client's configuration as found (default: the bundle's "
    "[plan] as_found, else the speculative arm with the most severe finding).",
)
@click.option(
    "--time-left",
    callback=_seconds,
    metavar="SPAN",
    help="Time left of the day, e.g. 3h or 45min (default: a 6 h day less the bundle's "
    "own measuring time).",
)
@click.option(
    "--requests",
    type=click.IntRange(1, 100_000),
    help="Measured requests per restart and workload (default: m* from the bundle's costs "
    "and noise).",
)
@click.option(
    "--restarts",
    type=click.IntRange(1, 1000),
    help="Restarts per arm (default: what 90% power at the plan's target asks, within the "
    "time left, at least 3).",
)
def command(
    bundle: Path,
    output: Path | None,
    dry_run: bool,
    force: bool,
    as_found: str | None,
    time_left: float | None,
    requests: int | None,
    restarts: int | None,
) -> None:
    """The next block of the day: a sweep plan that tests the fixes of the bundle's findings.

    Reads the bundle offline (its logs, its recorded launch commands, costs and noise). The
    plan holds the client's configuration as found, the arms each finding's remedies
    propose (flag edits of its launch command, each with and without speculation), their
    matched baselines and an A/A arm, with a comment per arm saying which finding it tests;
    restarts and requests are sized from the bundle's measured start-up, request seconds
    and restart noise, within the time left. `diagnose sweep` runs it unchanged, and the
    report of that sweep leads with the before-and-after.

    \b
    Examples:
      diagnose plan acme --dry-run
      diagnose plan acme -o next.toml --time-left 3h
      diagnose sweep next.toml -o acme-2
    """
    if output is None and not dry_run:
        raise click.UsageError("give -o PLAN.toml (or --dry-run to print it)")
    if output is not None and output.exists() and not force and not dry_run:
        raise DiagnosticError(f"{output} already exists; choose another -o or add --force")
    source = str(output) if output is not None else "next.toml"
    planned = next_plan(
        bundle,
        as_found=as_found,
        time_left_s=time_left,
        source=source,
        requests=requests,
        restarts=restarts,
    )
    if dry_run:
        console.print(planned.text, markup=False, highlight=False, soft_wrap=True)
    else:
        assert output is not None
        output.write_text(planned.text, encoding="utf-8")
    console_err.print(
        f"{'Planned' if dry_run else f'Wrote {output}:'} {len(planned.arms)} arms × "
        f"{planned.restarts} restarts, {planned.requests} requests per restart and workload, "
        f"about {duration(planned.estimated_s)} of the {duration(planned.time_left_s)} left; "
        f"as found: {planned.as_found}.",
        markup=False,
        highlight=False,
    )
