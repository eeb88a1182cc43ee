"""Time on site: the sweep's own costs and noise, measured from the runs it has recorded, and
the plan they give — requests per restart m* (Kalibera & Jones), the expected wall-clock of a
schedule, the likely end time (STATISTICS.md "Planning and stopping")."""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

from diagnostic import defaults
from diagnostic.measure.schedule import EstimateAssumptions, Start
from diagnostic.schema.bundle import RunInfo

if TYPE_CHECKING:  # pandas and scipy load slowly: imported where used, not for `--help`
    import pandas as pd

__all__ = [
    "Costs",
    "DayEstimate",
    "RequestsPlan",
    "assumed_costs",
    "assumed_noise",
    "day_estimate",
    "likely_end",
    "measured_costs",
    "noise_components",
    "plan_requests",
    "remaining_s",
    "wall_clock",
]


class Costs(BaseModel):
    """What one server start costs in seconds: start-up, stop, and per workload the warm-up
    and the measured requests (at concurrency 1: one after another)."""

    model_config = ConfigDict(extra="forbid")

    startup_s: float = Field(ge=0, description="Launch to healthy, mean over starts")
    stop_s: float = Field(ge=0, description="Stop and free the port")
    warmup_s: dict[str, float] = Field(description="Seconds of one warm-up request, per workload")
    request_s: dict[str, float] = Field(description="Seconds of one measured request, per workload")
    source: str = Field(description="Where the figures come from: measured, a pilot, assumed")

    def per_start(self, requests: int, warmup: int, levels: int = 1) -> float:
        """Seconds of one start that serves `warmup` + `requests` requests per workload."""
        serve = sum(
            warmup * self.warmup_s[w] + requests * self.request_s[w] for w in self.request_s
        )
        return self.startup_s + self.stop_s + levels * serve

    @property
    def restart_s(self) -> float:
        """c_restart of Kalibera & Jones: what a start costs before its first measured request."""
        return self.startup_s + self.stop_s + sum(self.warmup_s.values())

    @property
    def mean_request_s(self) -> float:
        """c_request: one measured request, averaged over the workloads."""
        return sum(self.request_s.values()) / len(self.request_s)


def assumed_costs(
    assumptions: EstimateAssumptions, workloads: Sequence[str], max_tokens: int
) -> Costs:
    """Costs from the stated assumptions (no measurement yet): every request the same."""
    per_request = assumptions.request_overhead_s + max_tokens / assumptions.decode_tps
    each = dict.fromkeys(workloads, per_request)
    return Costs(
        startup_s=assumptions.startup_s,
        stop_s=assumptions.stop_s,
        warmup_s=each,
        request_s=dict(each),
        source=(
            f"assumed ({assumptions.startup_s:g} s start-up, {assumptions.decode_tps:g} tok/s)"
        ),
    )


def measured_costs(
    frame: pd.DataFrame, runs: Sequence[RunInfo], *, stop_s: float, source: str
) -> Costs | None:
    """Costs from recorded runs: start-up from run.json (launch to healthy), warm-up and request
    seconds from requests.jsonl (send to end of stream, e2e_s), mean per workload over the
    requests without error. None before a start with a measured start-up and requests."""
    startups = [r.launch.startup_s for r in runs if r.launch and r.launch.startup_s is not None]
    ok = frame[frame["error"].isna() & frame["e2e_s"].notna()]
    if not startups or ok.empty or not (~ok["warmup"].astype(bool)).any():
        return None
    seconds = ok.groupby(["workload", ok["warmup"].astype(bool)])["e2e_s"].mean()
    measured = {w: float(s) for (w, warm), s in seconds.items() if not warm}
    warm = {w: float(s) for (w, is_warm), s in seconds.items() if is_warm}
    return Costs(
        startup_s=sum(startups) / len(startups),
        stop_s=stop_s,
        warmup_s={w: warm.get(w, s) for w, s in measured.items()},
        request_s=measured,
        source=source,
    )


def noise_components(frame: pd.DataFrame) -> pd.DataFrame:
    """Kalibera & Jones variance components per arm and workload, from the measured requests
    (rows with no exclusion): S1² (within restart), S2² (of restart means), T2² = S2² − S1²/m,
    m, and the restarts behind them. Only (arm, workload) pairs with ≥ 2 restarts of ≥ 2
    requests; on the log scale of decode tok/s (the scale the verdicts use)."""
    import pandas as pd

    from diagnostic.analyse import stats

    measured = frame[(frame["excluded"] == "") & frame["decode_tps"].notna()].copy()
    measured["log_tps"] = measured["decode_tps"].astype(float).map(math.log)
    rows = []
    for (arm, workload), part in measured.groupby(["arm", "workload"], sort=True):
        groups = [g["log_tps"].tolist() for _, g in part.groupby("restart")]
        groups = [g for g in groups if len(g) >= 2]
        if len(groups) < 2:
            continue
        vc = stats.variance_components(groups)
        rows.append(
            {
                "arm": arm,
                "workload": workload,
                "restarts": len(groups),
                "m": vc.m,
                "s1_sq": vc.s1_sq,
                "s2_sq": vc.s2_sq,
                "t2_sq": vc.t2_sq,
            }
        )
    columns = ["arm", "workload", "restarts", "m", "s1_sq", "s2_sq", "t2_sq"]
    return pd.DataFrame(rows, columns=columns)


class RequestsPlan(BaseModel):
    """Measured requests per restart and why."""

    model_config = ConfigDict(extra="forbid")

    requests: int = Field(ge=1, description="Measured requests per restart and workload")
    why: str = Field(description="How it was chosen, in words")


def plan_requests(
    costs: Costs,
    noise: pd.DataFrame,
    *,
    current: int,
    floor: int = defaults.PLAN_MIN_REQUESTS,
    cap: int = defaults.PLAN_MAX_REQUESTS,
) -> RequestsPlan:
    """m* = ceil(sqrt(c_restart/c_request · S1²/T2²)) (Kalibera & Jones), within [floor, cap],
    with S1² and T2² pooled (averaged) over arms and workloads: one m serves every workload
    of every start, and one pair's T2² from a few restarts is too noisy to size it alone.
    With T2² ≤ 0 the restart component is not resolved yet (two restarts often show none):
    the `current` requests per restart are kept rather than sized on noise."""
    from diagnostic.analyse import stats

    if noise.empty:
        return RequestsPlan(requests=current, why="no variance components yet (needs 2 restarts)")
    s1_sq, t2_sq = float(noise["s1_sq"].mean()), float(noise["t2_sq"].mean())
    pooled = (
        f"S1² = {s1_sq:.2g}, T2² = {t2_sq:.2g} (log scale, mean of {len(noise)} arm-workload "
        f"pairs); a start costs {costs.restart_s:.1f} s against {costs.mean_request_s:.2f} s "
        f"per request, costs {costs.source}"
    )
    m_star = stats.requests_per_restart(costs.restart_s, costs.mean_request_s, s1_sq, t2_sq)
    if m_star is None:
        return RequestsPlan(
            requests=current,
            why=f"restart noise not resolved yet (T2² ≤ 0): {current} kept; {pooled}",
        )
    chosen = min(max(m_star, floor), cap)
    bound = {cap: " (cap)", floor: " (floor)"}.get(chosen, "") if chosen != m_star else ""
    return RequestsPlan(
        requests=chosen,
        why=f"m* = {m_star} from {pooled}; kept in [{floor}, {cap}]{bound}",
    )


def assumed_noise(assumptions: EstimateAssumptions) -> pd.DataFrame:
    """Variance components from the stated CVs (no pilot): S1² and T2² on the log scale of a
    lognormal with the request CV and the restart CV."""
    import pandas as pd

    s1_sq = math.log1p(assumptions.request_cv**2)
    t2_sq = math.log1p(assumptions.restart_cv**2)
    return pd.DataFrame([{"arm": "assumed", "workload": "all", "s1_sq": s1_sq, "t2_sq": t2_sq}])


class DayEstimate(BaseModel):
    """Expected wall-clock of the fixed and the adaptive plan, before a sweep."""

    model_config = ConfigDict(extra="forbid")

    costs: Costs = Field(description="What a start and a request cost")
    fixed_requests: int = Field(description="The plan's requests per restart")
    fixed_s: float = Field(description="Fixed plan: every start of the schedule")
    adaptive: RequestsPlan = Field(description="Adaptive plan: m* requests per restart")
    looks: list[int] = Field(description="Adaptive: planned looks (blocks)")
    adaptive_by_look_s: list[float] = Field(
        description="Adaptive: seconds if every arm is decided at each look (the last: all)"
    )


def day_estimate(
    costs: Costs,
    noise: pd.DataFrame,
    *,
    arms: int,
    restarts: int,
    looks: Sequence[int],
    requests: int,
    warmup: int,
    levels: int = 1,
) -> DayEstimate:
    """Both plans' wall-clock from the same costs. The adaptive plan measures blocks 1-2 with
    the plan's requests (T2² needs two restarts), then m*; it ends at the first look that
    decides every arm."""
    chosen = plan_requests(costs, noise, current=requests)
    first = min(2, restarts)

    def adaptive(blocks: int) -> float:
        early = wall_clock(
            costs, arms * min(first, blocks), requests=requests, warmup=warmup, levels=levels
        )
        later = arms * max(blocks - first, 0)
        return early + wall_clock(
            costs, later, requests=chosen.requests, warmup=warmup, levels=levels
        )

    return DayEstimate(
        costs=costs,
        fixed_requests=requests,
        fixed_s=wall_clock(costs, arms * restarts, requests=requests, warmup=warmup, levels=levels),
        adaptive=chosen,
        looks=list(looks),
        adaptive_by_look_s=[adaptive(n) for n in looks],
    )


def wall_clock(costs: Costs, starts: int, *, requests: int, warmup: int, levels: int = 1) -> float:
    """Seconds of `starts` server starts, one after another."""
    return starts * costs.per_start(requests, warmup, levels)


def remaining_s(
    costs: Costs,
    schedule: Sequence[Start],
    after: int,
    closed: set[str],
    *,
    requests: int,
    warmup: int,
    levels: int = 1,
) -> float:
    """Seconds left: the starts after index `after` of arms still open."""
    left = sum(1 for s in schedule[after + 1 :] if s.arm not in closed)
    return wall_clock(costs, left, requests=requests, warmup=warmup, levels=levels)


def likely_end(seconds: float, now: dt.datetime | None = None) -> str:
    """The local clock time `seconds` from now, as HH:MM."""
    now = now or dt.datetime.now().astimezone()
    return (now + dt.timedelta(seconds=seconds)).strftime("%H:%M")
