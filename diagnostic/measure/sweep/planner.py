"""Time on site: the sweep's own costs and noise, measured from the runs it has recorded, and
the plan they give — requests per restart m* (Kalibera & Jones), the expected wall-clock of a
schedule, the likely end time (STATISTICS.md "Planning and stopping")."""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Callable, Sequence
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
    "Power",
    "RequestsPlan",
    "assumed_costs",
    "assumed_noise",
    "day_estimate",
    "likely_end",
    "measured_costs",
    "noise_components",
    "noise_words",
    "plan_requests",
    "pooled_noise",
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


def pooled_noise(noise: pd.DataFrame) -> tuple[float, float, float, int]:
    """(S1², T2², P², n) of one side of a comparison, pooled (averaged) over the table's rows:
    one m serves every workload of every start, and one pair's T2² from a few restarts is too
    noisy to size it alone. P² is half the mean prompt-by-arm variance of the compared arms
    (a block ratio sees it once, over its two sides; a mean below 0 is none), n the largest
    prompt set; without those columns (assumed noise) P² = 0."""
    s1_sq, t2_sq = float(noise["s1_sq"].mean()), float(noise["t2_sq"].mean())
    compared = "p2_sq" in noise and bool(noise["p2_sq"].notna().any())
    p2_sq = max(float(noise["p2_sq"].mean()), 0.0) / 2 if compared else 0.0  # skips NaN
    prompts = int(noise["prompts"].max()) if "prompts" in noise else 1
    return s1_sq, t2_sq, p2_sq, prompts


def noise_words(noise: pd.DataFrame) -> str:
    """The pooled noise as CVs, and where it comes from: 'restart CV 5.0%, request CV 3.0% on
    one prompt, prompt-by-arm CV 12% (measured, each arm's prompt effects removed)'."""
    s1_sq, t2_sq, p2_sq, _ = pooled_noise(noise)
    measured = "prompts" in noise
    text = f"restart CV {math.sqrt(max(t2_sq, 0.0)):.1%}, request CV {math.sqrt(s1_sq):.1%}"
    text += " on one prompt" if measured else ""
    text += f", prompt-by-arm CV {math.sqrt(2 * p2_sq):.1%}" if p2_sq > 0 else ""
    return text + (" (measured, each arm's prompt effects removed)" if measured else " (assumed)")


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
    s1_sq, t2_sq, p2_sq, prompts = pooled_noise(noise)
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
    family: int = Field(description="Comparisons sharing the 5% error rate (Bonferroni)")
    fixed: float = Field(description="WIN rate at the target, fixed design, the plan's restarts")
    adaptive: float = Field(description="The same, adaptive design (looks, futility stop)")
    fixed_restarts: int | None = Field(
        description="Fewest restarts for the asked power; None: > cap"
    )
    adaptive_restarts: int | None = Field(description="Smallest adaptive maximum for it")
    wanted: float = Field(description="The power asked (0.9)")
    noise: str = Field(description="The noise it is computed for, in words (noise_words)")


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


POWER_PATHS = 1 << 15  # simulated comparisons per power figure: MC SE ≤ 0.3%


def power_estimate(
    noise: pd.DataFrame,
    *,
    restarts: int,
    requests: int,
    adaptive_requests: int,
    family: int,
    pooled: bool,
    target: float = defaults.TARGET,
    margin: float = defaults.MARGIN,
    wanted: float = 0.9,
    cap: int = 100,
) -> Power:
    """Chance of a WIN when the true speedup is the target, for the fixed design (one look,
    1 − α/family) and the adaptive one (Pocock looks, futility stop, the reference pooled
    with the A/A repeat when `pooled`), and the restarts each needs for `wanted`. A block's
    log ratio has variance (1 + 1/r)·(one side's), r the reference's starts per block; the
    looks' t statistics are drawn exactly (sequential.t_look_paths, seeded). The side variance is
    pairing.side_variance on pooled_noise: with m < n prompts per restart the prompts the
    pairing does not cancel (prompt-by-arm) add to it."""
    from diagnostic.analyse import pairing

    s1_sq, t2_sq, p2_sq, prompts = pooled_noise(noise)

    def sd(m: int, r: int) -> float:
        side = pairing.side_variance(s1_sq, max(t2_sq, 0.0), p2_sq, prompts, m)
        return math.sqrt((1 + 1 / r) * side)

    sd_fixed, sd_adaptive = sd(requests, 1), sd(adaptive_requests, 2 if pooled else 1)

    def fixed(n: int) -> float:
        return win_rate([n], sd_fixed, family, target, margin, futility=False)

    def adaptive(n: int) -> float:
        from diagnostic.analyse import sequential

        looks = sequential.planned_looks(n)
        return win_rate(looks, sd_adaptive, family, target, margin, futility=True)

    return Power(
        target=target,
        family=family,
        fixed=fixed(restarts),
        adaptive=adaptive(restarts),
        fixed_restarts=(n_fixed := _fewest(fixed, wanted, defaults.MIN_RESTARTS, cap)),
        # the looks cost power and the pooled reference gains some: near the fixed plan's
        adaptive_restarts=_fewest(
            adaptive, wanted, max(defaults.MIN_RESTARTS, (n_fixed or cap) * 3 // 4), cap
        ),
        wanted=wanted,
        noise=noise_words(noise),
    )


def win_rate(
    looks: Sequence[int],
    sd_log: float,
    family: int,
    target: float,
    margin: float,
    *,
    futility: bool,
    alpha: float = 0.05,
) -> float:
    """P(WIN) at a true ratio 1 + target with block log ratios of SD sd_log: a comparison
    stops at the first look whose Pocock-level interval (1 − α/family at one look) is above
    1 + margin (WIN) or, with `futility`, at an interim look whose one-sided t test rejects
    the target (defaults.FUTILITY_ALPHA)."""
    import numpy as np
    from scipy import stats as sps

    from diagnostic.analyse import sequential

    if sd_log <= 0:
        return 1.0
    shift = math.log1p(target) / sd_log
    mean, se = sequential.t_look_paths(looks, shift, POWER_PATHS)
    level = sequential.sequential_alpha(looks, alpha / family)
    df = np.asarray(looks, dtype=float) - 1
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.where(df >= 1, sps.t.isf(level / 2, np.maximum(df, 1)), np.inf)
        win = mean - q * se > math.log1p(margin) / sd_log
        futile = sps.t.cdf((mean - shift) / se, np.maximum(df, 1)) < defaults.FUTILITY_ALPHA
    futile &= futility & (df >= 1)
    futile[:, -1] = False  # the last look stops anyway
    open_ = np.ones(len(mean), dtype=bool)
    wins = 0
    for i in range(len(looks)):
        wins += int((open_ & win[:, i]).sum())
        open_ &= ~(win[:, i] | futile[:, i])
    return wins / len(mean)


def _fewest(power: Callable[[int], float], wanted: float, low: int, cap: int) -> int | None:
    """The fewest restarts in [low, cap] whose power reaches `wanted`, by bisection (power
    grows with restarts, up to simulation noise); None beyond `cap`; `low` if it reaches."""
    high = cap
    if power(high) < wanted:
        return None
    while low < high:
        mid = (low + high) // 2
        low, high = (low, mid) if power(mid) >= wanted else (mid + 1, high)
    return low
