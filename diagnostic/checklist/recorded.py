"""Automatic checks of what the bundle recorded: engine versions, server logs (of every
worker, read by `diagnose check`), /metrics snapshots, the client's clock against the engine's,
the environment of the machine that served, launch commands."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from diagnostic.analyse.engine_timing import engine_timing
from diagnostic.bundle.store import METRICS_AFTER, METRICS_BEFORE
from diagnostic.checklist.bundle_facts import BundleFacts
from diagnostic.checklist.registry import (
    CheckResult,
    as_number,
    few_names,
    register,
    run_name,
)
from diagnostic.errors import DiagnosticError
from diagnostic.logcheck.stage import FINDINGS_FILE
from diagnostic.schema.bundle import RunInfo
from diagnostic.schema.logfacts import CheckReport

__all__ = ["CLOCK_TOLERANCE"]

_TP_KEYS = ("tensor_parallel_size", "tp_size", "tp")
_PP_KEYS = ("pipeline_parallel_size", "pp_size", "pp")
# vLLM prefixes worker lines `(Worker_TP1 pid=…)` (`Worker_PP0_TP1` with pipeline stages);
# SGLang `[2025-05-02 16:13:35 TP1] ` (with `DP0`/`PP0`/`EP0` beside it when those are on).
_VLLM_WORKER = re.compile(r"\((Worker(?:_PP\d+)?_TP\d+)(?:_EP\d+)? pid=\d+\)")
_SGLANG_WORKER = re.compile(r"^\[\d{4}-\d\d-\d\d [\d:]+((?: [A-Z]{2}\d+)*? TP\d+)[^\]]*\]", re.M)


def _every_run(
    facts: BundleFacts, ok: Callable[[RunInfo], bool], what: str, missing: str
) -> CheckResult:
    """Done when `ok` holds for every run; evidence names the runs where it does not."""
    if not facts.runs:
        return CheckResult("not_done", "no runs in the bundle yet")
    bad = [run_name(r) for r in facts.runs if not ok(r)]
    if bad:
        return CheckResult(
            "not_done", f"{missing} in {len(bad)} of {len(facts.runs)} runs: {few_names(bad)}"
        )
    return CheckResult("done", f"{what} in all {len(facts.runs)} runs")


@register("engine_version_recorded", "engine version recorded")
def _engine_version(facts: BundleFacts) -> CheckResult:
    result = _every_run(facts, lambda r: bool(r.engine.version), "engine version", "no version")
    if result.status == "done":
        versions = sorted({f"{r.engine.name} {r.engine.version}" for r in facts.runs})
        return CheckResult("done", f"{result.evidence}: {few_names(versions)}")
    return result


@register("startup_log_every_run", "startup log captured for every run")
def _startup_log(facts: BundleFacts) -> CheckResult:
    def has_log(run: RunInfo) -> bool:
        return any(p.stat().st_size > 0 for p in facts.bundle.log_sources(run).values())

    return _every_run(facts, has_log, "a non-empty server log", "no server log")


@register("metrics_snapshots", "metrics snapshots present")
def _metrics(facts: BundleFacts) -> CheckResult:
    def has_both(run: RunInfo) -> bool:
        names = (METRICS_BEFORE, METRICS_AFTER)
        return all(facts.file_size(run, name) > 0 for name in names)

    return _every_run(facts, has_both, "/metrics before and after", "no /metrics snapshots")


CLOCK_TOLERANCE = 0.02  # the client's decode tok/s within 2% of the engine's own


@register("client_matches_engine", "client's decode timing agrees with the engine's own")
def _client_clock(facts: BundleFacts) -> CheckResult:
    timed = {}
    for run in facts.runs:
        texts = [_text(facts, run, n) for n in (METRICS_AFTER, METRICS_BEFORE)]
        t = engine_timing(facts.requests[run_name(run)], *texts)
        if t is not None:
            timed[run_name(run)] = t.ratio
    if not timed:
        return CheckResult(
            "not_applicable",
            "no run has the engine's own decode timing (vLLM /metrics decode-time histogram, "
            "llama.cpp answer timings) over the same requests",
        )
    off = [
        f"{rid} ({ratio:.3f})" for rid, ratio in timed.items() if abs(ratio - 1) > CLOCK_TOLERANCE
    ]
    span = f"{min(timed.values()):.4f}–{max(timed.values()):.4f}"
    if off:
        return CheckResult("not_done", f"client/engine off by > 2% in {few_names(off)}")
    return CheckResult("done", f"client/engine {span} over {len(timed)} of {len(facts.runs)} runs")


def _text(facts: BundleFacts, run: RunInfo, name: str) -> str | None:
    path = facts.bundle.run_file(run.arm, run.restart, name)
    return path.read_text(encoding="utf-8", errors="replace") if path.is_file() else None


def _find(data: Any, word: str) -> list[Any]:
    """Values of every key containing `word` (case-insensitive), at any depth."""
    found: list[Any] = []
    if isinstance(data, dict):
        for key, value in data.items():
            if word in str(key).lower():
                found.append(value)
            found.extend(_find(value, word))
    elif isinstance(data, list):
        for value in data:
            found.extend(_find(value, word))
    return found


def _host_of_server(run: RunInfo) -> str:
    """What the run's environment says of the machine that served it: 'gpu' (GPU and driver
    listed, by the machine that also ran the server), 'cpu' (that machine has no nvidia-smi: a
    CPU engine), 'remote' (the server ran elsewhere: the GPU listed, if any, is the measuring
    machine's) or 'missing' (nothing says)."""
    env = run.environment
    local = env.get("server_is_local")
    if local is False:
        return "remote"
    gpus = [g for g in _find(env, "gpu") if g not in ([], {}, None, "", "none")]
    if gpus and any(_find(env, "driver")):
        return "gpu"
    if not gpus and local is True and env.get("nvidia_smi") == "not found":
        return "cpu"
    return "missing"


_HOST_MISSING = {
    "remote": "the server ran on another machine, whose GPU and driver are not recorded",
    "missing": "no GPU and driver recorded",
}


@register("environment_recorded", "environment recorded (GPU/driver)")
def _environment(facts: BundleFacts) -> CheckResult:
    """Done only for runs whose GPU and driver were recorded on the machine that served them;
    CPU runs (no nvidia-smi there) have no GPU to record: not applicable when all are."""
    if not facts.runs:
        return CheckResult("not_done", "no runs in the bundle yet")
    by_kind: dict[str, list[str]] = defaultdict(list)
    for run in facts.runs:
        by_kind[_host_of_server(run)].append(run_name(run))
    gpu, cpu, total = len(by_kind["gpu"]), len(by_kind["cpu"]), len(facts.runs)
    bad = [
        f"{why} in {len(by_kind[kind])} of {total} runs: {few_names(by_kind[kind])}"
        for kind, why in _HOST_MISSING.items()
        if by_kind[kind]
    ]
    if bad:
        return CheckResult("not_done", "; ".join(bad))
    no_gpu = "on a machine without a GPU (a CPU engine: no nvidia-smi where the server ran)"
    if not gpu:
        return CheckResult("not_applicable", f"no GPU to record: all {total} runs {no_gpu}")
    names = few_names(sorted({n for r in facts.runs for n in _gpu_names(r.environment)}))
    said = f"GPU and driver recorded in {'all' if gpu == total else f'{gpu} of'} {total} runs"
    more = f"; {cpu} of {total} runs {no_gpu}" if cpu else ""
    return CheckResult("done", f"{said} ({names}){more}")


def _gpu_names(env: dict[str, Any]) -> list[str]:
    gpus = env.get("gpus")
    found = [g for g in gpus if isinstance(g, dict)] if isinstance(gpus, list) else []
    return [
        f"{g.get('name') or 'GPU'}, driver {g.get('driver') or env.get('driver')}" for g in found
    ]


@register("launch_command_recorded", "exact launch command recorded")
def _launch(facts: BundleFacts) -> CheckResult:
    def has_launch(run: RunInfo) -> bool:
        arm = facts.arms.get(run.arm)
        return bool(run.launch and run.launch.command) or bool(arm and arm.launch)

    return _every_run(facts, has_launch, "launch command", "no launch command (run or plan arm)")


def _parallel_size(args: dict[str, Any], keys: tuple[str, ...]) -> int | None:
    for key in keys:
        value = as_number(args.get(key))
        if value is not None:
            return int(value)
    return None


def _workers(text: str) -> set[str]:
    names = {m.group(1) for m in _VLLM_WORKER.finditer(text)}
    return names | {m.group(1).strip() for m in _SGLANG_WORKER.finditer(text)}


@register("logs_every_worker", "logs from every node/worker")
def _every_worker(facts: BundleFacts) -> CheckResult:
    judged, short = 0, []
    for run in facts.runs:
        tp = _parallel_size(run.server_args, _TP_KEYS)
        if tp is None:
            continue
        expected = tp * (_parallel_size(run.server_args, _PP_KEYS) or 1)
        if expected <= 1:
            continue
        judged += 1
        seen = len(_workers(facts.log_text(run)))
        if seen < expected:
            short.append(f"{run_name(run)} {seen}/{expected}")
    if not judged:
        return CheckResult(
            "not_applicable", "no run records a tensor/pipeline parallel size above 1"
        )
    if short:
        return CheckResult(
            "not_done", f"workers seen in the logs below the parallel size: {few_names(short)}"
        )
    return CheckResult("done", f"every worker logged in all {judged} multi-GPU runs")


@register("logs_checked", "startup logs read by `diagnose check`")
def _logs_checked(facts: BundleFacts) -> CheckResult:
    """Done when findings.json covers every run that has a log: one written before later runs
    were collected has not read theirs."""
    again = "run `diagnose check BUNDLE`"
    try:
        report = facts.bundle.read_json(FINDINGS_FILE, CheckReport)
    except DiagnosticError as exc:
        return CheckResult("not_done", f"findings.json unreadable ({exc}); {again} again")
    if report is None:
        return CheckResult("not_done", f"no findings.json: {again}")
    read = {f.run_id or (f.label or "").split("/")[0] for f in report.runs}
    logged = [run_name(r) for r in facts.runs if facts.bundle.log_sources(r)]
    unread = [rid for rid in logged if rid not in read]
    if unread:
        return CheckResult(
            "not_done",
            f"findings.json has not read the logs of {len(unread)} of {len(logged)} runs with "
            f"logs ({few_names(unread)}): {again} again",
        )
    return CheckResult(
        "done", f"findings.json written by `diagnose check` from the logs of {len(logged)} runs"
    )
