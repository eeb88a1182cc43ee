"""`diagnose sweep`: restart the server per configuration, in interleaved blocks, from a plan."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Any

import click
from pydantic import BaseModel, ConfigDict, Field
from rich import box
from rich.table import Table
from rich.text import Text

from diagnostic import defaults
from diagnostic.cli._common import (
    RichReporter,
    api_key_from_env,
    api_key_option,
    console,
    console_err,
    engagement_from,
    engagement_options,
    number_option,
    output_option,
    print_labelled,
)
from diagnostic.cli._preset import no_preset_options
from diagnostic.cli._preset import preset as preset_plan
from diagnostic.common.progress import duration
from diagnostic.measure.launch import shell_variables
from diagnostic.measure.plan.presets import ENGINES, GRAPHS
from diagnostic.measure.plan.spec import Plan, load_plan
from diagnostic.measure.schedule import EstimateAssumptions
from diagnostic.measure.sweep import OVERALL, SweepResult, sweep
from diagnostic.measure.sweep.planner import Power
from diagnostic.schema.bundle import Engagement

CURRENT = "  this run"


class _TwoBars:
    """Keeps the display to two bars: the whole sweep, and the workload running now."""

    def __init__(self, inner: RichReporter) -> None:
        self.inner = inner

    def start(self, label: str, total: int | None) -> None:
        """The sweep's bar, or the one reused for each run and workload."""
        self.inner.start(label if label == OVERALL else CURRENT, total)

    def advance(self, label: str, steps: int = 1, status: str | None = None) -> None:
        """Move the matching bar."""
        self.inner.advance(label if label == OVERALL else CURRENT, steps, status)

    def note(self, message: str) -> None:
        """Print above the bars."""
        self.inner.note(message)


@contextlib.contextmanager
def _terminate_as_interrupt() -> Iterator[None]:
    """SIGTERM, or SIGHUP from a closed ssh session, stops the server the way Ctrl-C does."""

    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt(signal.Signals(signum).name)

    previous = {sig: signal.signal(sig, interrupt) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


_OUT = click.Path(path_type=Path)


@click.command("sweep")
@click.argument("plan_file", required=False, type=_OUT)
@output_option("Bundle folder to write.")
@click.option("--resume", is_flag=True, help="Continue a sweep: skip runs done, redo the others.")
@click.option("--force", is_flag=True, help="Replace an existing bundle (or --save-plan file).")
@click.option("--dry-run", is_flag=True, help="Print the schedule and a time estimate only.")
@click.option("--stop-on-failure", is_flag=True, help="Stop at the first failed start.")
@click.option(
    "--telemetry",
    is_flag=True,
    help="Sample this machine's GPUs (NVML) and CPU during every run into "
    "runs/<run>/telemetry/ (as the plan's telemetry_local = true; remote nodes: the plan's "
    'telemetry = {node = "ssh node nvidia-smi …"}).',
)
@click.option(
    "--adaptive",
    is_flag=True,
    help=(
        "Analyse at up to 4 equally spaced looks (first after ≥ 4 blocks, e.g. 5, 9, 14, 18 "
        "for restarts = 18; none before the end below 8); an arm whose comparisons are all "
        "decided (WIN, LOSS or EQUIVALENT) or futile (undecided while a one-sided t test "
        "rejects the plan's target speedup, [plan] target, +10%) gets no more restarts, and "
        "the sweep stops once every arm has; each block's reference is the mean of the "
        "baseline and its A/A arm; from block 3 on, m* requests per restart from the costs "
        "and noise of blocks 1-2 (Kalibera & Jones, 5 to 60). Restarts (--restarts, [plan] "
        "restarts) is then the MAXIMUM: --dry-run prints the restarts 90% power needs. Sized "
        "so, both plans at 90% power with the same m* and reference, the adaptive plan took "
        "34% less wall-clock on average in simulation, 4-63% less in every case "
        "(benchmarks/README.md, time on site)."
    ),
)
@click.option("--engine", type=click.Choice(ENGINES), help="Preset: generate the plan.")
@click.option("--model", help="Preset: model served (path or hub id).")
@click.option("--drafter", help="Preset: draft model (EAGLE, EAGLE-3, draft model).")
@click.option("--method", help="Preset: eagle, eagle3, ngram, mtp, draft_model, standalone, draft.")
@click.option("--k", "ks", metavar="K,K,…", help="Preset: draft lengths, e.g. 1,2,3,5,7.")
@click.option(
    "--knob",
    "knobs",
    multiple=True,
    metavar="NAME=V,V,…",
    help="Preset: sweep an engine knob too (SGLang: topk, draft-tokens, bfs-breadth).",
)
@click.option(
    "--graphs",
    type=click.Choice(GRAPHS),
    default="on",
    show_default=True,
    help="Preset: CUDA graphs on, off, or both (a graphs-off twin of every arm).",
)
@number_option(
    "--restarts",
    defaults.RESTARTS,
    1,
    "Preset: server starts per arm.",
    maximum=defaults.LIMIT_RESTARTS,
)
@number_option(
    "--requests",
    defaults.REQUESTS,
    1,
    "Preset: measured requests per restart and workload.",
    maximum=defaults.LIMIT_REQUESTS,
)
@number_option(
    "--warmup",
    defaults.WARMUP,
    0,
    "Preset: warm-up requests per restart and workload.",
    maximum=defaults.LIMIT_WARMUP,
)
@number_option(
    "--max-tokens",
    defaults.MAX_TOKENS,
    1,
    "Preset: output tokens per request.",
    maximum=defaults.LIMIT_MAX_TOKENS,
)
@click.option(
    "--workloads",
    default=",".join(defaults.WORKLOADS),
    show_default=True,
    help="Preset: comma-separated workloads.",
)
@click.option("--port", type=click.IntRange(1, 65535), help="Preset: port (default per engine).")
@click.option("--server", help="Preset: server command (default: vllm serve, llama-server, …).")
@click.option("--extra-args", default="", help="Preset: flags added to every launch.")
@click.option("--no-aa", is_flag=True, help="Preset: leave out the A/A arm (baseline-aa).")
@click.option("--save-plan", type=_OUT, help="Preset: write the plan to this file.")
@api_key_option
@click.option(
    "--timeout",
    "timeout_s",
    type=click.FloatRange(min=1),
    help=f"Seconds one request may take (default {defaults.REQUEST_TIMEOUT_S:g}).",
)
@click.option(
    "--pilot",
    type=click.Path(path_type=Path, exists=True, file_okay=False),
    help="Estimate: take start-up, request seconds and noise from this sweep bundle.",
)
@number_option("--assume-startup", 60.0, 0, "Estimate: seconds a server takes to start.")
@number_option("--assume-tps", 50.0, 0.1, "Estimate: decode tokens per second.")
@engagement_options("overrides the plan's [engagement]")
@click.pass_context
def command(
    ctx: click.Context,
    plan_file: Path | None,
    output: Path | None,
    resume: bool,
    force: bool,
    dry_run: bool,
    stop_on_failure: bool,
    telemetry: bool,
    adaptive: bool,
    engine: str | None,
    api_key_env: str | None,
    timeout_s: float | None,
    pilot: Path | None,
    assume_startup: float,
    assume_tps: float,
    **preset: Any,
) -> None:
    """Restart the server per configuration, in interleaved blocks, from a plan.

    Each scheduled start launches the arm's command (bash -c, own process group, log in
    runs/<arm>-r<n>/logs/server.log, secrets redacted), waits for health (or the plan's
    `health` command), fetches the plan's `logs` (one per node), measures like `collect`,
    fetches them again, then stops the server (the plan's `stop` first) and waits for the
    port. Blocks start every arm once in a seeded
    random order. A failed start is recorded and the sweep goes on; Ctrl-C stops cleanly and
    --resume continues without repeating a request.

    \b
    Examples:
      diagnose sweep plan.toml -o bundle --dry-run
      diagnose sweep plan.toml -o bundle
      diagnose sweep --engine vllm --model M --drafter D --method eagle3 --k 1,2,3,5,7 \\
          --restarts 5 -o bundle --save-plan plan.toml
    """
    engagement = engagement_from(preset)
    if plan_file is not None:
        no_preset_options(ctx, engine)
        plan = load_plan(plan_file)
    elif engine is None:
        raise click.UsageError("give a PLAN.toml, or --engine with --model, --method and --k")
    else:
        plan = preset_plan(engine, force=force, **preset)
    for warning in plan.warnings:
        print_labelled(console_err, "Warning:", "yellow", warning)
    if output is None and not dry_run:
        if engine is not None:
            return  # the preset was printed (and saved): nothing to run
        raise click.UsageError("give -o BUNDLE (or --dry-run to see the schedule)")
    options = SweepOptions(
        out=output,
        resume=resume,
        force=force,
        stop_on_failure=stop_on_failure,
        telemetry=telemetry,
        adaptive=adaptive,
        api_key=api_key_from_env(api_key_env),
        request_timeout_s=timeout_s,
        assumptions=EstimateAssumptions(startup_s=assume_startup, decode_tps=assume_tps),
        pilot=pilot,
        engagement=engagement,
    )
    for warning in _unset_variables(plan):
        print_labelled(console_err, "Warning:", "yellow", warning)
    if dry_run:
        planned = sweep(plan, dry_run=True, power=True, nodes=True, **options.kwargs())
        for warning in planned.warnings[len(plan.warnings) :]:  # the stage's own doubts
            print_labelled(console_err, "Warning:", "yellow", warning)
        _print_schedule(planned)
        if not _print_nodes(planned):
            sys.exit(1)
        return
    _print_day(sweep(plan, dry_run=True, power=True, **options.kwargs()), adaptive=adaptive)
    with _terminate_as_interrupt(), RichReporter() as reporter:
        summary = sweep(plan, reporter=_TwoBars(reporter), **options.kwargs())
    _print_outcomes(summary)
    if summary.count("failed") or summary.stopped_early:
        sys.exit(1)


class SweepOptions(BaseModel):
    """The stage options the command line chose."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    out: Path | None = Field(description="Bundle folder")
    resume: bool = Field(description="Continue a sweep")
    force: bool = Field(description="Replace an existing bundle")
    stop_on_failure: bool = Field(description="Stop at the first failed start")
    telemetry: bool = Field(False, description="Sample this machine's GPUs and CPU every run")
    adaptive: bool = Field(description="Stop at a planned look once every comparison is decided")
    api_key: str | None = Field(None, repr=False, description="Bearer token, never stored")
    request_timeout_s: float | None = Field(None, description="Seconds one request may take")
    assumptions: EstimateAssumptions = Field(description="What the time estimate assumes")
    pilot: Path | None = Field(None, description="Bundle the time estimate measures from")
    engagement: Engagement = Field(description="Client, site, consultant given on the command line")

    def kwargs(self) -> dict[str, Any]:
        """Keyword arguments of `sweep`."""
        return {name: getattr(self, name) for name in type(self).model_fields}


def _unset_variables(plan: Plan) -> list[str]:
    """The shell variables ($MODEL, ${LLAMA_SERVER}) an arm's launch names that neither its
    env nor this shell sets: the launch would start the server without them."""
    missing: dict[str, list[str]] = {}
    for arm in plan.arms:
        for name in shell_variables(arm.launch):
            if name not in arm.env and name not in os.environ:
                missing.setdefault(name, []).append(arm.name)
    return [
        f"${name} is not set (named by the launch of {', '.join(arms)}): export it, or set it "
        "in the arm's env, before the sweep starts"
        for name, arms in missing.items()
    ]


def _print_schedule(summary: SweepResult) -> None:
    table = Table(title=Text(f"Schedule of {summary.plan_source}"), box=box.SIMPLE_HEAD)
    for name in ("#", "block", "arm", "restart"):
        table.add_column(name, justify="right" if name != "arm" else "left")
    for s in summary.schedule:
        block = "-" if s.block is None else str(s.block + 1)
        table.add_row(str(s.index + 1), block, Text(s.arm), str(s.restart))
    console.print(table)
    _print_day(summary, adaptive=summary.looks is not None)


def _print_nodes(summary: SweepResult) -> bool:
    """Each node the plan reaches over ssh, as checked now; False when one is not ready."""
    if not summary.nodes:
        return True
    table = Table(title=Text("Nodes the plan reaches over ssh"), box=box.SIMPLE_HEAD)
    for name in ("node", "reached", "clock offset", "not found", "found"):
        table.add_column(name)
    for n in summary.nodes:
        offset = (
            f"{n.clock_offset_s:+.3f} s ± {n.clock_bound_s:.3f}"
            if n.clock_offset_s is not None and n.clock_bound_s is not None
            else "-"
        )
        reached = Text("yes" if n.reached else "NO", style="green" if n.reached else "red")
        if n.via is not None:
            reached = Text(f"from {n.via}", style="yellow")
        table.add_row(
            Text(n.node), reached, offset, Text(", ".join(n.missing)), Text(", ".join(n.found))
        )
    console.print(table)
    for n in summary.nodes:
        if n.via is not None:
            print_labelled(
                console_err,
                "Note:",
                "yellow",
                f"{n.node}: not checked from here, its ssh runs from {n.via} ({n.command})",
            )
        elif n.problem:
            print_labelled(console_err, "Error:", "red", f"{n.node}: {n.problem} ({n.command})")
        elif n.missing:
            print_labelled(
                console_err,
                "Error:",
                "red",
                f"{n.node}: not found there: {', '.join(n.missing)}; fix the plan or the node "
                "before the sweep",
            )
    return all(n.ok for n in summary.nodes)


def _print_day(summary: SweepResult, *, adaptive: bool) -> None:
    """The planned duration of both designs, before anything starts."""
    d = summary.day
    c = d.costs
    console.print(
        f"{summary.estimate.starts} starts, {summary.estimate.requests} requests. Costs "
        f"{c.source}: {c.startup_s:.3g} s start-up, {c.stop_s:.3g} s stop, "
        f"{c.mean_request_s:.3g} s per request"
        + (
            ""
            if d.costs.source.startswith("measured")
            else " (tune with --assume-startup / --assume-tps, or measure them: --pilot BUNDLE)"
        ),
        highlight=False,
        markup=False,
    )
    mark = {True: " ← this run", False: ""}
    console.print(
        f"fixed plan: {d.fixed_requests} requests per restart, every start: about "
        f"{duration(d.fixed_s)}{mark[not adaptive]}",
        highlight=False,
    )
    looks = ", ".join(
        f"{duration(t)} if decided at block {n}"
        for n, t in zip(d.looks, d.adaptive_by_look_s, strict=True)
    )
    console.print(
        f"adaptive plan (--adaptive): {d.adaptive.requests} requests per restart from block 3; "
        f"{looks}{' (no interim look)' if len(d.looks) < 2 else ''}{mark[adaptive]}",
        highlight=False,
        markup=False,
    )
    console.print(f"  why {d.adaptive.requests}: {d.adaptive.why}", highlight=False, markup=False)
    if d.power is not None:
        console.print(_power_line(d.power), highlight=False, markup=False)
        console.print(
            f"At that noise and {d.fixed_requests} requests per restart (fixed plan), "
            + d.power.day.sentence(),
            highlight=False,
            markup=False,
        )


def _power_line(p: Power) -> str:
    """'power to find +10% …: fixed 11%, adaptive 15%; 90% needs restarts = 18 …'."""

    def need(n: int | None) -> str:
        return f"{n}" if n is not None else "over 100"

    return (
        f"power to find {p.target:+.0%} (a WIN over {p.family} "
        f"comparison{'s' if p.family > 1 else ''}): fixed plan "
        f"{p.fixed:.0%}, adaptive {p.adaptive:.0%}; {p.wanted:.0%} needs restarts = "
        f"{need(p.fixed_restarts)} (fixed) or {need(p.adaptive_restarts)} (adaptive maximum; "
        f"it usually stops sooner), at {p.noise}"
    )


_STYLES = {"ok": "green", "failed": "red", "interrupted": "yellow", "decided": "cyan"}


def _print_outcomes(summary: SweepResult) -> None:
    table = Table(title=Text(f"Sweep into {summary.bundle}"), box=box.SIMPLE_HEAD)
    for name in ("block", "arm", "restart", "status", "start-up s", "why"):
        table.add_column(name, justify="right" if name in ("block", "restart") else "left")
    for o in summary.outcomes:
        why = (o.failure or "").splitlines()[0][:90] if o.failure else ""
        startup = "-" if o.startup_s is None else f"{o.startup_s:.1f}"
        block = "-" if o.start.block is None else str(o.start.block + 1)
        style = _STYLES.get(o.status, "")
        status = Text(o.status, style=style)
        table.add_row(block, Text(o.start.arm), str(o.start.restart), status, startup, Text(why))
    console.print(table)
    counts = ", ".join(
        f"{summary.count(s)} {s}"
        for s in ("ok", "skipped", "failed", "decided")
        if summary.count(s)
    )
    console.print(f"{counts}. Bundle: {summary.bundle}", markup=False, highlight=False)
    if summary.stopped_at_look:
        console.print(
            f"--adaptive: every comparison decided after {summary.stopped_at_look} blocks."
        )
    t = summary.time_plan
    if t is not None and t.took_s is not None:
        console.print(
            f"Took {duration(t.took_s)} (planned {duration(t.estimated_s)} at the start, from the "
            "costs given before measuring: --pilot BUNDLE gives measured ones); "
            f"{t.requests} requests per restart at the end ({t.requests_why}).",
            highlight=False,
            markup=False,
        )
    if summary.stopped_early:
        console.print("Stopped at the first failure (--stop-on-failure); continue with --resume.")
    elif summary.count("failed"):
        console.print("Failed starts can be retried with --resume (details in each run.json).")
