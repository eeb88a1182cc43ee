"""Automatic checks of the measurement's design: enough requests and restarts, an A/A arm,
speculation on and off, a draft-length sweep, several workloads, the same prompts everywhere,
outputs of equal length."""

from __future__ import annotations

from collections import Counter, defaultdict

from diagnostic.checklist.bundle_facts import BundleFacts
from diagnostic.checklist.registry import (
    SHOWN,
    CheckResult,
    Status,
    as_number,
    few_names,
    register,
    run_name,
)
from diagnostic.defaults import MIN_REQUESTS, MIN_RESTARTS
from diagnostic.schema.bundle import ArmSpec, RunInfo

__all__ = ["MIN_SWEEP_POINTS", "arm_draft_length", "arm_speculation"]

MIN_SWEEP_POINTS = 3  # distinct draft lengths needed to see where the optimum lies

# Sweep parameter names that hold the draft length, in the order they are looked up.
_K_KEYS = ("k", "num_speculative_tokens", "num_draft_tokens", "draft_max", "draft_tokens")


def arm_draft_length(arm: ArmSpec) -> float | None:
    """The arm's draft length from its sweep parameters (k or an engine's name for it)."""
    for key in _K_KEYS:
        if key in arm.params:
            return as_number(arm.params[key])
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


@register("requests_per_restart", f"≥{MIN_REQUESTS} measured requests per restart and workload")
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
        short += [
            f"{run_name(run)} {w}: {counts[w]}" for w in workloads if counts[w] < MIN_REQUESTS
        ]
    cells = len(runs) * len(workloads)
    if short:
        return CheckResult(
            "not_done",
            f"{len(short)} of {cells} (run, workload) below {MIN_REQUESTS}: {few_names(short)}",
        )
    return CheckResult("done", f"all {cells} (run, workload) have ≥{MIN_REQUESTS} measured")


@register("restarts_per_arm", f"≥{MIN_RESTARTS} restarts per arm")
def _restarts(facts: BundleFacts) -> CheckResult:
    names = [*facts.arms, *sorted({r.arm for r in facts.runs} - facts.arms.keys())]
    if not names:
        return CheckResult("not_done", "no arms planned and no runs in the bundle yet")
    counts = {n: sum(facts.usable(r) for r in facts.runs if r.arm == n) for n in names}
    listed = few_names(f"{n} {c}" for n, c in counts.items())
    if any(c < MIN_RESTARTS for c in counts.values()):
        few = few_names(f"{n} {c}" for n, c in counts.items() if c < MIN_RESTARTS)
        return CheckResult(
            "not_done", f"restarts with measured requests below {MIN_RESTARTS}: {few}"
        )
    return CheckResult("done", f"usable restarts per arm: {listed}")


@register("aa_arm_present", "A/A arm present")
def _aa(facts: BundleFacts) -> CheckResult:
    runs = _arms_with_runs(facts)
    pairs = [(a.name, a.aa_of) for a in facts.arms.values() if a.aa_of]
    if not pairs:
        return CheckResult("not_done", "no arm of the plan sets aa_of (same config run twice)")
    measured = [(a, b) for a, b in pairs if a in runs and b in runs]
    if not measured:
        return CheckResult(
            "not_done",
            f"A/A pair planned ({few_names(f'{a} = {b}' for a, b in pairs)}) "
            "but not both arms have usable runs",
        )
    shown = few_names(
        f"{a} repeats {b} ({len(runs[a])} + {len(runs[b])} runs)" for a, b in measured
    )
    return CheckResult("done", shown)


@register("spec_on_and_off", "spec-on and spec-off runs both present")
def _spec_on_off(facts: BundleFacts) -> CheckResult:
    runs = _arms_with_runs(facts)
    side: dict[bool | None, list[str]] = defaultdict(list)
    for arm in runs:
        side[arm_speculation(facts.arms.get(arm))].append(arm)
    unknown = f"; speculation unknown for {few_names(side[None])}" if side[None] else ""
    if side[True] and side[False]:
        return CheckResult(
            "done", f"spec off: {few_names(side[False])}; spec on: {few_names(side[True])}{unknown}"
        )
    missing = " and ".join(s for s, k in (("spec-off", False), ("spec-on", True)) if not side[k])
    hint = " (set speculative or params.k on the plan's arms)" if side[None] else ""
    return CheckResult("not_done", f"no {missing} run{unknown}{hint}")


@register("draft_length_sweep", f"draft-length sweep (≥{MIN_SWEEP_POINTS} values of k)")
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


@register("workloads_measured", "several workloads (e.g. code and prose) in every arm")
def _workloads(facts: BundleFacts) -> CheckResult:
    per_arm: dict[str, set[str]] = defaultdict(set)
    for run in facts.runs:
        per_arm[run.arm].update(rec.workload for rec in facts.measured(run))
    every = set().union(*per_arm.values()) if per_arm else set()
    if len(every) < 2:
        return CheckResult("not_done", f"workloads measured: {few_names(sorted(every)) or 'none'}")
    lacking = [f"{a} lacks {few_names(sorted(every - w))}" for a, w in per_arm.items() if every - w]
    if lacking:
        return CheckResult("not_done", "; ".join(lacking[:SHOWN]))
    return CheckResult("done", f"{few_names(sorted(every))} measured in all {len(per_arm)} arms")


@register("same_prompts", "same prompts in every run")
def _same_prompts(facts: BundleFacts) -> CheckResult:
    sets: dict[str, dict[str, frozenset[str]]] = defaultdict(dict)
    for run in facts.runs:
        ids: dict[str, set[str]] = defaultdict(set)
        for rec in facts.measured(run):
            ids[rec.workload].add(rec.prompt_id)
        for workload, prompts in ids.items():
            sets[workload][run_name(run)] = frozenset(prompts)
    if not sets:
        return CheckResult("not_done", "no measured requests in the bundle yet")
    differ = []
    for workload, by_run in sets.items():
        common = Counter(by_run.values()).most_common(1)[0][0]
        differ += [f"{workload}: {rid}" for rid, ids in by_run.items() if ids != common]
    if differ:
        return CheckResult("not_done", f"prompt set differs from the others in {few_names(differ)}")
    return CheckResult(
        "done", f"each workload used one prompt set in every run ({few_names(sorted(sets))})"
    )


@register("equal_output_lengths", "equal output lengths (completion_tokens == max_tokens)")
def _lengths(facts: BundleFacts) -> CheckResult:
    default = facts.bundle.manifest.plan.max_tokens
    total, short = 0, []
    for run in facts.runs:
        for rec in facts.measured(run):
            total += 1
            want = rec.max_tokens or default
            if rec.completion_tokens != want:
                got = "unknown" if rec.completion_tokens is None else rec.completion_tokens
                short.append(f"{run_name(run)} {rec.workload}#{rec.seq} {got}/{want}")
    if not total:
        return CheckResult("not_done", "no measured requests in the bundle yet")
    if short:
        return CheckResult(
            "not_done",
            f"{len(short)} of {total} measured requests not at max_tokens: {few_names(short)}",
        )
    return CheckResult("done", f"all {total} measured requests reached max_tokens")
