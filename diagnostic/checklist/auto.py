"""Automatic checklist checks: each one judges one checklist item from a bundle's files alone."""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Literal

from diagnostic.analyse.engine_timing import engine_timing
from diagnostic.bundle.store import METRICS_AFTER, METRICS_BEFORE, Bundle, run_id
from diagnostic.checklist.bundle_facts import BundleFacts
from diagnostic.defaults import MIN_REQUESTS, MIN_RESTARTS
from diagnostic.errors import DiagnosticError
from diagnostic.logcheck.stage import FINDINGS_FILE
from diagnostic.schema.bundle import ArmSpec, RunInfo
from diagnostic.schema.logfacts import CheckReport

__all__ = [
    "AUTO_CHECKS",
    "MIN_SWEEP_POINTS",
    "Check",
    "CheckResult",
    "Status",
    "arm_draft_length",
    "arm_speculation",
    "evaluate_check",
]

Status = Literal["done", "not_done", "not_applicable"]

MIN_SWEEP_POINTS = 3  # distinct draft lengths needed to see where the optimum lies
_SHOWN = 3  # offenders named in one evidence line before "and N more"

# Sweep parameter names that hold the draft length, in the order they are looked up.
_K_KEYS = ("k", "num_speculative_tokens", "num_draft_tokens", "draft_max", "draft_tokens")
_TP_KEYS = ("tensor_parallel_size", "tp_size", "tp")
_PP_KEYS = ("pipeline_parallel_size", "pp_size", "pp")
# vLLM prefixes worker lines `(Worker_TP1 pid=…)` (`Worker_PP0_TP1` with pipeline stages);
# SGLang `[2025-05-02 16:13:35 TP1] ` (with `DP0`/`PP0`/`EP0` beside it when those are on).
_VLLM_WORKER = re.compile(r"\((Worker(?:_PP\d+)?_TP\d+)(?:_EP\d+)? pid=\d+\)")
_SGLANG_WORKER = re.compile(r"^\[\d{4}-\d\d-\d\d [\d:]+((?: [A-Z]{2}\d+)*? TP\d+)[^\]]*\]", re.M)


@dataclass(frozen=True)
class CheckResult:
    """What one automatic check found: a status and one line of evidence."""

    status: Status
    evidence: str


CheckFn = Callable[[BundleFacts], CheckResult]


@dataclass(frozen=True)
class Check:
    """A named automatic check that a checklist item may refer to with `check: <name>`."""

    name: str
    title: str
    evaluate: CheckFn


AUTO_CHECKS: dict[str, Check] = {}


def _check(name: str, title: str) -> Callable[[CheckFn], CheckFn]:
    def register(fn: CheckFn) -> CheckFn:
        AUTO_CHECKS[name] = Check(name, title, fn)
        return fn

    return register


def evaluate_check(name: str, bundle: Bundle | BundleFacts) -> CheckResult:
    """Run the named check against a bundle (a BundleFacts shares reads between checks)."""
    facts = bundle if isinstance(bundle, BundleFacts) else BundleFacts(bundle)
    return AUTO_CHECKS[name].evaluate(facts)


def _rid(run: RunInfo) -> str:
    return run_id(run.arm, run.restart)


def _names(items: Iterable[str]) -> str:
    items = list(items)
    shown = ", ".join(items[:_SHOWN])
    return shown + (f" and {len(items) - _SHOWN} more" if len(items) > _SHOWN else "")


def _every_run(
    facts: BundleFacts, ok: Callable[[RunInfo], bool], what: str, missing: str
) -> CheckResult:
    """Done when `ok` holds for every run; evidence names the runs where it does not."""
    if not facts.runs:
        return CheckResult("not_done", "no runs in the bundle yet")
    bad = [_rid(r) for r in facts.runs if not ok(r)]
    if bad:
        return CheckResult(
            "not_done", f"{missing} in {len(bad)} of {len(facts.runs)} runs: {_names(bad)}"
        )
    return CheckResult("done", f"{what} in all {len(facts.runs)} runs")


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def arm_draft_length(arm: ArmSpec) -> float | None:
    """The arm's draft length from its sweep parameters (k or an engine's name for it)."""
    for key in _K_KEYS:
        if key in arm.params:
            return _number(arm.params[key])
    return None


def arm_speculation(arm: ArmSpec | None) -> bool | None:
    """Whether an arm speculates: `speculative` when set, else k > 0; None when unknown."""
    if arm is None:
        return None
    if arm.speculative is not None:
        return arm.speculative
    k = arm_draft_length(arm)
    return None if k is None else k > 0


def _arms_with_runs(facts: BundleFacts) -> dict[str, list[RunInfo]]:
    """Arms with usable runs (not failed, a measured request that succeeded), by name: a run
    whose every request failed shows nothing about its arm."""
    by_arm: dict[str, list[RunInfo]] = defaultdict(list)
    for run in facts.runs:
        if facts.usable(run):
            by_arm[run.arm].append(run)
    return dict(by_arm)


# -- the checks ----------------------------------------------------------------------------


@_check("engine_version_recorded", "engine version recorded")
def _engine_version(facts: BundleFacts) -> CheckResult:
    result = _every_run(facts, lambda r: bool(r.engine.version), "engine version", "no version")
    if result.status == "done":
        versions = sorted({f"{r.engine.name} {r.engine.version}" for r in facts.runs})
        return CheckResult("done", f"{result.evidence}: {_names(versions)}")
    return result


@_check("startup_log_every_run", "startup log captured for every run")
def _startup_log(facts: BundleFacts) -> CheckResult:
    def has_log(run: RunInfo) -> bool:
        return any(p.stat().st_size > 0 for p in facts.bundle.log_sources(run).values())

    return _every_run(facts, has_log, "a non-empty server log", "no server log")


@_check("metrics_snapshots", "metrics snapshots present")
def _metrics(facts: BundleFacts) -> CheckResult:
    def has_both(run: RunInfo) -> bool:
        names = (METRICS_BEFORE, METRICS_AFTER)
        return all(facts.file_size(run, name) > 0 for name in names)

    return _every_run(facts, has_both, "/metrics before and after", "no /metrics snapshots")


CLOCK_TOLERANCE = 0.02  # the client's decode tok/s within 2% of the engine's own


@_check("client_matches_engine", "client's decode timing agrees with the engine's own")
def _client_clock(facts: BundleFacts) -> CheckResult:
    timed = {}
    for run in facts.runs:
        texts = [_text(facts, run, n) for n in (METRICS_AFTER, METRICS_BEFORE)]
        t = engine_timing(facts.requests[_rid(run)], *texts)
        if t is not None:
            timed[_rid(run)] = t.ratio
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
        return CheckResult("not_done", f"client/engine off by > 2% in {_names(off)}")
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


@_check("environment_recorded", "environment recorded (GPU/driver)")
def _environment(facts: BundleFacts) -> CheckResult:
    """Done only for runs whose GPU and driver were recorded on the machine that served them;
    CPU runs (no nvidia-smi there) have no GPU to record: not applicable when all are."""
    if not facts.runs:
        return CheckResult("not_done", "no runs in the bundle yet")
    by_kind: dict[str, list[str]] = defaultdict(list)
    for run in facts.runs:
        by_kind[_host_of_server(run)].append(_rid(run))
    gpu, cpu, total = len(by_kind["gpu"]), len(by_kind["cpu"]), len(facts.runs)
    bad = [
        f"{why} in {len(by_kind[kind])} of {total} runs: {_names(by_kind[kind])}"
        for kind, why in _HOST_MISSING.items()
        if by_kind[kind]
    ]
    if bad:
        return CheckResult("not_done", "; ".join(bad))
    no_gpu = "on a machine without a GPU (a CPU engine: no nvidia-smi where the server ran)"
    if not gpu:
        return CheckResult("not_applicable", f"no GPU to record: all {total} runs {no_gpu}")
    names = _names(sorted({n for r in facts.runs for n in _gpu_names(r.environment)}))
    said = f"GPU and driver recorded in {'all' if gpu == total else f'{gpu} of'} {total} runs"
    more = f"; {cpu} of {total} runs {no_gpu}" if cpu else ""
    return CheckResult("done", f"{said} ({names}){more}")


def _gpu_names(env: dict[str, Any]) -> list[str]:
    gpus = env.get("gpus")
    found = [g for g in gpus if isinstance(g, dict)] if isinstance(gpus, list) else []
    return [
        f"{g.get('name') or 'GPU'}, driver {g.get('driver') or env.get('driver')}" for g in found
    ]


@_check("launch_command_recorded", "exact launch command recorded")
def _launch(facts: BundleFacts) -> CheckResult:
    def has_launch(run: RunInfo) -> bool:
        arm = facts.arms.get(run.arm)
        return bool(run.launch and run.launch.command) or bool(arm and arm.launch)

    return _every_run(facts, has_launch, "launch command", "no launch command (run or plan arm)")


@_check("requests_per_restart", f"≥{MIN_REQUESTS} measured requests per restart and workload")
def _requests(facts: BundleFacts) -> CheckResult:
    runs = [r for r in facts.runs if r.status != "failed"]
    if not runs:
        return CheckResult("not_done", "no completed runs in the bundle yet")
    planned = facts.bundle.manifest.plan.workloads
    seen = sorted({rec.workload for r in runs for rec in facts.measured(r)})
    workloads = planned or seen
    if not workloads:
        return CheckResult("not_done", "no measured requests in the bundle yet")
    short = []
    for run in runs:
        counts = Counter(rec.workload for rec in facts.measured(run))
        short += [f"{_rid(run)} {w}: {counts[w]}" for w in workloads if counts[w] < MIN_REQUESTS]
    cells = len(runs) * len(workloads)
    if short:
        return CheckResult(
            "not_done",
            f"{len(short)} of {cells} (run, workload) below {MIN_REQUESTS}: {_names(short)}",
        )
    return CheckResult("done", f"all {cells} (run, workload) have ≥{MIN_REQUESTS} measured")


@_check("restarts_per_arm", f"≥{MIN_RESTARTS} restarts per arm")
def _restarts(facts: BundleFacts) -> CheckResult:
    names = [*facts.arms, *sorted({r.arm for r in facts.runs} - facts.arms.keys())]
    if not names:
        return CheckResult("not_done", "no arms planned and no runs in the bundle yet")
    counts = {n: sum(facts.usable(r) for r in facts.runs if r.arm == n) for n in names}
    listed = _names(f"{n} {c}" for n, c in counts.items())
    if any(c < MIN_RESTARTS for c in counts.values()):
        few = _names(f"{n} {c}" for n, c in counts.items() if c < MIN_RESTARTS)
        return CheckResult(
            "not_done", f"restarts with measured requests below {MIN_RESTARTS}: {few}"
        )
    return CheckResult("done", f"usable restarts per arm: {listed}")


@_check("aa_arm_present", "A/A arm present")
def _aa(facts: BundleFacts) -> CheckResult:
    runs = _arms_with_runs(facts)
    pairs = [(a.name, a.aa_of) for a in facts.arms.values() if a.aa_of]
    if not pairs:
        return CheckResult("not_done", "no arm of the plan sets aa_of (same config run twice)")
    measured = [(a, b) for a, b in pairs if a in runs and b in runs]
    if not measured:
        return CheckResult(
            "not_done",
            f"A/A pair planned ({_names(f'{a} = {b}' for a, b in pairs)}) "
            "but not both arms have usable runs",
        )
    shown = _names(f"{a} repeats {b} ({len(runs[a])} + {len(runs[b])} runs)" for a, b in measured)
    return CheckResult("done", shown)


@_check("spec_on_and_off", "spec-on and spec-off runs both present")
def _spec_on_off(facts: BundleFacts) -> CheckResult:
    runs = _arms_with_runs(facts)
    side: dict[bool | None, list[str]] = defaultdict(list)
    for arm in runs:
        side[arm_speculation(facts.arms.get(arm))].append(arm)
    unknown = f"; speculation unknown for {_names(side[None])}" if side[None] else ""
    if side[True] and side[False]:
        return CheckResult(
            "done", f"spec off: {_names(side[False])}; spec on: {_names(side[True])}{unknown}"
        )
    missing = " and ".join(s for s, k in (("spec-off", False), ("spec-on", True)) if not side[k])
    hint = " (set speculative or params.k on the plan's arms)" if side[None] else ""
    return CheckResult("not_done", f"no {missing} run{unknown}{hint}")


@_check("draft_length_sweep", f"draft-length sweep (≥{MIN_SWEEP_POINTS} values of k)")
def _sweep(facts: BundleFacts) -> CheckResult:
    runs = _arms_with_runs(facts)
    ks: set[float] = set()
    for name in runs:
        arm = facts.arms.get(name)
        k = arm_draft_length(arm) if arm and arm_speculation(arm) else None
        if k is not None:
            ks.add(k)
    shown = ", ".join(f"{k:g}" for k in sorted(ks)) or "none"
    status: Status = "done" if len(ks) >= MIN_SWEEP_POINTS else "not_done"
    return CheckResult(status, f"draft lengths measured with speculation on: {shown}")


@_check("workloads_measured", "several workloads (e.g. code and prose) in every arm")
def _workloads(facts: BundleFacts) -> CheckResult:
    per_arm: dict[str, set[str]] = defaultdict(set)
    for run in facts.runs:
        per_arm[run.arm].update(rec.workload for rec in facts.measured(run))
    every = set().union(*per_arm.values()) if per_arm else set()
    if len(every) < 2:
        return CheckResult("not_done", f"workloads measured: {_names(sorted(every)) or 'none'}")
    lacking = [f"{a} lacks {_names(sorted(every - w))}" for a, w in per_arm.items() if every - w]
    if lacking:
        return CheckResult("not_done", "; ".join(lacking[:_SHOWN]))
    return CheckResult("done", f"{_names(sorted(every))} measured in all {len(per_arm)} arms")


@_check("same_prompts", "same prompts in every run")
def _same_prompts(facts: BundleFacts) -> CheckResult:
    sets: dict[str, dict[str, frozenset[str]]] = defaultdict(dict)
    for run in facts.runs:
        ids: dict[str, set[str]] = defaultdict(set)
        for rec in facts.measured(run):
            ids[rec.workload].add(rec.prompt_id)
        for workload, prompts in ids.items():
            sets[workload][_rid(run)] = frozenset(prompts)
    if not sets:
        return CheckResult("not_done", "no measured requests in the bundle yet")
    differ = []
    for workload, by_run in sets.items():
        common = Counter(by_run.values()).most_common(1)[0][0]
        differ += [f"{workload}: {rid}" for rid, ids in by_run.items() if ids != common]
    if differ:
        return CheckResult("not_done", f"prompt set differs from the others in {_names(differ)}")
    return CheckResult(
        "done", f"each workload used one prompt set in every run ({_names(sorted(sets))})"
    )


@_check("equal_output_lengths", "equal output lengths (completion_tokens == max_tokens)")
def _lengths(facts: BundleFacts) -> CheckResult:
    default = facts.bundle.manifest.plan.max_tokens
    total, short = 0, []
    for run in facts.runs:
        for rec in facts.measured(run):
            total += 1
            want = rec.max_tokens or default
            if rec.completion_tokens != want:
                got = "unknown" if rec.completion_tokens is None else rec.completion_tokens
                short.append(f"{_rid(run)} {rec.workload}#{rec.seq} {got}/{want}")
    if not total:
        return CheckResult("not_done", "no measured requests in the bundle yet")
    if short:
        return CheckResult(
            "not_done",
            f"{len(short)} of {total} measured requests not at max_tokens: {_names(short)}",
        )
    return CheckResult("done", f"all {total} measured requests reached max_tokens")


def _parallel_size(args: dict[str, Any], keys: tuple[str, ...]) -> int | None:
    for key in keys:
        value = _number(args.get(key))
        if value is not None:
            return int(value)
    return None


def _workers(text: str) -> set[str]:
    names = {m.group(1) for m in _VLLM_WORKER.finditer(text)}
    return names | {m.group(1).strip() for m in _SGLANG_WORKER.finditer(text)}


@_check("logs_every_worker", "logs from every node/worker")
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
            short.append(f"{_rid(run)} {seen}/{expected}")
    if not judged:
        return CheckResult(
            "not_applicable", "no run records a tensor/pipeline parallel size above 1"
        )
    if short:
        return CheckResult(
            "not_done", f"workers seen in the logs below the parallel size: {_names(short)}"
        )
    return CheckResult("done", f"every worker logged in all {judged} multi-GPU runs")


@_check("logs_checked", "startup logs read by `diagnose check`")
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
    logged = [_rid(r) for r in facts.runs if facts.bundle.log_sources(r)]
    unread = [rid for rid in logged if rid not in read]
    if unread:
        return CheckResult(
            "not_done",
            f"findings.json has not read the logs of {len(unread)} of {len(logged)} runs with "
            f"logs ({_names(unread)}): {again} again",
        )
    return CheckResult(
        "done", f"findings.json written by `diagnose check` from the logs of {len(logged)} runs"
    )
