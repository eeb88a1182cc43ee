"""What a day on site allows: planning advice bounded by the bundle's own timings.

One restart costs what this bundle's restarts took (run.json: started → ended; a sweep
writes started_at before it launches the server, so that includes the start-up); a day
holds defaults.DAY_ON_SITE_S of measuring. Advice that needs more than that says so instead
of asking for it.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from datetime import datetime

import pandas as pd

from diagnostic import defaults
from diagnostic.analyse import pairing, power
from diagnostic.analyse.extension import ASSURANCE
from diagnostic.schema.analysis import ALL_WORKLOADS, Analysis, Comparison
from diagnostic.schema.arms import PlanningAdvice
from diagnostic.schema.bundle import PlanSpec, RunInfo

__all__ = ["Day", "day", "measured_noise"]

ARMS_COMPARED = 2  # an arm and its baseline, restarted alike


def _hours(seconds: float) -> str:
    return f"{seconds / 3600:.1f} h" if seconds >= 3600 else f"{seconds / 60:.0f} min"


@dataclass(frozen=True)
class Day:
    """The cost of one restart in this bundle and the measuring time of a day on site."""

    restart_s: float | None  # None: the bundle recorded no run's duration
    workloads: int = 1
    warmup: int = defaults.WARMUP
    budget_s: float = defaults.DAY_ON_SITE_S

    def restarts(self, arms: int = ARMS_COMPARED) -> int | None:
        """Restarts per arm a day holds for `arms` arms, at this bundle's restart cost."""
        if not self.restart_s:
            return None
        return math.floor(self.budget_s / (arms * self.restart_s))

    def extension(self, c: Comparison, arms: int = ARMS_COMPARED) -> str:
        """The planned extension for an undecided comparison, its cost and its probability of
        deciding (the analysis' outlook): the smallest that reaches ASSURANCE within a day
        on site for `arms` arms, else the largest a day holds, with its lower assurance.
        A withheld comparison: the restarts a verdict needs."""
        if c.withheld:
            need = max(0, defaults.MIN_RESTARTS - min(c.n_restarts_arm, c.n_restarts_baseline))
            return f"a verdict needs {defaults.MIN_RESTARTS} restarts per arm: {need} more"
        points = c.outlook.extension if c.outlook else []
        fit = self.restarts(arms)
        inside = [p for p in points if fit is None or p.added <= fit]
        pick = next((p for p in inside if p.assurance >= ASSURANCE), None)
        if pick is None and not inside:
            return (
                f"a day on site holds {fit} restarts per arm for {arms} arms: too few to add "
                "enough to decide it"
                if points
                else ""
            )
        pick = pick or inside[-1]
        cost = f", ≈ {_hours(pick.added * arms * self.restart_s)}" if self.restart_s else ""
        held = ""
        if pick.assurance < ASSURANCE:
            held = (
                " (the most a day on site holds)"
                if len(inside) < len(points)
                else " (the largest extension considered)"
            )
        more = f"{pick.added} more restart{'s' if pick.added != 1 else ''} per arm"
        return (
            f"{more} ({pick.restarts} in all{cost}){held} would decide it with probability "
            f"{pick.assurance:.0%}"
        )

    def decides(self, a: Analysis, plan: PlanSpec) -> str:
        """What a day on site decides at this bundle's measured noise, in two sentences, when
        it could not decide the plan's target speedup with ASSURANCE; '' when it could, or
        without the cost of a restart or the noise. The fixed plan of analyse.power.day_power
        on the bundle's arms and declared comparisons, at its requests per restart, as
        `sweep --dry-run --pilot BUNDLE` computes it."""
        family = [c for c in a.comparisons if c.kind == "spec" and not c.derived]
        noise = measured_noise(a)
        if not self.restart_s or not family or noise.empty:
            return ""
        arms = len({c.arm for c in family})
        references = 2 if plan.design.pool_aa else 1
        d = power.day_power(
            pairing.block_sd(noise, plan.requests, references),
            start_s=self.restart_s,
            arms=max(len(plan.arms), len(a.arms)),
            speculative=arms,
            keys=max(1, round(len(family) / arms)),
            target=plan.design.target or defaults.TARGET,
            margin=a.noise_band.delta,
            rho=power.reference_correlation(references),
            budget_s=self.budget_s,
        )
        if d.decides_target:
            return ""
        restart_cv = math.sqrt(max(pairing.pooled_noise(noise)[1], 0.0))
        return f"At the noise this bundle measured (restart CV {restart_cv:.0%}), {d.sentence()}"

    def plan(self, p: PlanningAdvice) -> str:
        """Requests and restarts for the interval width `p` aims at, bounded by the day: at
        least defaults.MIN_REQUESTS requests per restart (fewer and restart means wobble)."""
        width = f"{p.target_width * 100:.0f}%"
        m = max(defaults.MIN_REQUESTS, p.recommended_requests_per_restart or 0)
        per_request = p.cost_request_s or 0.0
        cost = p.cost_restart_s + (m + self.warmup) * per_request * self.workloads
        fit = math.floor(self.budget_s / (ARMS_COMPARED * cost))
        n = p.recommended_restarts
        if n is not None and max(n, defaults.MIN_RESTARTS) <= fit:
            n = max(n, defaults.MIN_RESTARTS)
            total = ARMS_COMPARED * n * cost
            return f"{m} requests × {n} restarts per arm: ≈ {_hours(total)} for two arms."
        need = f"about {n}" if n is not None else "over 1,000"
        return (
            f"A {width} wide interval needs {need} restarts per arm; a day holds {fit} at "
            f"{m} requests: not resolvable in a day."
        )


def measured_noise(a: Analysis) -> pd.DataFrame:
    """The bundle's variance components as the sweep's planner pools them
    (pairing.pooled_noise): one row per arm, workload and level with planning advice, the
    derived "all workloads" rows left out. Each restart is taken to serve the whole prompt
    set (prompts = 1: a rotating design's prompt-by-arm share is left out)."""
    rows = [
        {"s1_sq": p.s1_sq, "t2_sq": p.t2_sq, "p2_sq": p.p2_sq, "prompts": 1}
        for arm in a.arms
        for w in arm.workloads
        if (p := w.planning) is not None and w.workload != ALL_WORKLOADS
        if p.s1_sq is not None and p.t2_sq is not None
    ]
    return pd.DataFrame(rows, columns=["s1_sq", "t2_sq", "p2_sq", "prompts"], dtype=float)


def day(runs: list[RunInfo], *, workloads: int, warmup: int) -> Day:
    """The day of this bundle: the median restart's wall time, launch to end (a sweep's
    run.json starts before its launch; adding the recorded start-up counted it twice)."""
    walls = [
        (datetime.fromisoformat(r.ended_at) - datetime.fromisoformat(r.started_at)).total_seconds()
        for r in runs
        if r.ended_at and r.status == "ok"
    ]
    if not walls:
        return Day(restart_s=None, workloads=workloads, warmup=warmup)
    return Day(restart_s=statistics.median(walls), workloads=max(1, workloads), warmup=warmup)
