"""What a restart of this bundle costs and what a day on site allows.

`costs` measures, once, the requests each restart served and what a restart cost: start-up
(run.json), the seconds of one request (restart summaries) and the rest of its wall time
(run.json started → ended, less its requests and, where recorded, its start-up: a sweep
writes started_at before it launches the server). Every figure the report states about
requests per restart and the time of restarts (methodology, extensions, the planning
column, what a day decides) comes from it. A day holds defaults.DAY_ON_SITE_S of measuring:
advice that needs more says so instead.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, replace
from datetime import datetime

import pandas as pd

from diagnostic import defaults
from diagnostic.analyse import pairing, power
from diagnostic.analyse.extension import ASSURANCE
from diagnostic.report import fmt as f
from diagnostic.report import select as sel
from diagnostic.schema.analysis import ALL_WORKLOADS, Analysis, Comparison
from diagnostic.schema.arms import PlanningAdvice
from diagnostic.schema.bundle import PlanSpec, RunInfo

__all__ = ["Costs", "Day", "costs", "day", "measured_noise"]

ARMS_COMPARED = 2  # an arm and its baseline, restarted alike


def _hours(seconds: float) -> str:
    return f"{seconds / 3600:.1f} h" if seconds >= 3600 else f"{seconds / 60:.0f} min"


def _seconds(value: float) -> str:
    return f"{value:.2g} s" if value < 10 else f"{value:.0f} s"


@dataclass(frozen=True)
class Costs:
    """The requests each restart of the bundle served and what a restart cost (medians)."""

    requests: list[tuple[str, int]]  # ('blocks 1–2', 15) in order: measured per workload
    warmup: int  # warm-up requests per restart and workload
    workloads: int  # workloads (times concurrency levels) each restart served
    restarts: int  # restarts timed
    startup_s: float | None = None  # launch to healthy
    request_s: float | None = None  # one measured request (end to end)
    rest_s: float = 0.0  # the rest of a restart's wall time: stop, gaps, bookkeeping

    @property
    def current(self) -> int | None:
        """Measured requests per restart and workload of the last restarts."""
        return self.requests[-1][1] if self.requests else None

    def restart_s(self, requests: int | None = None) -> float | None:
        """Seconds of one restart at `requests` measured requests per workload (default:
        the last restarts'); None when the bundle timed none."""
        m = self.current if requests is None else requests
        if m is None or self.request_s is None or not self.restarts:
            return None
        serve = (m + self.warmup) * self.request_s * self.workloads
        return (self.startup_s or 0.0) + serve + self.rest_s

    def requests_text(self) -> str:
        """'15 measured + 1 warm-up', or per block when the design changed them."""
        if len(self.requests) <= 1:
            n = str(self.current) if self.current is not None else f.MISSING
            return f"{n} measured + {self.warmup} warm-up"
        parts = [f"{n} in {where}" for where, n in self.requests]
        return f"{', '.join(parts)} (measured, each after {self.warmup} warm-up)"

    def cost_text(self) -> str:
        """The one statement of what a restart costs, which every estimate uses."""
        total = self.restart_s()
        if total is None or self.request_s is None:
            return f.MISSING
        start = "not recorded" if self.startup_s is None else _seconds(self.startup_s)
        rest = _seconds(self.rest_s)
        return (
            f"start-up {start}, one request {_seconds(self.request_s)}, the rest of a restart "
            f"{rest} (stopping, gaps): medians over {self.restarts} restarts. A restart at "
            f"{self.current} requests + {self.warmup} warm-up per workload: {_seconds(total)}. "
            "Every time estimate of this report (more restarts, the planning column) uses "
            "these figures."
        )


@dataclass(frozen=True)
class Day:
    """The cost of one restart in this bundle and the measuring time of a day on site."""

    restart_s: float | None  # None: the bundle recorded no run's duration
    workloads: int = 1
    warmup: int = defaults.WARMUP
    budget_s: float = defaults.DAY_ON_SITE_S
    costs: Costs | None = None  # what restart_s and every planned cost come from

    def restarts(self, arms: int = ARMS_COMPARED) -> int | None:
        """Restarts per arm a day holds for `arms` arms, at this bundle's restart cost."""
        if not self.restart_s:
            return None
        return math.floor(self.budget_s / (arms * self.restart_s))

    def extension(self, c: Comparison, arms: int = ARMS_COMPARED) -> str:
        """The planned extension that settles an undecided comparison, one figure wherever it
        is quoted: the analysis' smallest extension that decides it with probability
        ASSURANCE (its outlook), else the largest it considered, with its lower probability;
        then its cost for `arms` arms, and whether a day on site holds it. A withheld
        comparison: the restarts a verdict needs."""
        if c.withheld:
            need = max(0, defaults.MIN_RESTARTS - min(c.n_restarts_arm, c.n_restarts_baseline))
            return f"a verdict needs {defaults.MIN_RESTARTS} restarts per arm: {need} more"
        points = c.outlook.extension if c.outlook else []
        if not points:
            return ""
        pick = next((p for p in points if p.assurance >= ASSURANCE), points[-1])
        cost = (
            f", ≈ {_hours(pick.added * arms * self.restart_s)} for {arms} arms"
            if self.restart_s
            else ""
        )
        held = " (the largest extension considered)" if pick.assurance < ASSURANCE else ""
        fit = self.restarts(arms)
        over = (
            f"; a day on site holds {fit} per arm for {arms} arms"
            if fit is not None and pick.added > fit
            else ""
        )
        more = f"{pick.added} more restart{'s' if pick.added != 1 else ''} per arm"
        return (
            f"{more} ({pick.restarts} in all{cost}){held} would decide it with probability "
            f"{pick.assurance:.0%}{over}"
        )

    def decides(self, a: Analysis, plan: PlanSpec) -> str:
        """What a day on site decides at this bundle's measured noise, in two sentences, when
        it could not decide the plan's target speedup with ASSURANCE; '' when it could, or
        without the cost of a restart or the noise. The fixed plan of analyse.power.day_power
        on the bundle's arms and declared comparisons, at its requests per restart, as
        `sweep --dry-run --pilot BUNDLE` computes it. A bundle without a speculative
        comparison (a noise study) gets the sentence always, for one speculative arm added
        to its arms."""
        family = [c for c in a.comparisons if c.kind == "spec" and not c.derived]
        noise = measured_noise(a)
        restart_s = self.restart_s
        if not restart_s or noise.empty:
            return ""
        # A bundle without speculation (a noise study: the baseline and its A/A repeat) says
        # what its noise leaves a day with one speculative arm added, decided or not.
        added = 0 if family else 1
        arms = len({c.arm for c in family}) or added
        keys = round(len(family) / arms) if family else len(sel.workloads(a)) * len(sel.levels(a))
        references = 2 if plan.design.pool_aa else 1

        def day(scale: float) -> power.DayPower:  # at the restart variance times `scale`
            scaled = noise.assign(t2_sq=noise["t2_sq"] * scale)
            return power.day_power(
                pairing.block_sd(scaled, plan.requests, references),
                start_s=restart_s,
                arms=max(len(plan.arms), len(a.arms)) + added,
                speculative=arms,
                keys=max(1, keys),
                target=plan.design.target or defaults.TARGET,
                margin=a.noise_band.delta,
                budget_s=self.budget_s,
            )

        d = day(1.0)
        if d.decides_target and not added:
            return ""
        restart_cv = math.sqrt(max(pairing.pooled_noise(noise)[1], 0.0))
        df = _restart_df(a)
        if df and restart_cv > 0:  # the CV's own uncertainty: the figure at its 95% limits
            low, high = power.variance_limits(df)
            d = replace(
                d,
                at_target_limits=(day(high).at_target, day(low).at_target),
                cv_limits=(restart_cv * math.sqrt(low), restart_cv * math.sqrt(high)),
                cv_df=df,
            )
        spec = ", with one speculative arm added," if added else ","
        return (
            f"At the restart-to-restart variation this bundle measured ({restart_cv:.0%}){spec} "
            f"{d.sentence()}"
        )

    def plan(self, p: PlanningAdvice) -> str:
        """Requests and restarts for the interval width `p` aims at, bounded by the day: at
        least defaults.MIN_REQUESTS requests per restart (fewer and restart means wobble)."""
        width = f"{p.target_width * 100:.0f}%"
        m = max(defaults.MIN_REQUESTS, p.recommended_requests_per_restart or 0)
        cost = self.costs.restart_s(m) if self.costs is not None else None
        n = p.recommended_restarts
        if not cost:
            need = f"{max(n, defaults.MIN_RESTARTS)}" if n is not None else "over 1,000"
            return f"{m} requests × {need} restarts per arm (the bundle timed no restart)."
        fit = math.floor(self.budget_s / (ARMS_COMPARED * cost))
        if n is not None and max(n, defaults.MIN_RESTARTS) <= fit:
            n = max(n, defaults.MIN_RESTARTS)
            total = ARMS_COMPARED * n * cost
            return f"{m} requests × {n} restarts per arm: ≈ {_hours(total)} for two arms."
        need = f"about {n}" if n is not None else "over 1,000"
        return (
            f"A {width} wide interval needs {need} restarts per arm; a day holds {fit} at "
            f"{m} requests: not resolvable in a day."
        )


def _restart_df(a: Analysis) -> int:
    """Degrees of freedom of the pooled restart variance: each arm's restarts less one, on
    one workload (its workloads share the restarts)."""
    df = 0
    for arm in a.arms:
        rows = [w for w in arm.workloads if w.workload != ALL_WORKLOADS and w.planning]
        if rows:
            df += max(len(rows[0].restarts) - 1, 0)
    return df


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


def _served(a: Analysis) -> dict[tuple[str, int], tuple[int | None, int, int]]:
    """(arm, restart) → (block, measured requests per workload, workloads × levels served),
    from the analysis' restart summaries."""
    counts: dict[tuple[str, int], list[tuple[int | None, int]]] = {}
    for arm in a.arms:
        for aw in arm.workloads:
            for r in aw.restarts if aw.workload != ALL_WORKLOADS else []:
                counts.setdefault((arm.id, r.restart), []).append((r.block, r.n_requests))
    return {key: (rows[0][0], max(n for _, n in rows), len(rows)) for key, rows in counts.items()}


def _spans(per_key: dict[int, int], word: str) -> list[tuple[str, int]]:
    """{1: 15, 2: 15, 3: 6} → [('blocks 1–2', 15), ('block 3', 6)] (keys 0-based)."""
    out: list[tuple[list[int], int]] = []
    for key in sorted(per_key):
        if out and out[-1][1] == per_key[key]:
            out[-1][0].append(key)
        else:
            out.append(([key], per_key[key]))
    return [
        (f"{word}s {ks[0] + 1}–{ks[-1] + 1}" if len(ks) > 1 else f"{word} {ks[0] + 1}", n)
        for ks, n in out
    ]


def costs(runs: list[RunInfo], a: Analysis, *, warmup: int) -> Costs:
    """What a restart of this bundle cost, measured once (see the module docstring): the
    requests per restart and workload (the most common count of each block, or of each
    restart without blocks), the medians of start-up, of one request (restart summaries'
    medians) and of the rest of a restart (wall time less its requests and start-up)."""
    served = _served(a)
    blocked = any(block is not None for block, _, _ in served.values())
    by_key: dict[int, list[int]] = {}
    for (_, restart), (block, n, _) in served.items():
        by_key.setdefault(block if blocked and block is not None else restart, []).append(n)
    modes = {k: statistics.mode(ns) for k, ns in by_key.items()}
    requests = _spans(modes, "block" if blocked else "restart")
    e2e = [
        r.e2e_median_s
        for arm in a.arms
        for aw in arm.workloads
        if aw.workload != ALL_WORKLOADS
        for r in aw.restarts
        if r.e2e_median_s is not None
    ]
    request = statistics.median(e2e) if e2e else None
    startup = [r.launch.startup_s for r in runs if r.launch and r.launch.startup_s is not None]
    rest = []
    for r in runs:
        if r.ended_at and r.status == "ok" and (r.arm, r.restart) in served and request:
            _, n, served_workloads = served[(r.arm, r.restart)]
            wall = datetime.fromisoformat(r.ended_at) - datetime.fromisoformat(r.started_at)
            started = r.launch.startup_s if r.launch and r.launch.startup_s else 0.0
            serve = (n + warmup) * request * served_workloads
            rest.append(wall.total_seconds() - serve - started)
    widths = [w for _, _, w in served.values()]
    return Costs(
        requests=requests if len({n for _, n in requests}) > 1 else requests[-1:],
        warmup=warmup,
        workloads=statistics.mode(widths) if widths else 1,
        restarts=len(rest),
        startup_s=statistics.median(startup) if startup else None,
        request_s=request,
        rest_s=max(0.0, statistics.median(rest)) if rest else 0.0,
    )


def day(runs: list[RunInfo], a: Analysis, *, warmup: int) -> Day:
    """The day of this bundle: a restart costs what `costs` measured, at the requests per
    restart the bundle ran last."""
    measured = costs(runs, a, warmup=warmup)
    return Day(
        restart_s=measured.restart_s(),
        workloads=measured.workloads,
        warmup=warmup,
        costs=measured,
    )
