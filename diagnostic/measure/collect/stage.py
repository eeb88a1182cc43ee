"""The `diagnose collect` stage: open or create the bundle, run one collect, summarise."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from diagnostic import __version__, defaults
from diagnostic.analyse.engine_timing import engine_timing
from diagnostic.bundle.seal import seal_line, seal_run
from diagnostic.bundle.store import (
    METRICS_AFTER,
    METRICS_BEFORE,
    Bundle,
    check_output,
    log_file,
    run_id,
)
from diagnostic.common.progress import Reporter, WithOverall
from diagnostic.errors import BundleError, DiagnosticError
from diagnostic.measure.client import server_url
from diagnostic.measure.collect.logs import log_sources
from diagnostic.measure.collect.probe import check_server
from diagnostic.measure.collect.recap import CollectRecap, recap
from diagnostic.measure.collect.run import collect_run
from diagnostic.measure.collect.settings import RunSettings
from diagnostic.measure.schedule import EstimateAssumptions
from diagnostic.measure.telemetry import TelemetrySettings
from diagnostic.measure.workloads import Workload, select_workloads
from diagnostic.schema.bundle import ArmSpec, Engagement, Manifest, PlanSpec, RunInfo, Target

__all__ = ["OVERALL", "CollectConfig", "collect", "preflight"]

OVERALL = "whole run"  # the reporter label of the bar over every workload (steps = requests)
_PROBE_TIMEOUT_S = 60.0  # longest wait for the one-token request preflight makes


class CollectConfig(BaseModel):
    """Options of `diagnose collect` (the CLI builds it)."""

    model_config = ConfigDict(extra="forbid")

    base_url: str = Field(description="Server base URL")
    out: Path = Field(description="Bundle folder")
    arm: str = Field("baseline", description="Arm name of this server configuration")
    restart: int = Field(
        0,
        ge=0,
        le=defaults.LIMIT_RESTARTS,
        description="Restart index (server started by hand again)",
    )
    workloads: list[str] | None = Field(None, description="Workload names; None: default")
    prompts: list[Path] = Field(default_factory=list, description="JSONL prompt files")
    requests: int = Field(
        defaults.REQUESTS,
        ge=1,
        le=defaults.LIMIT_REQUESTS,
        description="Measured requests per workload",
    )
    warmup: int = Field(
        defaults.WARMUP, ge=0, le=defaults.LIMIT_WARMUP, description="Warm-up requests per workload"
    )
    max_tokens: int = Field(
        defaults.MAX_TOKENS,
        ge=1,
        le=defaults.LIMIT_MAX_TOKENS,
        description="Output tokens per request",
    )
    concurrency: int = Field(
        defaults.CONCURRENCY,
        ge=1,
        le=defaults.LIMIT_CONCURRENCY,
        description="Requests in flight",
    )
    processes: int | None = Field(
        None, ge=1, description="Processes the streams are spread over; None: by the streams"
    )
    api: Literal["completions", "chat"] = Field("completions", description="OpenAI API")
    model: str | None = Field(None, description="Model name; None asks the server")
    logs: list[str | Path] = Field(
        default_factory=list,
        description="Logs to copy in: PATH or NAME=PATH, PATH may be a glob (collect --log)",
    )
    api_key: str | None = Field(None, exclude=True, repr=False, description="Never stored")
    resume: bool = Field(False, description="Continue an interrupted run")
    force: bool = Field(False, description="Replace an existing bundle")
    timeout_s: float = Field(
        defaults.REQUEST_TIMEOUT_S,
        gt=0,
        le=defaults.LIMIT_TIMEOUT_S,
        description="Longest time one request may take",
    )
    first_token_timeout_s: float = Field(
        defaults.FIRST_TOKEN_TIMEOUT_S,
        gt=0,
        le=defaults.LIMIT_TIMEOUT_S,
        description="Longest time from sending a request to its first token",
    )
    token_timeout_s: float = Field(
        defaults.TOKEN_TIMEOUT_S,
        gt=0,
        le=defaults.LIMIT_TIMEOUT_S,
        description="Longest wait between two tokens",
    )
    run_timeout_s: float = Field(
        defaults.RUN_TIMEOUT_S,
        gt=0,
        le=defaults.LIMIT_TIMEOUT_S,
        description="Longest time the run's requests may take in all",
    )
    engagement: Engagement = Field(
        default_factory=Engagement, description="Client, site, consultant given (None: keep)"
    )
    telemetry: TelemetrySettings | None = Field(
        None, description="GPU and host telemetry sampled during the run (--telemetry); None: off"
    )
    as_found: bool = Field(
        False,
        description="This arm is the client's configuration as found (the manifest's "
        "plan.as_found: the report's before-and-after leads with it)",
    )


def preflight(config: CollectConfig) -> None:
    """Every check that can refuse a collect, before it writes anything or draws a bar: the
    URL, the workloads and --log files, the output path, the bundle's plan and run, then the
    server (it must
    answer the OpenAI API collect calls). Raises a DiagnosticError saying what to do."""
    server_url(config.base_url)
    workloads = select_workloads(config.workloads, config.prompts)
    _check_api(workloads, config.api)
    log_sources(config.logs)
    check_output(config.out)
    _existing(config, [w.name for w in workloads])
    check_server(
        config.base_url,
        api=config.api,
        api_key=config.api_key,
        model=config.model,
        timeout_s=min(config.timeout_s, _PROBE_TIMEOUT_S),
    )


def collect(config: CollectConfig, *, reporter: Reporter, checked: bool = False) -> CollectRecap:
    """`diagnose collect`: one run of a running server into a bundle (new, added, or resumed).
    Runs preflight(config) first unless the caller did (`checked`)."""
    if not checked:
        preflight(config)
    workloads = select_workloads(config.workloads, config.prompts)
    logs = log_sources(config.logs)
    bundle, run = _open_run(config, [w.name for w in workloads])
    settings = RunSettings(
        base_url=config.base_url,
        workloads=workloads,
        requests=config.requests,
        warmup=config.warmup,
        max_tokens=config.max_tokens,
        concurrency=config.concurrency,
        processes=config.processes,
        api=config.api,
        model=config.model,
        api_key=config.api_key,
        timeout_s=config.timeout_s,
        first_token_timeout_s=config.first_token_timeout_s,
        token_timeout_s=config.token_timeout_s,
        run_timeout_s=config.run_timeout_s,
        telemetry=config.telemetry,
    )
    resumed = sum(not r.error for r in bundle.read_requests(run.arm, run.restart).records)
    total = len(workloads) * (config.warmup + config.requests)
    reporter.note(_planned(total, resumed, config.max_tokens))
    reporter.start(OVERALL, total)
    progress = WithOverall(reporter, OVERALL)
    try:
        run = collect_run(bundle, run, settings, reporter=progress)
    finally:
        _copy_logs(bundle, config, logs)
        _seal(bundle, config, reporter)
    if progress.done < total:  # warm-ups a resume did not repeat, or a run that stopped
        reporter.advance(OVERALL, total - progress.done, status=run.status)
    records = bundle.read_requests(run.arm, run.restart).records
    after, before = (
        bundle.run_file(run.arm, run.restart, n) for n in (METRICS_AFTER, METRICS_BEFORE)
    )
    return CollectRecap(
        bundle=bundle.path,
        run=run_id(run.arm, run.restart),
        status=run.status,
        failure=run.failure,
        engine=run.engine.name,
        version=run.engine.version,
        model=run.model,
        resumed=resumed,
        workloads=recap(records),
        engine_timing=engine_timing(records, _text(after), _text(before)),
    )


def _seal(bundle: Bundle, config: CollectConfig, reporter: Reporter) -> None:
    """Seal the run once it has ended (ok, failed or interrupted) and its logs are copied in,
    and say the seal, so the client's engineer watching can note it."""
    run = bundle.find_run(config.arm, config.restart)
    if run is not None and run.status != "running":
        reporter.note(seal_line(seal_run(bundle, config.arm, config.restart)))


def _planned(total: int, resumed: int, max_tokens: int) -> str:
    """The planned duration, said before the first request: from assumed speeds (the bar's
    ETA then follows the measured ones)."""
    a = EstimateAssumptions()
    seconds = max(total - resumed, 0) * (a.request_overhead_s + max_tokens / a.decode_tps)
    minutes = f"{seconds / 60:.0f} min" if seconds >= 60 else f"{seconds:.0f} s"
    return (
        f"Planned: {total} requests ({resumed} already recorded), about {minutes} at an assumed "
        f"{a.decode_tps:g} tok/s and {a.request_overhead_s:g} s per request; the "
        f"'{OVERALL}' bar's eta follows the measured speed from the first requests on."
    )


def _text(path: Path) -> str | None:
    return path.read_text(encoding="utf-8", errors="replace") if path.is_file() else None


def _check_api(workloads: list[Workload], api: str) -> None:
    if api == "chat":
        return  # plain prompts become one user message
    for workload in workloads:
        if any(p.messages is not None for p in workload.prompts):
            raise DiagnosticError(
                f"{workload.source}: workload {workload.name!r} holds chat messages; "
                "measure it with --api chat"
            )


def _open_run(config: CollectConfig, workloads: list[str]) -> tuple[Bundle, RunInfo]:
    found = _existing(config, workloads)
    if found is None:
        bundle = Bundle.create(config.out, _manifest(config, workloads), force=config.force)
        return bundle, _new_run(config)
    bundle, existing = found
    bundle.write_manifest(_add_arm(bundle.manifest, config))
    return bundle, existing if existing is not None else _new_run(config)


def _existing(config: CollectConfig, workloads: list[str]) -> tuple[Bundle, RunInfo | None] | None:
    """The bundle collect adds to and the run it continues (None when --resume starts it), or
    None for a new bundle; refuses a plan that differs, or a run already there without
    --resume. Reads only."""
    out = config.out
    if config.force or not out.exists() or (out.is_dir() and not any(out.iterdir())):
        return None
    bundle = Bundle.open(out)
    _check_plan(bundle, config, workloads)
    existing = bundle.find_run(config.arm, config.restart)
    if existing is not None and not config.resume:
        raise BundleError(_run_exists(bundle, existing))
    return bundle, existing


def _run_exists(bundle: Bundle, run: RunInfo) -> str:
    """What to do when the run is already in the bundle: never --force, which would delete
    the whole bundle (every arm and restart in it) to measure this one run again."""
    rid = run_id(run.arm, run.restart)
    records = bundle.read_requests(run.arm, run.restart).records
    done = sum(not r.error and not r.warmup for r in records)
    taken = [r.restart for r in bundle.runs() if r.arm == run.arm]
    after = max(taken, default=run.restart) + 1
    others = (
        f"--restart {after} to measure the server again after restarting it, --arm NAME for "
        "another configuration, or -o OTHER for another bundle"
    )
    if run.status == "ok":
        return f"{bundle.path}: run {rid} is already measured ({done} requests); use {others}"
    return (
        f"{bundle.path}: run {rid} is already there, {run.status} with {done} measured requests; "
        f"--resume continues it (failed requests are tried again), or use {others}"
    )


def _new_run(config: CollectConfig) -> RunInfo:
    return RunInfo(arm=config.arm, restart=config.restart, base_url=config.base_url)


def _manifest(config: CollectConfig, workloads: list[str]) -> Manifest:
    plan = PlanSpec(
        arms=[ArmSpec(name=config.arm)],
        workloads=workloads,
        requests=config.requests,
        warmup=config.warmup,
        restarts=config.restart + 1,
        max_tokens=config.max_tokens,
        concurrency=[config.concurrency],
        api=config.api,
        order="manual",
        as_found=config.arm if config.as_found else None,
    )
    target = Target(base_url=config.base_url, model=config.model)
    return Manifest(
        tool_version=__version__,
        engagement=config.engagement,
        target=target,
        plan=plan,
        collected=[run_id(config.arm, config.restart)],
    )


def _check_plan(bundle: Bundle, config: CollectConfig, workloads: list[str]) -> None:
    """Every arm of a bundle is measured the same way, or comparisons mean nothing."""
    plan = bundle.manifest.plan
    checks = [
        ("max-tokens", config.max_tokens, plan.max_tokens, str(plan.max_tokens)),
        ("api", config.api, plan.api, plan.api),
        ("workloads", workloads, plan.workloads, ",".join(plan.workloads)),
    ]
    for option, asked, planned, shown in checks:
        if asked != planned:
            raise BundleError(
                f"{bundle.path} was collected with --{option} {shown}; every arm must be "
                f"measured the same way: pass --{option} {shown}, or use another -o"
            )


def _add_arm(manifest: Manifest, config: CollectConfig) -> Manifest:
    plan = manifest.plan
    arms = list(plan.arms)
    if all(a.name != config.arm for a in arms):
        arms.append(ArmSpec(name=config.arm))
    levels = sorted(set(plan.concurrency) | {config.concurrency})
    update = {
        "arms": arms,
        "restarts": max(plan.restarts, config.restart + 1),
        "concurrency": levels,
    }
    if config.as_found:
        update["as_found"] = config.arm
    engagement = manifest.engagement.merged(config.engagement)  # a later collect may add them
    rid = run_id(config.arm, config.restart)
    collected = manifest.collected + ([] if rid in manifest.collected else [rid])
    return manifest.model_copy(
        update={
            "plan": plan.model_copy(update=update),
            "engagement": engagement,
            "collected": collected,
        }
    )


def _copy_logs(bundle: Bundle, config: CollectConfig, logs: dict[str, Path]) -> None:
    """Copy the --log files into the run as logs/<source>.log (redacted by the bundle)."""
    if not logs:
        return
    names = {source: log_file(source) for source in logs}
    for source, path in logs.items():
        bundle.write_log(config.arm, config.restart, source, path.read_bytes())
    run = bundle.find_run(config.arm, config.restart)
    if run is not None:
        listed = list(dict.fromkeys([*run.logs, *names.values()]))
        bundle.write_run(run.model_copy(update={"logs": listed, "sources": names}))
