"""`diagnose sweep`: start every arm's server per the schedule, collect each start into a bundle."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from diagnostic import __version__
from diagnostic.bundle.store import Bundle, check_output
from diagnostic.common.progress import NullReporter, Reporter
from diagnostic.errors import BundleError, DiagnosticError
from diagnostic.measure.collect import RunSettings
from diagnostic.measure.launch import shell_variables
from diagnostic.measure.plan.spec import Plan
from diagnostic.measure.schedule import (
    Estimate,
    EstimateAssumptions,
    Start,
    build_schedule,
    estimate,
)
from diagnostic.measure.sweep import planner
from diagnostic.measure.sweep.runner import OVERALL, OutcomeStatus, RunOutcome, StartRunner
from diagnostic.measure.sweep.timekeeper import TimeKeeper
from diagnostic.measure.telemetry import TelemetrySettings
from diagnostic.schema.bundle import Design, Engagement, Manifest, TimePlan

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["SweepResult", "adaptive_looks", "day_estimate", "run_settings", "sweep"]

_NO_INTERIM = (
    "--adaptive: restarts = {restarts} leaves no interim look (one needs 4 blocks before it "
    "and as many after), so every block runs; restarts is the maximum: size it for power "
    "(`sweep --dry-run` prints the restarts 90% power needs)"
)
_NO_AA = (
    '--adaptive: the plan has no A/A arm (aa_of = "{baseline}"); with one, each block '
    "compares with the mean of two baseline starts, which shortens an adaptive sweep "
    '(benchmarks/README.md "Time on site")'
)


class SweepResult(BaseModel):
    """The result of `sweep`: the schedule, its estimate and each start's outcome."""

    model_config = ConfigDict(extra="forbid")

    bundle: str | None = Field(description="Bundle folder (None on a dry run)")
    plan_source: str = Field(description="Plan file or preset")
    schedule: list[Start] = Field(description="Every scheduled start, in order")
    estimate: Estimate = Field(description="Expected duration")
    outcomes: list[RunOutcome] = Field(default_factory=list, description="Per start, in order")
    stopped_early: bool = Field(False, description="--stop-on-failure ended the sweep")
    looks: list[int] | None = Field(
        None, description="--adaptive: blocks after which the analysis may stop the sweep"
    )
    stopped_at_look: int | None = Field(
        None, description="--adaptive: blocks run when every arm's comparisons were decided"
    )
    warnings: list[str] = Field(default_factory=list, description="Doubts about the plan")
    time_plan: TimePlan | None = Field(None, description="What the sweep planned, and took")
    day: planner.DayEstimate = Field(description="Expected wall-clock, fixed and adaptive plan")

    def count(self, status: OutcomeStatus) -> int:
        """Starts that ended with `status`."""
        return sum(1 for o in self.outcomes if o.status == status)


def sweep(
    plan: Plan,
    *,
    out: Path | None,
    resume: bool = False,
    force: bool = False,
    dry_run: bool = False,
    stop_on_failure: bool = False,
    adaptive: bool = False,
    reporter: Reporter | None = None,
    api_key: str | None = None,
    request_timeout_s: float | None = None,
    engagement: Engagement | None = None,
    grace_s: float = 30.0,
    assumptions: EstimateAssumptions | None = None,
    pilot: Path | None = None,
    power: bool = False,
    telemetry: bool = False,
) -> SweepResult:
    """Run `plan` into the bundle `out`: every scheduled start launched, measured and stopped.

    A start that crashes or never becomes healthy is recorded as failed and the sweep goes on
    (unless stop_on_failure). Ctrl-C stops the server, marks the run interrupted and re-raises
    KeyboardInterrupt. `resume` skips runs already ok, continues interrupted ones and retries
    failed ones (the failed attempt's files are kept as *.attempt<N>.*). `adaptive` analyses
    the bundle at planned looks (block counts): an arm whose comparisons are all decided gets
    no more restarts, and the sweep stops once every arm is; from block 3 on it measures
    m* requests per restart from its own costs and noise. `pilot`: a bundle whose costs and
    noise the time estimate (SweepResult.day) uses instead of the assumptions. `power`: the
    estimate also gives both designs' power at the plan's target and the restarts for 90%
    (seconds of simulation: the CLI asks for it, and prints it). `telemetry`: sample this
    machine's GPUs (NVML) and host during every run, as the plan's telemetry_local does.
    """
    reporter = reporter or NullReporter()
    o = plan.options
    names = [a.name for a in plan.arms]
    schedule = build_schedule(names, restarts=o.restarts, order=o.order, seed=o.seed)
    summary = SweepResult(
        bundle=None if dry_run else str(out),
        plan_source=plan.source,
        schedule=schedule,
        estimate=_estimate(plan, len(schedule), assumptions),
        warnings=list(plan.warnings),
        looks=adaptive_looks(plan) if adaptive else None,
        day=day_estimate(plan, assumptions, pilot, power=power),
    )
    if summary.looks is not None and len(summary.looks) < 2:
        summary.warnings.append(_NO_INTERIM.format(restarts=o.restarts))
        reporter.note(summary.warnings[-1])
    if summary.looks is not None and not plan.has_aa:
        summary.warnings.append(_NO_AA.format(baseline=plan.baseline))
        reporter.note(summary.warnings[-1])
    if dry_run:
        summary.outcomes = [RunOutcome(start=s, status="planned") for s in schedule]
        return summary
    if out is None:
        raise DiagnosticError("sweep needs -o BUNDLE (the folder the measurements go to)")
    settings = run_settings(plan, api_key=api_key, timeout_s=request_timeout_s, telemetry=telemetry)
    _check_shell_vars(plan)
    design = (
        Design(
            kind="adaptive",
            looks=summary.looks,
            target=plan.options.target,
            pool_aa=plan.has_aa,
        )
        if summary.looks
        else Design()
    )
    bundle = _open_bundle(
        plan, settings, Path(out), resume=resume, force=force, engagement=engagement, design=design
    )
    runner = StartRunner(bundle, plan, settings, reporter, grace_s)
    keeper = TimeKeeper(
        plan,
        bundle,
        schedule,
        settings,
        looks=summary.looks,
        day=summary.day,
        reporter=reporter,
    )
    reporter.start(OVERALL, len(schedule) * runner.steps_per_start)
    ended_early: str | None = None
    for index, start in enumerate(schedule):
        if keeper.skip(start):
            outcome = RunOutcome(start=start, status="decided", failure=keeper.closed[start.arm])
            reporter.advance(OVERALL, runner.steps_per_start, status=keeper.headline())
        else:
            runner.settings, runner.headline = keeper.settings, keeper.headline()
            outcome = runner.run(start)
        summary.outcomes.append(outcome)
        if outcome.status == "failed":
            reporter.note(f"{start.arm} r{start.restart} failed: {outcome.failure}")
            if stop_on_failure:
                summary.stopped_early = True
                ended_early = (
                    f"--stop-on-failure: {start.arm} r{start.restart} failed; the starts after "
                    "it were not run"
                )
                break
        block_done = index + 1 == len(schedule) or schedule[index + 1].block != start.block
        if block_done and keeper.after_block(index, start):
            summary.stopped_at_look = (start.block or 0) + 1
            break
    summary.time_plan = keeper.finish(ended_early=ended_early)
    return summary


def adaptive_looks(plan: Plan) -> list[int]:
    """Planned looks (blocks per arm) for --adaptive: up to 4 equally spaced looks ending at
    the plan's restarts, the maximum, the first after at least 4 blocks (sequential.planned_looks;
    the report reads the same looks back, analyse.compare.bundle_looks). Below 8 restarts
    there is no interim look."""
    o = plan.options
    if o.order != "blocks":
        raise DiagnosticError(f'{plan.source}: --adaptive needs [plan] order = "blocks"')
    from diagnostic.analyse import sequential  # imported here: scipy loads slowly

    return sequential.planned_looks(o.restarts)


def day_estimate(
    plan: Plan, assumptions: EstimateAssumptions | None, pilot: Path | None, *, power: bool = False
) -> planner.DayEstimate:
    """The fixed and the adaptive plan's expected wall-clock, from the assumptions or from the
    costs and variance components a pilot bundle measured; with `power`, each design's power
    at the plan's target over the family of speculative comparisons."""
    from diagnostic.analyse import sequential  # imported here: scipy loads slowly

    o = plan.options
    a = assumptions or EstimateAssumptions()
    costs = planner.assumed_costs(a, o.workloads, o.max_tokens)
    noise = planner.assumed_noise(a)
    if pilot is not None:
        costs, noise = _pilot(pilot, o.workloads, a)
    day = planner.day_estimate(
        costs,
        noise,
        arms=len(plan.arms),
        restarts=o.restarts,
        looks=sequential.planned_looks(o.restarts),
        requests=o.requests,
        warmup=o.warmup,
        levels=len(o.concurrency),
    )
    spec = [a for a in plan.arms if a.name != plan.baseline and not a.aa_of]
    if not power or not spec:  # a plan of the baseline and its A/A decides nothing
        return day
    levels = len(o.concurrency)
    estimate = planner.power_estimate(
        noise,
        restarts=o.restarts,
        requests=o.requests,
        adaptive_requests=day.adaptive.requests,
        speculative=len(spec),
        keys=len(o.workloads) * levels,  # the derived "all workloads" rows are not in it
        pooled=plan.has_aa,
        start_s=day.costs.per_start(o.requests, o.warmup, levels),
        arms=len(plan.arms),
        target=o.target,
        margin=o.margin,
    )
    return day.model_copy(update={"power": estimate})


def _pilot(
    path: Path, workloads: list[str], a: EstimateAssumptions
) -> tuple[planner.Costs, pd.DataFrame]:
    from diagnostic.analyse.requests import load_samples  # imported here: pandas, scipy

    try:
        pilot = Bundle.open(path)
        loaded = load_samples(pilot)
    except DiagnosticError as exc:
        raise DiagnosticError(f"--pilot {path}: {exc}") from exc
    measured = planner.measured_costs(
        loaded.frame, loaded.runs, stop_s=a.stop_s, source=f"measured in the pilot {path}"
    )
    if measured is None:
        raise DiagnosticError(
            f"--pilot {path}: no run with a measured start-up and requests (a `sweep` bundle "
            "records start-up times; `collect` bundles do not): give a sweep's bundle"
        )
    mean = measured.mean_request_s
    warm = sum(measured.warmup_s.values()) / len(measured.warmup_s)
    costs = measured.model_copy(
        update={
            "request_s": {w: measured.request_s.get(w, mean) for w in workloads},
            "warmup_s": {w: measured.warmup_s.get(w, warm) for w in workloads},
        }
    )
    noise = planner.noise_components(loaded.frame, pilot.manifest.plan.baseline)
    return costs, noise if not noise.empty else planner.assumed_noise(a)


def _estimate(plan: Plan, starts: int, assumptions: EstimateAssumptions | None) -> Estimate:
    o = plan.options
    return estimate(
        starts,
        workloads=len(o.workloads),
        requests=o.requests,
        warmup=o.warmup,
        max_tokens=o.max_tokens,
        concurrency_levels=len(o.concurrency),
        assumptions=assumptions,
    )


def run_settings(
    plan: Plan, *, api_key: str | None, timeout_s: float | None, telemetry: bool = False
) -> RunSettings:
    """What collect_run measures each start with; loads the workloads (fails before any start).
    `telemetry` samples this machine whatever the plan's telemetry_local says (sweep
    --telemetry); the plan's remote telemetry templates are rendered per start (runner)."""
    o = plan.options
    extra: dict[str, Any] = {
        "timeout_s": timeout_s if timeout_s is not None else o.request_timeout_s,
        "first_token_timeout_s": o.first_token_timeout_s,
        "token_timeout_s": o.token_timeout_s,
        "run_timeout_s": o.run_timeout_s,
    }
    local = telemetry or o.telemetry_local
    if local or o.telemetry:
        extra["telemetry"] = TelemetrySettings(
            local=local,
            interval_s=o.telemetry_interval_s,
            quiet_s=o.telemetry_quiet_s,
            remote=o.telemetry,
        )
    return RunSettings(
        base_url=plan.base_url,
        workloads=plan.workload_sources(),
        requests=o.requests,
        warmup=o.warmup,
        max_tokens=o.max_tokens,
        concurrency=list(o.concurrency),
        api=o.api,
        model=o.model,
        api_key=api_key,
        **extra,
    )


def _check_shell_vars(plan: Plan) -> None:
    """Fail before any start when a launch uses a shell variable that nobody set."""
    missing: dict[str, list[str]] = {}
    for arm in plan.arms:
        assigned = re.findall(r"(?:^|\s)([A-Za-z_]\w*)=", arm.launch)
        defined = set(os.environ) | set(arm.env) | set(assigned)
        for name in shell_variables(arm.launch):
            if name not in defined and arm.name not in missing.get(name, []):
                missing.setdefault(name, []).append(arm.name)
    if missing:
        names = "; ".join(f"${n} (arms {', '.join(arms)})" for n, arms in missing.items())
        raise DiagnosticError(
            f"{plan.source}: the launch commands use {names}, not set in this environment; "
            "export them first (for the real CPU engine: export $(scripts/real-server path))"
        )


def _open_bundle(
    plan: Plan,
    settings: RunSettings,
    out: Path,
    *,
    resume: bool,
    force: bool,
    engagement: Engagement | None,
    design: Design,
) -> Bundle:
    """The sweep's bundle, its manifest recording the plan and the design the report decides
    with (fixed, or adaptive with its looks)."""
    names = [w.name for w in settings.workloads]
    spec = plan.spec().model_copy(update={"workloads": names, "design": design})
    manifest = Manifest(
        tool_version=__version__,
        engagement=plan.file.engagement.merged(engagement),
        target=plan.target(),
        plan=spec,
        notes=f"diagnose sweep of {plan.source}",
    )
    check_output(out)
    if resume and (out / "manifest.json").is_file():
        bundle = Bundle.open(out)
        _check_same_plan(bundle, manifest)
        return bundle
    return Bundle.create(out, manifest, force=force)


def _check_same_plan(bundle: Bundle, manifest: Manifest) -> None:
    old = bundle.manifest.plan.model_dump()
    new = manifest.plan.model_dump()
    changed = [key for key in new if old.get(key) != new[key]]
    if bundle.manifest.target.base_url != manifest.target.base_url:
        changed.append("base_url")
    if changed:
        raise BundleError(
            f"{bundle.path}: the plan differs from the one this bundle was started with "
            f"({', '.join(changed)}); resume with the same plan, or start a new -o"
        )
