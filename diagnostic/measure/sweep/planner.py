"""Time on site: the sweep's own costs and noise, measured from the runs it has recorded, and
the plan they give — requests per restart m* (Kalibera & Jones), the expected wall-clock of a
schedule, the likely end time (docs/statistics.md "Planning and stopping")."""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

from diagnostic import defaults
from diagnostic.analyse.power import DayPower
from diagnostic.measure.schedule import EstimateAssumptions, Start
from diagnostic.schema.bundle import RunInfo

if TYPE_CHECKING:  # pandas and scipy load slowly: imported where used, not for `--help`
    import pandas as pd

__all__ = [
    "Costs",
    "DayEstimate",
    "Power",
    "RequestsPlan",
    "assumed_costs",
    "assumed_noise",
    "day_estimate",
    "likely_end",
    "measured_costs",
    "noise_components",
    "plan_requests",
    "power_estimate",
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


def noise_components(frame: pd.DataFrame, reference: str | None = None) -> pd.DataFrame:
    """Kalibera & Jones variance components per arm, workload and level from the measured
    requests (rows with no exclusion), on the log scale of decode tok/s (the scale the
    verdicts use), with each arm's prompt effects removed first (analyse.pairing: every arm
    of a block serves the same prompts): S1² (within restart and prompt), S2² and T2² (of
    the prompt-adjusted restart levels), k, the prompts of the workload, and P² (the
    prompt-by-arm variance against `reference`, the arm comparisons divide by). Only
    (arm, workload, level) with ≥ 1 df for S1² and for S2²."""
    from diagnostic.analyse import pairing

    return pairing.noise_components(pairing.measured_requests(frame), reference)


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
    on the prompt-adjusted components pooled by pooled_noise; with prompt-by-arm variance,
    pairing.paired_requests (Kalibera & Jones on the rotating and the whole prompt set).
    With T2² ≤ 0 the restart component is not resolved yet (two restarts often show none):
    the `current` requests per restart are kept rather than sized on noise."""
    from diagnostic.analyse import pairing

    if noise.empty:
        return RequestsPlan(
            requests=current,
            why=f"no variance components yet: {current} kept (they need 2 restarts of an arm "
            "that share a prompt and leave a degree of freedom within restarts)",
        )
    s1_sq, t2_sq, p2_sq, prompts = pairing.pooled_noise(noise)
    how = "each arm's prompt effects removed" if "prompts" in noise else "assumed CVs"
    pooled = (
        f"S1² = {s1_sq:.2g}, T2² = {t2_sq:.2g}"
        + (f", prompt-by-arm P² = {p2_sq:.2g} over {prompts} prompts" if p2_sq > 0 else "")
        + f" (log scale, {how}; mean of {len(noise)} arm-workload "
        f"pairs); a start costs {costs.restart_s:.1f} s against {costs.mean_request_s:.2f} s "
        f"per request, costs {costs.source}"
    )
    m_star = pairing.paired_requests(
        costs.restart_s, costs.mean_request_s, s1_sq, t2_sq, p2_sq, prompts
    )
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


class Power(BaseModel):
    """Power to find the plan's target speedup, for the plan's restarts and for 90%."""

    model_config = ConfigDict(extra="forbid")

    target: float = Field(description="The speedup looked for (0.1 = +10%)")
    family: int = Field(
        description="Comparisons sharing the 5% error rate (simultaneous intervals, Šidák)"
    )
    fixed: float = Field(description="WIN rate at the target, fixed design, the plan's restarts")
    adaptive: float = Field(description="The same, adaptive design (looks, futility stop)")
    fixed_restarts: int | None = Field(
        description="Fewest restarts for the asked power; None: > cap"
    )
    adaptive_restarts: int | None = Field(description="Smallest adaptive maximum for it")
    wanted: float = Field(description="The power asked (0.9)")
    noise: str = Field(description="The noise it is computed for, in words (noise_words)")
    day: DayPower = Field(description="What a day on site decides with the fixed plan")


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
    power: Power | None = Field(None, description="Power at the target, both designs")


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


def power_estimate(
    noise: pd.DataFrame,
    *,
    restarts: int,
    requests: int,
    adaptive_requests: int,
    speculative: int,
    keys: int,
    pooled: bool,
    start_s: float,
    arms: int,
    target: float = defaults.TARGET,
    margin: float = defaults.MARGIN,
    wanted: float = 0.9,
    cap: int = 100,
) -> Power:
    """Chance of a WIN when the true speedup is the target, for the fixed design (one look)
    and the adaptive one (Pocock looks, futility stop, the reference pooled with the A/A
    repeat when `pooled`), each over the family of `speculative` arms × `keys` comparisons
    (analyse.power.win_rate: the Šidák intervals the verdicts use), the restarts each needs
    for `wanted`, and what a day on site decides with the fixed plan (analyse.power.day_power:
    `arms` arms a block at `start_s` seconds a start). Block log ratios have the SD
    pairing.block_sd gives at each design's requests: with m < n prompts per restart the
    prompts the pairing does not cancel (prompt-by-arm) add to it."""
    from diagnostic.analyse import pairing, power, sequential

    family = max(1, speculative * keys)
    sd_fixed = pairing.block_sd(noise, requests)
    references = 2 if pooled else 1
    sd_adaptive = pairing.block_sd(noise, adaptive_requests, references)

    def fixed(n: int) -> float:
        return power.win_rate([n], sd_fixed, family, target, margin, futility=False)

    def adaptive(n: int) -> float:
        looks = sequential.planned_looks(n)
        return power.win_rate(looks, sd_adaptive, family, target, margin, futility=True)

    n_fixed = power.fewest(fixed, wanted, defaults.MIN_RESTARTS, cap)
    return Power(
        target=target,
        family=family,
        fixed=fixed(restarts),
        adaptive=adaptive(restarts),
        fixed_restarts=n_fixed,
        # the looks cost power and the pooled reference gains some: near the fixed plan's
        adaptive_restarts=power.fewest(
            adaptive, wanted, max(defaults.MIN_RESTARTS, (n_fixed or cap) * 3 // 4), cap
        ),
        wanted=wanted,
        noise=pairing.noise_words(noise),
        day=power.day_power(
            sd_fixed,
            start_s=start_s,
            arms=arms,
            speculative=max(1, speculative),
            keys=keys,
            target=target,
            margin=margin,
        ),
    )
