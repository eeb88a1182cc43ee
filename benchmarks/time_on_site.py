"""Benchmark: wall-clock minutes to a decided report, the time-on-site plan vs the fixed plan.

Usage::

    python benchmarks/time_on_site.py [--sims 400] [--seed 0] [--check 20]
        [--restart-cv 0.05 0.10] [--request-cv 0.03 0.10] [--effect 0 0.05 0.10 0.20]
        [--arms 8] [--startup 90] [--request 2] [--max-blocks 80] [--futility 1.10]

One bundle per simulation: a baseline and `arms − 1` speculative arms, all with the case's
true effect, one workload, restarts in blocks (each block starts every arm once). Each restart
draws its level (lognormal, CV `restart_cv`) on a block drift (random walk, CV 1% a block,
shared by the arms of the block); its m requests scatter around it (lognormal, CV
`request_cv`). The restart summary is the level plus the mean of its m request log-values
(normal, SD request_cv/sqrt(m)): the geometric mean, where the analysis takes the log of the
arithmetic mean — the two differ by σ²/2, the same for every arm, which the ratio cancels.

Costs (seconds): start-up `startup` (90), one warm-up and every measured request `request`
(2), stop 0. A start with m requests costs startup + (1 + m) · request.

Verdicts as `diagnose report` decides them on a blocked bundle (diagnostic.analyse.compare):
paired t interval on the block log ratios of each spec arm against the baseline, family of
`arms − 1` comparisons (Bonferroni), δ = defaults.MARGIN, stats.verdict's rule; the first
`--check` simulations of every case are decided again with stats.paired_ratio_ci and
stats.verdict and the script stops if one differs.

The plans:
- fixed: `--fixed-blocks` (5) blocks × 15 requests, every arm, decided once at 1 − α/m;
- time on site (`sweep --adaptive` since issue 22): blocks 1-2 with 15 requests; from then
  on m* requests per restart (diagnostic.measure.sweep.planner.plan_requests: Kalibera &
  Jones from the known costs and the variance components the first two blocks show, floor
  5, cap 60); looks at stats.planned_looks(R) at the Pocock per-look level
  stats.sequential_alpha(looks, α/m); an arm decided at a look (WIN, LOSS or EQUIVALENT)
  gets no more restarts, the baseline goes on while one is open.
  R (the maximum blocks) is the smallest from 5 up whose power (WIN rate at +10%) is at
  least the fixed plan's in the same noise: the two are compared at equal power, and the
  false-decision rate of both is printed beside.

A second table sizes both plans for 90% power at +10% instead (the fixed plan's blocks and
the adaptive maximum searched the same way), which a 5-block plan does not reach. With
`--futility R` a third table adds a what-if the tool does not do: an arm whose interval's
upper end falls below R at a look stops as well (INCONCLUSIVE, "not R× faster").

Monte-Carlo error: a rate p from n simulations has SE sqrt(p(1−p)/n); a mean time its
standard error, printed per case.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats as sps

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

from time_to_verdict import EQUIVALENT, INCONCLUSIVE, LOSS, VERDICTS, WIN  # noqa: E402
from time_to_verdict import decide as verdicts  # noqa: E402

from diagnostic import defaults  # noqa: E402
from diagnostic.analyse import stats  # noqa: E402
from diagnostic.measure.sweep import planner  # noqa: E402

ALPHA = 0.05
FIRST_REQUESTS = defaults.REQUESTS  # blocks 1-2: the plan's requests, before m* is known
DRIFT_CV = 0.01


@dataclass(frozen=True)
class Case:
    """The simulated servers of one row."""

    restart_cv: float
    request_cv: float
    effect: float
    arms: int


@dataclass(frozen=True)
class Draw:
    """What the servers do, shared by every plan: restart levels and request noise."""

    level: np.ndarray  # (sims, arms, blocks) log level of each restart, drift included
    noise: np.ndarray  # (sims, arms, blocks) standard normal: the mean of the requests
    chi: np.ndarray  # (sims,) χ² draw of the pooled within-restart variance of blocks 1-2


def draw(case: Case, sims: int, blocks: int, rng: np.random.Generator) -> Draw:
    sr = math.sqrt(math.log1p(case.restart_cv**2))
    drift = np.cumsum(rng.normal(0.0, DRIFT_CV, (sims, 1, blocks)), axis=2)
    shift = np.full((1, case.arms, 1), math.log1p(case.effect))
    shift[0, 0, 0] = 0.0  # the baseline
    level = math.log(100.0) + shift + drift + rng.normal(0.0, sr, (sims, case.arms, blocks))
    df = case.arms * 2 * (FIRST_REQUESTS - 1)
    chi = rng.chisquare(df, sims) / df
    return Draw(level, rng.standard_normal((sims, case.arms, blocks)), chi)


def summaries(case: Case, d: Draw, m: np.ndarray) -> np.ndarray:
    """Log restart summaries with m[s, b] requests per restart in block b."""
    sq = math.sqrt(math.log1p(case.request_cv**2))
    return d.level + d.noise * sq / np.sqrt(m[:, None, :])


def upper_end(x: np.ndarray, alpha: float) -> np.ndarray:
    """Upper end of the paired interval at level 1 − alpha (the futility what-if)."""
    n = x.shape[-1]
    half = float(sps.t.isf(alpha / 2, n - 1)) * x.std(axis=-1, ddof=1) / math.sqrt(n)
    return np.exp(x.mean(axis=-1) + half)


def check(logs: np.ndarray, codes: np.ndarray, n: int, alpha: float, delta: float) -> int:
    """Decide again with stats.paired_ratio_ci + stats.verdict; stop on a difference."""
    for s in range(codes.shape[0]):
        for a in range(1, logs.shape[1]):
            ci = stats.paired_ratio_ci(logs[s, a, :n], logs[s, 0, :n], 1 - alpha)
            if VERDICTS.index(stats.verdict(ci.low, ci.high, delta)) != codes[s, a - 1]:
                raise SystemExit(f"vectorised verdict differs from stats at sim {s}, arm {a}")
    return codes.size


@dataclass
class Outcome:
    """Per simulation: the verdict codes of the spec arms, seconds, blocks per spec arm."""

    codes: np.ndarray  # (sims, arms − 1)
    seconds: np.ndarray  # (sims,)
    blocks: np.ndarray  # (sims, arms − 1)
    requests: np.ndarray  # (sims,) requests per restart from block 3 on
    looks: tuple[int, ...]


def start_s(costs: planner.Costs, m: np.ndarray | int) -> np.ndarray:
    return costs.startup_s + costs.stop_s + (1 + np.asarray(m)) * costs.request_s["w"]


def fixed(case: Case, d: Draw, blocks: int, costs: planner.Costs, n_check: int) -> Outcome:
    sims = d.level.shape[0]
    m = np.full((sims, blocks), FIRST_REQUESTS)
    logs = summaries(case, _cut(d, blocks), m)
    x = logs[:, 1:, :] - logs[:, :1, :]
    alpha = ALPHA / (case.arms - 1)
    codes = verdicts(x, alpha, defaults.MARGIN)
    if n_check:
        check(logs[:n_check], codes[:n_check], blocks, alpha, defaults.MARGIN)
    seconds = np.full(sims, case.arms * blocks * float(start_s(costs, FIRST_REQUESTS)))
    return Outcome(codes, seconds, np.full(codes.shape, blocks), m[:, -1], (blocks,))


def _cut(d: Draw, blocks: int) -> Draw:
    return Draw(d.level[:, :, :blocks], d.noise[:, :, :blocks], d.chi)


def planned_m(case: Case, d: Draw, costs: planner.Costs) -> np.ndarray:
    """m* per simulation from what blocks 1-2 show: S1² pooled over their restarts, T2² per
    arm from its two restart means — through planner.plan_requests."""
    sq2 = math.log1p(case.request_cv**2)
    first = summaries(case, _cut(d, 2), np.full((d.level.shape[0], 2), FIRST_REQUESTS))
    s2_sq = first.var(axis=2, ddof=1)  # (sims, arms)
    s1_sq = sq2 * d.chi
    out = np.empty(len(s1_sq), dtype=int)
    for s in range(len(s1_sq)):
        noise = pd.DataFrame(
            {"s1_sq": s1_sq[s], "t2_sq": s2_sq[s] - s1_sq[s] / FIRST_REQUESTS},
            index=range(case.arms),
        )
        out[s] = planner.plan_requests(costs, noise, current=FIRST_REQUESTS).requests
    return out


def on_site(
    case: Case,
    d: Draw,
    max_blocks: int,
    costs: planner.Costs,
    m_star: np.ndarray,
    n_check: int,
    futility: float | None = None,
) -> Outcome:
    """The time-on-site plan: m* from block 3, looks, per-arm stopping. `futility` (a what-if,
    not in the tool): an arm also stops, INCONCLUSIVE, once its upper end is below it."""
    sims = d.level.shape[0]
    looks = tuple(stats.planned_looks(max_blocks))
    alpha = stats.sequential_alpha(looks, ALPHA / (case.arms - 1))
    m = np.where(np.arange(max_blocks)[None, :] < 2, FIRST_REQUESTS, m_star[:, None])
    logs = summaries(case, _cut(d, max_blocks), m)
    x = logs[:, 1:, :] - logs[:, :1, :]
    spec = case.arms - 1
    codes = np.full((sims, spec), INCONCLUSIVE)
    blocks = np.full((sims, spec), looks[-1])
    open_ = np.ones((sims, spec), dtype=bool)
    for i, n in enumerate(looks):
        v = verdicts(x[:, :, :n], alpha, defaults.MARGIN)
        if n_check and i == 0:
            check(logs[:n_check], v[:n_check], n, alpha, defaults.MARGIN)
        stop = open_ & ((v != INCONCLUSIVE) | (i == len(looks) - 1))
        if futility is not None:
            stop |= open_ & (upper_end(x[:, :, :n], alpha) < futility)
        codes[stop], blocks[stop] = v[stop], n
        open_ &= ~stop
    base = blocks.max(axis=1)
    per_block = start_s(costs, m)  # (sims, blocks)
    running = (np.arange(max_blocks)[None, None, :] < blocks[:, :, None]).sum(axis=1)
    running = running + (np.arange(max_blocks)[None, :] < base[:, None])
    seconds = (running * per_block).sum(axis=1)
    return Outcome(codes, seconds, blocks, m_star, looks)


def wrong(codes: np.ndarray, effect: float) -> np.ndarray:
    """Per simulation: some verdict the truth contradicts (INCONCLUSIVE is never wrong)."""
    inside = 1 / (1 + defaults.MARGIN) <= 1 + effect <= 1 + defaults.MARGIN
    bad = [WIN, LOSS] if inside else [LOSS, EQUIVALENT]
    return np.isin(codes, bad).any(axis=1)


def power(o: Outcome) -> float:
    return float((o.codes == WIN).mean())


@dataclass
class Row:
    case: Case
    fixed: Outcome
    site: Outcome
    max_blocks: int

    def saving(self) -> float:
        return 1 - float(self.site.seconds.mean()) / float(self.fixed.seconds.mean())


def smallest(reaches: Callable[[int], bool], low: int, high: int, what: str) -> int:
    """The smallest r in [low, high] with reaches(r), by bisection (power grows with blocks;
    Monte-Carlo noise may make it non-monotone by a block)."""
    if not reaches(high):
        raise SystemExit(f"no {what} up to {high} blocks reaches the power asked")
    while low < high:
        mid = (low + high) // 2
        low, high = (low, mid) if reaches(mid) else (mid + 1, high)
    return low


def size_adaptive(
    case10: Case,
    d10: Draw,
    target: float,
    costs: planner.Costs,
    m_star: np.ndarray,
    cap: int,
    futility: float | None = None,
) -> int:
    """The smallest maximum from 5 up whose WIN rate at +10% reaches `target`."""

    def reaches(r: int) -> bool:
        return power(on_site(case10, d10, r, costs, m_star, 0, futility)) >= target

    return smallest(reaches, 5, cap, "adaptive plan")


def size_fixed(case10: Case, d10: Draw, target: float, costs: planner.Costs, cap: int) -> int:
    """The fewest blocks from 5 up whose WIN rate at +10% reaches `target`."""

    def reaches(r: int) -> bool:
        return power(fixed(case10, d10, r, costs, 0)) >= target

    return smallest(reaches, 5, cap, "fixed plan")


def run(args: argparse.Namespace) -> tuple[list[Row], list[Row], list[Row]]:
    costs = planner.Costs(
        startup_s=args.startup,
        stop_s=0.0,
        warmup_s={"w": args.request},
        request_s={"w": args.request},
        source="benchmark",
    )
    at_fixed, at_90, with_futility = [], [], []
    for rcv in args.restart_cv:
        for qcv in args.request_cv:
            draws = {}
            for e in args.effect:
                seed = [args.seed, int(rcv * 1000), int(qcv * 1000), int(e * 1000)]
                rng = np.random.default_rng(seed)
                draws[e] = draw(Case(rcv, qcv, e, args.arms), args.sims, args.max_blocks, rng)
            if 0.10 not in draws:
                raise SystemExit("--effect must include 0.10: the plans are sized on it")
            c10, d10 = Case(rcv, qcv, 0.10, args.arms), draws[0.10]
            m10 = planned_m(c10, d10, costs)
            p_fixed = power(fixed(c10, d10, args.fixed_blocks, costs, 0))
            r_eq = size_adaptive(c10, d10, p_fixed, costs, m10, args.max_blocks)
            f90 = size_fixed(c10, d10, args.power, costs, args.max_blocks)
            r90 = size_adaptive(c10, d10, args.power, costs, m10, args.max_blocks)
            fut = args.futility
            rf = size_adaptive(c10, d10, args.power, costs, m10, args.max_blocks, fut) if fut else 0
            for e, d in draws.items():
                case = Case(rcv, qcv, e, args.arms)
                m_star = m10 if e == 0.10 else planned_m(case, d, costs)
                f5 = fixed(case, d, args.fixed_blocks, costs, args.check)
                at_fixed.append(
                    Row(case, f5, on_site(case, d, r_eq, costs, m_star, args.check), r_eq)
                )
                fp = fixed(case, d, f90, costs, 0)
                at_90.append(Row(case, fp, on_site(case, d, r90, costs, m_star, 0), r90))
                if fut:
                    site = on_site(case, d, rf, costs, m_star, 0, fut)
                    with_futility.append(Row(case, fp, site, rf))
    return at_fixed, at_90, with_futility


def _mc(x: np.ndarray) -> float:
    return float(x.std(ddof=1) / math.sqrt(len(x)))


def table(rows: Sequence[Row]) -> str:
    head = (
        "| restart CV | request CV | effect | fixed: blocks × req, min | fixed: WIN, wrong "
        "| on site: max blocks (looks), m* | on site: min ± MC SE | blocks per spec arm "
        "| on site: WIN, wrong | saving |\n"
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    )
    out = [head]
    for r in rows:
        c, f, s = r.case, r.fixed, r.site
        fw, sw = wrong(f.codes, c.effect).mean(), wrong(s.codes, c.effect).mean()
        looks = "/".join(map(str, s.looks))
        out.append(
            f"| {c.restart_cv:.0%} | {c.request_cv:.0%} | {c.effect:+.0%} | "
            f"{f.looks[-1]} × {FIRST_REQUESTS}, {f.seconds.mean() / 60:.1f} | "
            f"{power(f):.1%}, {fw:.1%} | {r.max_blocks} ({looks}), "
            f"{np.median(s.requests):.0f} (median) | "
            f"{s.seconds.mean() / 60:.1f} ± {_mc(s.seconds) / 60:.1f} | "
            f"{s.blocks.mean():.1f} | {power(s):.1%}, {sw:.1%} | {r.saving():+.0%} |"
        )
    mean = sum(r.saving() for r in rows) / len(rows)
    worse = [r for r in rows if r.saving() < 0]
    out.append(
        f"\nMean saving over the {len(rows)} cases: {mean:.1%}; worse than the fixed plan in "
        f"{len(worse)} case(s)"
        + (
            ": "
            + "; ".join(
                f"CV {r.case.restart_cv:.0%}/{r.case.request_cv:.0%} {r.case.effect:+.0%}"
                for r in worse
            )
            if worse
            else ""
        )
        + "."
    )
    return "\n".join(out)


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sims", type=int, default=400)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--check", type=int, default=20, help="sims decided again with stats")
    p.add_argument("--restart-cv", type=float, nargs="+", default=[0.05, 0.10])
    p.add_argument("--request-cv", type=float, nargs="+", default=[0.03, 0.10])
    p.add_argument("--effect", type=float, nargs="+", default=[0.0, 0.05, 0.10, 0.20])
    p.add_argument("--arms", type=int, default=8, help="baseline + speculative arms")
    p.add_argument("--startup", type=float, default=90.0, help="seconds a server start takes")
    p.add_argument("--request", type=float, default=2.0, help="seconds one request takes")
    p.add_argument("--fixed-blocks", type=int, default=5)
    p.add_argument("--power", type=float, default=0.90, help="second table: power at +10%")
    p.add_argument("--max-blocks", type=int, default=80, help="largest plan searched")
    p.add_argument(
        "--futility",
        type=float,
        default=None,
        help="what-if: also stop an arm whose upper end is below this ratio (e.g. 1.10)",
    )
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    began, load = time.perf_counter(), os.getloadavg()[0]
    at_fixed, at_90, with_futility = run(args)
    print(
        f"Seed {args.seed}, {args.sims} simulations per case, {args.arms} arms (family of "
        f"{args.arms - 1}), start-up {args.startup:g} s, request {args.request:g} s, "
        f"δ = {defaults.MARGIN}; {time.perf_counter() - began:.0f} s, load average "
        f"{load:.1f} → {os.getloadavg()[0]:.1f}. WIN: share of spec arms called WIN; wrong: "
        "share of bundles with a verdict the truth contradicts; MC SE of a rate p: "
        f"sqrt(p(1−p)/{args.sims}) (≤ {0.5 / math.sqrt(args.sims):.1%}).\n"
    )
    print(f"At the fixed plan's power ({args.fixed_blocks} blocks × {FIRST_REQUESTS} requests):\n")
    print(table(at_fixed))
    print(f"\nBoth sized for {args.power:.0%} power at +10%:\n")
    print(table(at_90))
    if with_futility:
        print(
            f"\nWhat-if, not in the tool: the same, with a futility stop (an arm whose "
            f"interval's upper end is below {args.futility:g} stops, INCONCLUSIVE):\n"
        )
        print(table(with_futility))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
