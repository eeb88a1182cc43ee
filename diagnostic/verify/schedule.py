"""Every run the manifest planned: present, or its absence explained by what the bundle records
(an arm stopped at a look, a sweep interrupted, killed or stopped on a failure)."""

from __future__ import annotations

import re

from diagnostic.bundle.store import Bundle, run_id
from diagnostic.measure.schedule import Start, build_schedule
from diagnostic.schema.bundle import Manifest, RunInfo
from diagnostic.verify.outcome import Check

__all__ = ["check_schedule", "planned"]

_LOOK = re.compile(r"\blook (\d+)\b")
_ENDED = {
    "running": "the sweep ended during {rid}, which was left running (the sweep was killed)",
    "interrupted": "the sweep was interrupted during {rid}; `sweep --resume` continues it",
}


def planned(manifest: Manifest) -> list[Start] | None:
    """The starts the manifest planned, in order: a sweep's schedule (its arms, restarts, order
    and seed), or the runs `collect` was asked for; None for a bundle measured by hand before
    collect recorded them."""
    plan = manifest.plan
    if plan.order != "manual":
        arms = [a.name for a in plan.arms]
        return build_schedule(arms, restarts=plan.restarts, order=plan.order, seed=plan.seed)
    starts = []
    for index, rid in enumerate(manifest.collected):
        arm, _, restart = rid.rpartition("-r")
        if arm and restart.isdigit():
            starts.append(Start(index=index, block=None, arm=arm, restart=int(restart)))
    return starts or None


def _stopped(manifest: Manifest, start: Start) -> str | None:
    """The arm's recorded stop, when this start comes at or after the look that stopped it."""
    tp = manifest.time_plan
    why = tp.stopped.get(start.arm) if tp else None
    if why is None:
        return None
    looks = manifest.plan.design.looks
    found = _LOOK.search(why)
    if found and looks and start.block is not None:
        look = int(found[1])
        if not 1 <= look <= len(looks) or start.block < looks[look - 1]:
            return None  # a start before the look that stopped its arm had to run
    return f"not run: {start.arm} {why}"


def _ended(manifest: Manifest, last: RunInfo | None) -> str | None:
    """Why the starts after the last one that ran did not run, when the bundle says."""
    if last is None:
        return None
    tp = manifest.time_plan
    if tp is not None and tp.ended_early:
        return f"not run: {tp.ended_early}"
    text = _ENDED.get(last.status)
    return f"not reached: {text.format(rid=run_id(last.arm, last.restart))}" if text else None


def _sweep(manifest: Manifest, starts: list[Start], runs: dict[str, RunInfo]) -> Check:
    problems: list[str] = []
    details: list[str] = []
    order = {run_id(s.arm, s.restart): s for s in starts}
    for rid, run in runs.items():
        start = order.get(rid)
        if start is None:
            problems.append(
                f"runs/{rid}: not in the manifest's schedule ({len(manifest.plan.arms)} arms × "
                f"{manifest.plan.restarts} restarts): copied in, or the plan was edited"
            )
        elif start.block is not None and run.block != start.block:
            problems.append(
                f"runs/{rid}: run.json says block {run.block}, the schedule block "
                f"{start.block}: the run or the plan was edited"
            )
    ran = [s for s in starts if run_id(s.arm, s.restart) in runs]
    last = runs[run_id(ran[-1].arm, ran[-1].restart)] if ran else None
    for s in ran[:-1]:
        run = runs[run_id(s.arm, s.restart)]
        if run.status in _ENDED:
            problems.append(
                f"runs/{run_id(s.arm, s.restart)}: {run.status}, yet later starts of the "
                "schedule ran (a sweep ends there, and --resume measures it again first)"
            )
    for s in starts:
        rid = run_id(s.arm, s.restart)
        if rid in runs:
            continue
        after = bool(ran) and s.index > ran[-1].index
        why = _stopped(manifest, s) or (_ended(manifest, last) if after else None)
        if why is None:
            block = f" (block {s.block + 1})" if s.block is not None else ""
            problems.append(
                f"runs/{rid}: planned{block} and absent, with no reason recorded: deleted, or "
                "never run"
            )
        else:
            details.append(f"runs/{rid}: {why}")
    return _outcome(len(starts), runs, problems, details)


def _outcome(
    planned_n: int, runs: dict[str, RunInfo], problems: list[str], details: list[str]
) -> Check:
    failed = [f"{rid} ({r.failure or r.status})" for rid, r in runs.items() if r.status != "ok"]
    summary = f"{planned_n} planned runs: {len(runs)} present, {len(details)} absent with a reason"
    if failed:
        summary += f"; not ok: {', '.join(failed)}"
    if problems:
        return Check.failed("schedule", "integrity", summary, problems)
    return Check("schedule", "ok", summary, details=details)


def check_schedule(bundle: Bundle, runs: list[RunInfo]) -> Check:
    """Every planned run present, or absent with a reason; no run the plan did not plan."""
    manifest = bundle.manifest
    present = {run_id(r.arm, r.restart): r for r in runs}
    starts = planned(manifest)
    if starts is None:
        return Check(
            "schedule",
            "note",
            f"measured by hand (collect) before bundles recorded their runs: {len(runs)} runs, "
            "no schedule to hold them against",
        )
    if manifest.plan.order != "manual":
        return _sweep(manifest, starts, present)
    missing = [
        f"runs/{run_id(s.arm, s.restart)}: collect was asked for it (manifest.json collected) "
        "and it is gone"
        for s in starts
        if run_id(s.arm, s.restart) not in present
    ]
    return _outcome(len(starts), present, missing, [])
