"""Benchmark: wall-clock minutes to a decided report, the time-on-site plan vs the fixed plan.

Usage::

    python benchmarks/time_on_site.py [--sims 400] [--seed 0] [--check 20]
        [--restart-cv 0.05 0.10] [--request-cv 0.03 0.10] [--effect 0 0.05 0.10 0.20]
        [--arms 8] [--startup 90] [--request 2] [--max-blocks 90]

One bundle per simulation: a baseline and `arms − 1` speculative arms, all with the case's
true effect, one workload, restarts in blocks (each block starts every arm once); the
time-on-site plan also starts the baseline's A/A repeat in every block. Each restart draws its
level (lognormal, CV `restart_cv`) on a block drift (random walk, CV 1% a block, shared by the
arms of the block); its m requests scatter around it (lognormal, CV `request_cv`). The restart
summary is the level plus the mean of its m request log-values (normal, SD
request_cv/sqrt(m)): the geometric mean, where the analysis takes the log of the arithmetic
mean — the two differ by σ²/2, the same for every arm, which the ratio cancels.

Costs (seconds): start-up `startup` (90), one warm-up and every measured request `request`
(2), stop 0. A start with m requests costs startup + (1 + m) · request.

Verdicts as `diagnose report` decides them on a blocked bundle (diagnostic.analyse.compare):
paired t interval on the block log ratios of each spec arm against its reference, family of
`arms − 1` comparisons (Bonferroni), δ = defaults.MARGIN, stats.verdict's rule; the first
`--check` simulations of every case are decided again with stats.paired_ratio_ci,
stats.verdict and stats.futility_p and the script stops if one differs.

The plans:
- fixed: `--fixed-blocks` (5) blocks × 15 requests, every arm, no A/A arm, decided once at
  1 − α/m;
- time on site (`sweep --adaptive` since issue 22), the design the tool records:
  blocks 1-2 with 15 requests; from then on m* requests per restart
  (diagnostic.measure.sweep.planner.plan_requests: Kalibera & Jones from the known costs and
  the variance components the first two blocks show, floor 5, cap 60); looks at
  sequential.planned_looks(R) at the Pocock per-look level sequential.sequential_alpha(looks, α/m);
  the reference of each block is the mean of the baseline and its A/A repeat (Design.pool_aa);
  an arm decided at a look (WIN, LOSS or EQUIVALENT) or futile there (undecided while the
  one-sided t test of "ratio ≥ 1 + defaults.TARGET" has p < defaults.FUTILITY_ALPHA) gets no
  more restarts; the baseline and its repeat go on while one is open.
  R (the maximum blocks) is the smallest from 5 up whose power (WIN rate at +10%) is at
  least the asked one: the plans are compared at equal power, and the false-decision rate of
  both is printed beside.

The first table sizes both plans for 90% power at +10% (the fixed plan's blocks and the
adaptive maximum searched the same way): the comparison the goal is set on. The second keeps
the fixed plan at 5 blocks and sizes the adaptive maximum for the fixed plan's own power.
Then the mean saving of the 90%-power comparison without each part of the design (no
futility stop; no A/A repeat in the reference; neither — the design before), each sized
again for 90% power.

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
from diagnostic.analyse import sequential, stats  # noqa: E402
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

    level: np.ndarray  # (sims, arms + 1, blocks) log level of each restart, drift included;
    # row 0 the baseline, rows 1..arms−1 the speculative arms, the last row the A/A repeat
    noise: np.ndarray  # (sims, arms + 1, blocks) standard normal: the mean of the requests
    chi: np.ndarray  # (sims,) χ² draw of the pooled within-restart variance of blocks 1-2


def draw(case: Case, sims: int, blocks: int, rng: np.random.Generator) -> Draw:
    sr = math.sqrt(math.log1p(case.restart_cv**2))
    drift = np.cumsum(rng.normal(0.0, DRIFT_CV, (sims, 1, blocks)), axis=2)
    rows = case.arms + 1
    shift = np.full((1, rows, 1), math.log1p(case.effect))
    shift[0, [0, -1], 0] = 0.0  # the baseline and its A/A repeat
    level = math.log(100.0) + shift + drift + rng.normal(0.0, sr, (sims, rows, blocks))
    df = case.arms * 2 * (FIRST_REQUESTS - 1)
    chi = rng.chisquare(df, sims) / df
    return Draw(level, rng.standard_normal((sims, rows, blocks)), chi)


def summaries(case: Case, d: Draw, m: np.ndarray) -> np.ndarray:
    """Log restart summaries with m[s, b] requests per restart in block b."""
    sq = math.sqrt(math.log1p(case.request_cv**2))
    return d.level + d.noise * sq / np.sqrt(m[:, None, :])


def futile(x: np.ndarray) -> np.ndarray:
    """Paired block log ratios x (..., n): the one-sided t test of "ratio ≥ 1 + TARGET" has
    p < FUTILITY_ALPHA (stats.futility_p, vectorised)."""
    n = x.shape[-1]
    t = (x.mean(axis=-1) - math.log1p(defaults.TARGET)) / (x.std(axis=-1, ddof=1) / math.sqrt(n))
    return np.asarray(sps.t.cdf(t, n - 1) < defaults.FUTILITY_ALPHA)


def check(
    arm_logs: np.ndarray,
    ref_logs: np.ndarray,
    codes: np.ndarray,
    flags: np.ndarray | None,
    alpha: float,
) -> int:
    """Decide again with stats.paired_ratio_ci + stats.verdict (+ stats.futility_p): arm_logs
    (sims, spec, n), ref_logs (sims, n); stop on a difference."""
    for s in range(codes.shape[0]):
        for a in range(arm_logs.shape[1]):
            ci = stats.paired_ratio_ci(arm_logs[s, a], ref_logs[s], 1 - alpha)
            if VERDICTS.index(stats.verdict(ci.low, ci.high, defaults.MARGIN)) != codes[s, a]:
                raise SystemExit(f"vectorised verdict differs from stats at sim {s}, arm {a}")
            if flags is None:
                continue
            ci95 = stats.paired_ratio_ci(arm_logs[s, a], ref_logs[s], 0.95)
            p = stats.futility_p(ci95, defaults.TARGET)
            if (p is not None and p < defaults.FUTILITY_ALPHA) != flags[s, a]:
                raise SystemExit(f"vectorised futility differs from stats at sim {s}, arm {a}")
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
    logs = summaries(case, _cut(d, blocks), m)[:, : case.arms]  # no A/A arm
    x = logs[:, 1:, :] - logs[:, :1, :]
    alpha = ALPHA / (case.arms - 1)
    codes = verdicts(x, alpha, defaults.MARGIN)
    if n_check:
        check(logs[:n_check, 1:], logs[:n_check, 0], codes[:n_check], None, alpha)
    seconds = np.full(sims, case.arms * blocks * float(start_s(costs, FIRST_REQUESTS)))
    return Outcome(codes, seconds, np.full(codes.shape, blocks), m[:, -1], (blocks,))


def _cut(d: Draw, blocks: int) -> Draw:
    return Draw(d.level[:, :, :blocks], d.noise[:, :, :blocks], d.chi)


def planned_m(case: Case, d: Draw, costs: planner.Costs) -> np.ndarray:
    """m* per simulation from what blocks 1-2 show: S1² pooled over their restarts, T2² per
    arm (the A/A repeat included) from its two restart means — through planner.plan_requests."""
    sq2 = math.log1p(case.request_cv**2)
    first = summaries(case, _cut(d, 2), np.full((d.level.shape[0], 2), FIRST_REQUESTS))
    s2_sq = first.var(axis=2, ddof=1)  # (sims, arms + 1)
    s1_sq = sq2 * d.chi
    out = np.empty(len(s1_sq), dtype=int)
    for s in range(len(s1_sq)):
        noise = pd.DataFrame(
            {"s1_sq": s1_sq[s], "t2_sq": s2_sq[s] - s1_sq[s] / FIRST_REQUESTS},
            index=range(s2_sq.shape[1]),
        )
        out[s] = planner.plan_requests(costs, noise, current=FIRST_REQUESTS).requests
    return out


@dataclass(frozen=True)
class Parts:
    """Which parts of the time-on-site design run (all of them in the tool)."""

    futility: bool = True
    pool_aa: bool = True

    @property
    def name(self) -> str:
        if self.futility and self.pool_aa:
            return "the design"
        if not (self.futility or self.pool_aa):
            return "neither (the design before)"
        return "no futility stop" if self.pool_aa else "no A/A repeat in the reference"


def on_site(
    case: Case,
    d: Draw,
    max_blocks: int,
    costs: planner.Costs,
    m_star: np.ndarray,
    n_check: int,
    parts: Parts = Parts(),
) -> Outcome:
    """The time-on-site plan: m* from block 3, looks, per-arm stopping when decided or
    futile, each block's reference the mean of the baseline and its A/A repeat."""
    sims = d.level.shape[0]
    looks = tuple(sequential.planned_looks(max_blocks))
    alpha = sequential.sequential_alpha(looks, ALPHA / (case.arms - 1))
    m = np.where(np.arange(max_blocks)[None, :] < 2, FIRST_REQUESTS, m_star[:, None])
    logs = summaries(case, _cut(d, max_blocks), m)
    ref = (logs[:, 0] + logs[:, -1]) / 2 if parts.pool_aa else logs[:, 0]
    arm_logs = logs[:, 1 : case.arms, :]
    x = arm_logs - ref[:, None, :]
    spec = case.arms - 1
    codes = np.full((sims, spec), INCONCLUSIVE)
    blocks = np.full((sims, spec), looks[-1])
    open_ = np.ones((sims, spec), dtype=bool)
    for i, n in enumerate(looks):
        v = verdicts(x[:, :, :n], alpha, defaults.MARGIN)
        last = i == len(looks) - 1
        gives_up = futile(x[:, :, :n]) if parts.futility and not last else None
        if n_check and i == 0:
            flags = gives_up[:n_check] if gives_up is not None else None
            check(arm_logs[:n_check, :, :n], ref[:n_check, :n], v[:n_check], flags, alpha)
        stop = open_ & ((v != INCONCLUSIVE) | last)
        if gives_up is not None:
            stop |= open_ & gives_up
        codes[stop], blocks[stop] = v[stop], n
        open_ &= ~stop
    base = blocks.max(axis=1)
    per_block = start_s(costs, m)  # (sims, blocks)
    running = (np.arange(max_blocks)[None, None, :] < blocks[:, :, None]).sum(axis=1)
    references = 2 if parts.pool_aa else 1  # the baseline, and its A/A repeat
    running = running + references * (np.arange(max_blocks)[None, :] < base[:, None])
    seconds = (running * per_block).sum(axis=1)
    return Outcome(codes, seconds, blocks, m_star, looks)


def wrong(codes: np.ndarray, effect: float) -> np.ndarray:
    """Per simulation: some verdict the truth contradicts (INCONCLUSIVE is never wrong)."""
    inside = 1 / (1 + defaults.MARGIN) <= 1 + effect <= 1 + defaults.MARGIN
    bad = [WIN, LOSS] if inside else [LOSS, EQUIVALENT]
    return np.asarray(np.isin(codes, bad).any(axis=1))


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
    parts: Parts = Parts(),
) -> int:
    """The smallest maximum from 5 up whose WIN rate at +10% reaches `target`."""

    def reaches(r: int) -> bool:
        return power(on_site(case10, d10, r, costs, m_star, 0, parts)) >= target

    return smallest(reaches, 5, cap, f"adaptive plan ({parts.name})")


def size_fixed(case10: Case, d10: Draw, target: float, costs: planner.Costs, cap: int) -> int:
    """The fewest blocks from 5 up whose WIN rate at +10% reaches `target`."""

    def reaches(r: int) -> bool:
        return power(fixed(case10, d10, r, costs, 0)) >= target

    return smallest(reaches, 5, cap, "fixed plan")


WITHOUT = (Parts(futility=False), Parts(pool_aa=False), Parts(futility=False, pool_aa=False))


@dataclass
class Results:
    at_90: list[Row]  # both plans sized for 90% power at +10%: the goal's comparison
    at_fixed: list[Row]  # the fixed plan at 5 blocks, the adaptive one at its power
    without: dict[str, list[Row]]  # the 90% comparison without a part of the design


def run(args: argparse.Namespace) -> Results:
    costs = planner.Costs(
        startup_s=args.startup,
        stop_s=0.0,
        warmup_s={"w": args.request},
        request_s={"w": args.request},
        source="benchmark",
    )
    out = Results([], [], {p.name: [] for p in WITHOUT})
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
            cap = args.max_blocks
            f90 = size_fixed(c10, d10, args.power, costs, cap)
            r90 = size_adaptive(c10, d10, args.power, costs, m10, cap)
            p_fixed = power(fixed(c10, d10, args.fixed_blocks, costs, 0))
            r_eq = size_adaptive(c10, d10, p_fixed, costs, m10, cap)
            r_without = {
                p.name: size_adaptive(c10, d10, args.power, costs, m10, cap, p) for p in WITHOUT
            }
            for e, d in draws.items():
                case = Case(rcv, qcv, e, args.arms)
                m_star = m10 if e == 0.10 else planned_m(case, d, costs)
                fp = fixed(case, d, f90, costs, args.check)
                out.at_90.append(
                    Row(case, fp, on_site(case, d, r90, costs, m_star, args.check), r90)
                )
                f5 = fixed(case, d, args.fixed_blocks, costs, 0)
                out.at_fixed.append(Row(case, f5, on_site(case, d, r_eq, costs, m_star, 0), r_eq))
                for p in WITHOUT:
                    site = on_site(case, d, r_without[p.name], costs, m_star, 0, p)
                    out.without[p.name].append(Row(case, fp, site, r_without[p.name]))
    return out


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
    mean = mean_saving(rows)
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


def mean_saving(rows: Sequence[Row]) -> float:
    return sum(r.saving() for r in rows) / len(rows)


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
    p.add_argument("--max-blocks", type=int, default=90, help="largest plan searched")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    began, load = time.perf_counter(), os.getloadavg()[0]
    res = run(args)
    print(
        f"Seed {args.seed}, {args.sims} simulations per case, {args.arms} arms (family of "
        f"{args.arms - 1}; the time-on-site plan adds the baseline's A/A repeat), start-up "
        f"{args.startup:g} s, request {args.request:g} s, δ = {defaults.MARGIN}, target "
        f"+{defaults.TARGET:.0%}, futility α = {defaults.FUTILITY_ALPHA}; "
        f"{time.perf_counter() - began:.0f} s, load average {load:.1f} → "
        f"{os.getloadavg()[0]:.1f}. WIN: share of spec arms called WIN; wrong: share of "
        "bundles with a verdict the truth contradicts; MC SE of a rate p: "
        f"sqrt(p(1−p)/{args.sims}) (≤ {0.5 / math.sqrt(args.sims):.1%}).\n"
    )
    print(f"Both sized for {args.power:.0%} power at +10%:\n")
    print(table(res.at_90))
    print(
        f"\nThe fixed plan at {args.fixed_blocks} blocks × {FIRST_REQUESTS} requests, the "
        "time-on-site plan sized for the fixed plan's power:\n"
    )
    print(table(res.at_fixed))
    print(f"\nWhat each part gives (both sized for {args.power:.0%} power at +10%):\n")
    print("| time-on-site plan | mean saving | worst case |\n|---|---:|---:|")
    for name, rows in [("the design", res.at_90), *res.without.items()]:
        worst = min(rows, key=lambda r: r.saving())
        c = worst.case
        print(
            f"| {name} | {mean_saving(rows):.1%} | {worst.saving():+.0%} (CV "
            f"{c.restart_cv:.0%}/{c.request_cv:.0%} {c.effect:+.0%}) |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
