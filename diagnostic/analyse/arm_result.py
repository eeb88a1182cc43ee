"""One ArmResult per arm: its decode throughput per workload and level (over the restart
summaries of `arms`), each run's acceptance and engine timing, acceptance read from the
/metrics snapshots around a workload where no request counted it."""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from diagnostic.analyse import stats
from diagnostic.analyse.acceptance import acceptance_from_texts
from diagnostic.analyse.arms import arm_workload, restarts_acceptance
from diagnostic.analyse.context import Context, arm_k
from diagnostic.analyse.engine_timing import engine_timing
from diagnostic.analyse.ksweep import pooled_alpha
from diagnostic.bundle.store import METRICS_AFTER, METRICS_BEFORE, Bundle, workload_metrics
from diagnostic.schema.analysis import (
    ALL_WORKLOADS,
    ArmResult,
    ArmWorkload,
    Estimate,
    RunSummary,
    ValueCI,
)
from diagnostic.schema.bundle import MAIN_SOURCE, RunInfo

__all__ = ["arm_result"]


def arm_result(ctx: Context, name: str, target_width: float) -> ArmResult:
    """The figures of one arm: per workload and level, per run, acceptance over its runs."""
    spec = ctx.specs.get(name)
    runs = [r for r in ctx.loaded.runs if r.arm == name]
    startup = [r.launch.startup_s for r in runs if r.launch and r.launch.startup_s is not None]
    cost = statistics.fmean(startup) if startup else None
    workloads = [
        arm_workload(
            ctx.index.get((name, w, c), []),
            w,
            c,
            noise=ctx.noise.get((name, w, c)),
            cost_restart_s=cost,
            target_width=target_width,
        )
        for c in ctx.levels
        for w in ctx.keys
    ]
    _metric_acceptance(ctx, runs, workloads)
    headline = [w for w in workloads if w.workload == ctx.headline]
    result = ArmResult(
        id=name,
        speculative=spec.speculative if spec else None,
        k=arm_k(spec),
        params=dict(spec.params) if spec else {},
        aa_of=spec.aa_of if spec else None,
        is_baseline=name == ctx.baseline,
        decode_tps=headline[0].decode_tps if headline else Estimate(estimate=None),
        workloads=workloads,
        runs=[_run_summary(ctx, r) for r in runs],
    )
    result.acceptance_length = _acceptance_ci(result.runs)
    result.alpha_hat = pooled_alpha([result])[0]
    return result


def _metric_acceptance(ctx: Context, runs: list[RunInfo], workloads: list[ArmWorkload]) -> None:
    """Per restart and workload, the acceptance length from the /metrics snapshots around the
    workload's measured requests (after its warm-up), where no per-request counts gave one."""
    multi = len(ctx.bundle.manifest.plan.concurrency) > 1
    by_restart = {r.restart: r for r in runs}
    for aw in workloads:
        if aw.workload == ALL_WORKLOADS:
            continue
        tag = aw.concurrency if multi else 0
        found = False
        for row in aw.restarts:
            run = by_restart.get(row.restart)
            if row.acceptance_length is not None or run is None:
                continue
            after = _read(ctx.bundle, run, workload_metrics(aw.workload, tag, "after"))
            before = _read(ctx.bundle, run, workload_metrics(aw.workload, tag, "before"))
            acc = acceptance_from_texts(after, before) if after and before else None
            if acc is not None and acc.source == "metrics" and acc.mean_acceptance_length:
                row.acceptance_length = acc.mean_acceptance_length
                row.acceptance_source = "metrics around the workload"
                found = True
        if found:
            aw.acceptance_length = restarts_acceptance(aw.restarts)


def _read(bundle: Bundle, run: RunInfo, name: str) -> str | None:
    path = bundle.run_file(run.arm, run.restart, name)
    return path.read_text(encoding="utf-8", errors="replace") if path.is_file() else None


def _server_log(bundle: Bundle, run: RunInfo) -> str | None:
    path = bundle.log_sources(run).get(MAIN_SOURCE)
    return path.read_text(encoding="utf-8", errors="replace") if path else None


def _run_summary(ctx: Context, run: RunInfo) -> RunSummary:
    bundle = ctx.bundle
    after, before = _read(bundle, run, METRICS_AFTER), _read(bundle, run, METRICS_BEFORE)
    records = ctx.loaded.records[(run.arm, run.restart)]  # read once, by load_samples
    return RunSummary(
        restart=run.restart,
        block=run.block,
        status=run.status,
        engine=run.engine.name,
        engine_version=run.engine.version,
        acceptance=acceptance_from_texts(after, before, _server_log(bundle, run)),
        engine_timing=engine_timing(records, after, before),
    )


def _acceptance_ci(runs: Sequence[RunSummary]) -> ValueCI | None:
    values = [
        r.acceptance.mean_acceptance_length
        for r in runs
        if r.acceptance and r.acceptance.mean_acceptance_length is not None
    ]
    if not values:
        return None
    ci = stats.t_interval(values)
    return ValueCI(estimate=ci.estimate, ci_low=ci.low, ci_high=ci.high, n=ci.n)
