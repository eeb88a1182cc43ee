"""Benchmark: wall-clock to a decided report, adaptive plan vs fixed plan, same m* and reference.

Usage::

    python benchmarks/time_on_site.py [--sims 200] [--seed 0] [--check 20]
        [--restart-cv 0.05 0.10] [--request-cv 0.03 0.10] [--prompts none shared by-arm]
        [--effect 0 0.05 0.10 0.20] [--rules raw pairing] [--arms 8] [--prompt-set 20]
        [--startup 90] [--request 2] [--max-blocks 90]

One bundle per simulation: a baseline, `arms − 1` speculative arms with the case's true
effect and the baseline's A/A repeat, one workload of `prompt-set` prompts, restarts in
blocks (each block starts every arm once). Each restart draws its level (lognormal, CV
`restart_cv`) on a block drift (random walk, CV 1% a block, shared by the block); request i
of block b serves prompt (b·m + i) mod n when m < n, as collect does (every arm of a block
the same prompts), and decodes at level × the prompt's effect on that arm × lognormal request
noise (CV `request_cv`). The prompt conditions (`--prompts`): none; shared — prompt effects
of log-SD 0.20, the same on every arm (prompts of different difficulty); by-arm — shared as
above plus, on each speculative arm, its own effects of log-SD 0.15 (drafting pays on some
prompts: the recorded CPU sample's n-gram arms show 12-22%, analyse.pairing's P²), centred
over the set so that the true speedup over the prompt set is the case's effect. Every
case of one noise condition uses the same random numbers for every effect (common random
numbers: the effects differ by a shift only, so m* is the same). Restart summaries are means
of log tok/s (geometric means).

Costs (seconds): start-up `startup` (90), one warm-up and every measured request `request`
(2), stop 0. A start with m requests costs startup + (1 + m) · request.

Both plans measure blocks 1-2 with 15 requests, then m* requests per restart from what
those blocks show, through the tool's own code — the m* rule (`--rules`):
- pairing: planner.noise_components (each arm's prompt effects removed, analyse.pairing)
  and planner.plan_requests, the tool now;
- raw: Kalibera & Jones on the within-restart variance with the prompt effects in it and
  the variance of the restart means (the tool before prompt pairing), through plan_requests;
and both compare each spec arm with the mean of the baseline and its A/A repeat in each
block (Design.pool_aa): the fixed plan pays for the A/A start too. They differ only in when
they stop:
- fixed: R blocks, decided once at 1 − α/(arms − 1) (paired t on the block log ratios,
  Bonferroni, δ = defaults.MARGIN), R the fewest blocks from 5 up whose WIN rate at +10% is
  at least `--power`;
- adaptive (`sweep --adaptive`): looks at sequential.planned_looks(R) at the Pocock per-look
  level sequential.sequential_alpha(looks, α/(arms − 1)); an arm decided at a look or futile
  there (undecided while the one-sided t test of "ratio ≥ 1 + defaults.TARGET" has
  p < defaults.FUTILITY_ALPHA) gets no more restarts, the baseline and its repeat go on
  while one is open; R the smallest maximum from 5 up with the same power.
The first `--check` simulations of every plan are decided again with stats.paired_ratio_ci,
stats.verdict and stats.futility_p, and the script stops if one differs.

Monte-Carlo error: a rate p from n simulations has SE sqrt(p(1−p)/n); the printed minutes
are means over the simulations.
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
from diagnostic.analyse import pairing, sequential, stats  # noqa: E402
from diagnostic.measure.sweep import planner  # noqa: E402

ALPHA = 0.05
FIRST = defaults.REQUESTS  # blocks 1-2: the plan's requests, before m* is known
DRIFT_CV = 0.01
PROMPTS = {"none": (0.0, 0.0), "shared": (0.20, 0.0), "by-arm": (0.20, 0.15)}
RULES = ("raw", "pairing")


@dataclass(frozen=True)
class Noise:
    """The simulated servers of one condition (the effect aside)."""

    restart_cv: float
    request_cv: float
    prompts: str
    arms: int
    prompt_set: int

    @property
    def names(self) -> list[str]:
        return ["baseline", *(f"spec{i}" for i in range(1, self.arms)), "baseline-aa"]


@dataclass(frozen=True)
class Draw:
    """What the servers do, shared by every plan and effect (rows: the baseline, the spec
    arms, the A/A repeat)."""

    level: np.ndarray  # (sims, rows, blocks) log level of each restart, drift included
    effect: np.ndarray  # (sims, rows, n) log effect of each prompt on each arm
    first: np.ndarray  # (sims, rows, 2, FIRST) request noise of blocks 1-2 (log)
    later: np.ndarray  # (sims, rows, blocks) standard normal: a later restart's mean noise


def draw(c: Noise, sims: int, blocks: int, rng: np.random.Generator) -> Draw:
    rows = c.arms + 1
    sr, sq = math.sqrt(math.log1p(c.restart_cv**2)), math.sqrt(math.log1p(c.request_cv**2))
    drift = np.cumsum(rng.normal(0.0, DRIFT_CV, (sims, 1, blocks)), axis=2)
    level = math.log(100.0) + drift + rng.normal(0.0, sr, (sims, rows, blocks))
    shared, by_arm = PROMPTS[c.prompts]
    effect = rng.normal(0.0, shared, (sims, 1, c.prompt_set)) + np.zeros((1, rows, 1))
    own = rng.normal(0.0, by_arm, (sims, rows, c.prompt_set))
    own -= own.mean(axis=2, keepdims=True)  # the true speedup over the set: the case's effect
    own[:, [0, -1]] = 0.0  # the baseline and its A/A repeat are one configuration
    first = rng.normal(0.0, sq, (sims, rows, 2, FIRST))
    return Draw(level, effect + own, first, rng.standard_normal((sims, rows, blocks)))


def first_prompts(n: int) -> np.ndarray:
    """(2, FIRST) prompt of each request of blocks 1-2, as collect's plan_jobs gives them."""
    start = [b * FIRST % n if n > FIRST else 0 for b in range(2)]
    return np.array([[(s + i) % n for i in range(FIRST)] for s in start])


def first_logs(d: Draw) -> np.ndarray:
    """(sims, rows, 2, FIRST) log tok/s of the requests of blocks 1-2."""
    prompts = first_prompts(d.effect.shape[2])
    return d.level[:, :, :2, None] + d.effect[:, :, prompts] + d.first


def window_mean(effect: np.ndarray, m: np.ndarray) -> np.ndarray:
    """(sims, rows, blocks) mean prompt effect over the m[s, b] requests of block b: prompt
    (b·m + i) mod n for i < m when m < n, else from prompt 0 (collect's rotation)."""
    n = effect.shape[2]
    b = np.arange(m.shape[1])[None, :]
    start = np.where(m < n, b * m % n, 0)
    offset = (np.arange(n)[None, None, :] - start[:, :, None]) % n
    counts = m[:, :, None] // n + (offset < (m % n)[:, :, None])
    return np.einsum("sbn,srn->srb", counts, effect) / m[:, None, :]


def summaries(c: Noise, d: Draw, m: np.ndarray, shift: float) -> np.ndarray:
    """Log restart summaries with m[s, b] requests per restart in block b; the spec arms
    shifted by log(1 + effect)."""
    sq = math.sqrt(math.log1p(c.request_cv**2))
    blocks = m.shape[1]
    out = (
        d.level[:, :, :blocks]
        + window_mean(d.effect, m)
        + d.later[:, :, :blocks] * sq / np.sqrt(m[:, None, :])
    )
    out[:, :, :2] = first_logs(d).mean(axis=3)  # every plan has ≥ 5 blocks
    out[:, 1:-1] += math.log1p(shift)
    return out


def planned_m(rule: str, c: Noise, d: Draw, costs: planner.Costs) -> np.ndarray:
    """m* per simulation from blocks 1-2, by `rule`, through planner.plan_requests."""
    logs = first_logs(d)
    out = np.empty(logs.shape[0], dtype=int)
    if rule == "raw":
        s1 = logs.var(axis=3, ddof=1).mean(axis=2)
        t2 = logs.mean(axis=3).var(axis=2, ddof=1) - s1 / FIRST
        for s in range(len(out)):
            noise = pd.DataFrame({"s1_sq": s1[s], "t2_sq": t2[s]})
            out[s] = planner.plan_requests(costs, noise, current=FIRST).requests
        return out
    prompts = first_prompts(c.prompt_set)
    frame = pd.DataFrame(
        {
            "arm": np.repeat(c.names, 2 * FIRST),
            "restart": np.tile(np.repeat([0, 1], FIRST), len(c.names)),
            "prompt_id": np.tile([f"p{j:02d}" for j in prompts.ravel()], len(c.names)),
            "workload": "w",
            "concurrency": 1,
            "excluded": "",
        }
    )
    for s in range(len(out)):
        frame["decode_tps"] = np.exp(logs[s].ravel())
        noise = planner.noise_components(frame, "baseline")
        out[s] = planner.plan_requests(costs, noise, current=FIRST).requests
    return out


def true_m(c: Noise, costs: planner.Costs) -> int:
    """The m* the true components give (pairing.paired_requests within the planner's floor
    and cap): S1² and T2² of the lognormal CVs, and one side's share of the prompt-by-arm
    variance, half the variance of the speculative arms' centred own effects."""
    by_arm = PROMPTS[c.prompts][1]
    s1, t2 = math.log1p(c.request_cv**2), math.log1p(c.restart_cv**2)
    p2 = by_arm**2 * (c.prompt_set - 1) / c.prompt_set / 2
    m = pairing.paired_requests(costs.restart_s, costs.mean_request_s, s1, t2, p2, c.prompt_set)
    return min(max(m or FIRST, defaults.PLAN_MIN_REQUESTS), defaults.PLAN_MAX_REQUESTS)


def check(
    arm: np.ndarray, ref: np.ndarray, codes: np.ndarray, flags: np.ndarray | None, alpha: float
) -> None:
    """Decide again with stats.paired_ratio_ci + stats.verdict (+ stats.futility_p): arm
    (sims, spec, n), ref (sims, n); stop on a difference."""
    for s in range(codes.shape[0]):
        for a in range(arm.shape[1]):
            ci = stats.paired_ratio_ci(arm[s, a], ref[s], 1 - alpha)
            if VERDICTS.index(stats.verdict(ci.low, ci.high, defaults.MARGIN)) != codes[s, a]:
                raise SystemExit(f"vectorised verdict differs from stats at sim {s}, arm {a}")
            if flags is not None:
                p = stats.futility_p(stats.paired_ratio_ci(arm[s, a], ref[s]), defaults.TARGET)
                if (p is not None and p < defaults.FUTILITY_ALPHA) != flags[s, a]:
                    raise SystemExit(f"vectorised futility differs from stats at sim {s}, arm {a}")


@dataclass
class Outcome:
    """Per simulation: the spec arms' verdict codes, the seconds, blocks per spec arm."""

    codes: np.ndarray  # (sims, arms − 1)
    seconds: np.ndarray  # (sims,)
    blocks: np.ndarray  # (sims, arms − 1)
    looks: tuple[int, ...]


def start_s(costs: planner.Costs, m: np.ndarray) -> np.ndarray:
    return costs.startup_s + costs.stop_s + (1 + m) * costs.request_s["w"]


def requests(m_star: np.ndarray, blocks: int) -> np.ndarray:
    """(sims, blocks): 15 requests in blocks 1-2, m* after."""
    return np.where(np.arange(blocks)[None, :] < 2, FIRST, m_star[:, None])


def _ratios(c: Noise, d: Draw, m: np.ndarray, effect: float) -> tuple[np.ndarray, np.ndarray]:
    logs = summaries(c, d, m, effect)
    return logs[:, 1:-1], (logs[:, 0] + logs[:, -1]) / 2  # the pooled reference


def fixed(
    c: Noise, d: Draw, r: int, costs: planner.Costs, m_star: np.ndarray, effect: float, n_check: int
) -> Outcome:
    m = requests(m_star, r)
    arm, ref = _ratios(c, d, m, effect)
    alpha = ALPHA / (c.arms - 1)
    codes = verdicts(arm - ref[:, None], alpha, defaults.MARGIN)
    if n_check:
        check(arm[:n_check], ref[:n_check], codes[:n_check], None, alpha)
    seconds = (c.arms + 1) * start_s(costs, m).sum(axis=1)
    return Outcome(codes, seconds, np.full(codes.shape, r), (r,))


def futile(x: np.ndarray) -> np.ndarray:
    """Paired block log ratios x (..., n): the one-sided t test of "ratio ≥ 1 + TARGET" has
    p < FUTILITY_ALPHA (stats.futility_p, vectorised)."""
    n = x.shape[-1]
    t = (x.mean(axis=-1) - math.log1p(defaults.TARGET)) / (x.std(axis=-1, ddof=1) / math.sqrt(n))
    return np.asarray(sps.t.cdf(t, n - 1) < defaults.FUTILITY_ALPHA)


def adaptive(
    c: Noise, d: Draw, r: int, costs: planner.Costs, m_star: np.ndarray, effect: float, n_check: int
) -> Outcome:
    looks = tuple(sequential.planned_looks(r))
    alpha = sequential.sequential_alpha(looks, ALPHA / (c.arms - 1))
    m = requests(m_star, r)
    arm, ref = _ratios(c, d, m, effect)
    x = arm - ref[:, None]
    sims, spec = x.shape[:2]
    codes = np.full((sims, spec), INCONCLUSIVE)
    blocks = np.full((sims, spec), looks[-1])
    open_ = np.ones((sims, spec), dtype=bool)
    for i, n in enumerate(looks):
        v = verdicts(x[:, :, :n], alpha, defaults.MARGIN)
        last = i == len(looks) - 1
        gives_up = np.zeros_like(open_) if last else futile(x[:, :, :n])
        if n_check and i == 0:
            check(
                arm[:n_check, :, :n],
                ref[:n_check, :n],
                v[:n_check],
                None if last else gives_up[:n_check],
                alpha,
            )
        stop = open_ & ((v != INCONCLUSIVE) | last | gives_up)
        codes[stop], blocks[stop] = v[stop], n
        open_ &= ~stop
    running = (np.arange(r)[None, None, :] < blocks[:, :, None]).sum(axis=1)
    running = running + 2 * (np.arange(r)[None, :] < blocks.max(axis=1)[:, None])
    return Outcome(codes, (running * start_s(costs, m)).sum(axis=1), blocks, looks)


Plan = Callable[[Noise, Draw, int, planner.Costs, np.ndarray, float, int], Outcome]


def power(o: Outcome) -> float:
    return float((o.codes == WIN).mean())


def wrong(o: Outcome, effect: float) -> float:
    """Share of simulations with a verdict the truth contradicts (INCONCLUSIVE never is)."""
    inside = 1 / (1 + defaults.MARGIN) <= 1 + effect <= 1 + defaults.MARGIN
    bad = [WIN, LOSS] if inside else [LOSS, EQUIVALENT]
    return float(np.isin(o.codes, bad).any(axis=1).mean())


def size(
    plan: Plan, c: Noise, d: Draw, costs: planner.Costs, m_star: np.ndarray, target: float, cap: int
) -> int:
    """The fewest blocks (fixed) or the smallest maximum (adaptive) from 5 up whose WIN rate at
    +10% reaches `target`, by bisection (power grows with blocks, up to Monte-Carlo noise)."""

    def reaches(r: int) -> bool:
        return power(plan(c, d, r, costs, m_star, 0.10, 0)) >= target

    low, high = 5, cap
    if not reaches(high):
        raise SystemExit(f"{plan.__name__}: no plan up to {cap} blocks reaches the power asked")
    while low < high:
        mid = (low + high) // 2
        low, high = (low, mid) if reaches(mid) else (mid + 1, high)
    return low


@dataclass
class Row:
    """One noise condition and m* rule: both plans at every effect."""

    noise: Noise
    rule: str
    m_star: np.ndarray
    true_m: int
    fixed: dict[float, Outcome]
    adaptive: dict[float, Outcome]

    def saving(self, effect: float) -> float:
        return 1 - float(self.adaptive[effect].seconds.mean() / self.fixed[effect].seconds.mean())

    def mean_saving(self) -> float:
        return float(np.mean([self.saving(e) for e in self.fixed]))


def run(args: argparse.Namespace) -> list[Row]:
    costs = planner.Costs(
        startup_s=args.startup,
        stop_s=0.0,
        warmup_s={"w": args.request},
        request_s={"w": args.request},
        source="benchmark",
    )
    if 0.10 not in args.effect:
        raise SystemExit("--effect must include 0.10: the plans are sized on it")
    rows = []
    for rcv in args.restart_cv:
        for qcv in args.request_cv:
            for prompts in args.prompts:
                c = Noise(rcv, qcv, prompts, args.arms, args.prompt_set)
                seed = [args.seed, int(rcv * 1000), int(qcv * 1000), list(PROMPTS).index(prompts)]
                d = draw(c, args.sims, args.max_blocks, np.random.default_rng(seed))
                for rule in args.rules:
                    m_star = planned_m(rule, c, d, costs)
                    r_f = size(fixed, c, d, costs, m_star, args.power, args.max_blocks)
                    r_a = size(adaptive, c, d, costs, m_star, args.power, args.max_blocks)
                    rows.append(
                        Row(
                            c,
                            rule,
                            m_star,
                            true_m(c, costs),
                            {
                                e: fixed(c, d, r_f, costs, m_star, e, args.check)
                                for e in args.effect
                            },
                            {
                                e: adaptive(c, d, r_a, costs, m_star, e, args.check)
                                for e in args.effect
                            },
                        )
                    )
    return rows


def table(rows: Sequence[Row], effects: Sequence[float]) -> str:
    saving = " | ".join(f"saving {e:+.0%}" for e in effects)
    out = [
        "| restart CV | request CV | prompts | m* median (true) | fixed: blocks, min at +10% "
        "| adaptive: max (looks), min at +10% | WIN at +10%: fixed, adaptive | wrong: fixed, "
        f"adaptive | {saving} | mean saving |",
        "|" + "---:|" * (8 + len(effects) + 1),
    ]
    for r in rows:
        c, f10, a10 = r.noise, r.fixed[0.10], r.adaptive[0.10]
        wrong_f = max(wrong(o, e) for e, o in r.fixed.items())
        wrong_a = max(wrong(o, e) for e, o in r.adaptive.items())
        out.append(
            f"| {c.restart_cv:.0%} | {c.request_cv:.0%} | {c.prompts} | "
            f"{np.median(r.m_star):.0f} ({r.true_m}) | "
            f"{f10.looks[-1]}, {f10.seconds.mean() / 60:.0f} | "
            f"{a10.looks[-1]} ({'/'.join(map(str, a10.looks))}), {a10.seconds.mean() / 60:.0f} | "
            f"{power(f10):.0%}, {power(a10):.0%} | {wrong_f:.1%}, {wrong_a:.1%} | "
            + " | ".join(f"{r.saving(e):+.0%}" for e in effects)
            + f" | {r.mean_saving():+.1%} |"
        )
    return "\n".join(out)


def summary(rows: Sequence[Row], effects: Sequence[float]) -> str:
    """Per m* rule and prompt condition, and over all: the mean saving, the cases where the
    adaptive plan took longer, each plan's mean minutes over the noise conditions and effects."""
    out = [
        "| m* rule | prompts | mean saving | cases slower | fixed: mean min | adaptive: mean min |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for rule in RULES:
        for prompts in [*PROMPTS, "all"]:
            mine = [r for r in rows if r.rule == rule and prompts in (r.noise.prompts, "all")]
            if not mine:
                continue
            slower = sum(r.saving(e) < 0 for r in mine for e in effects)
            fixed_s = np.mean([o.seconds.mean() for r in mine for o in r.fixed.values()])
            site_s = np.mean([o.seconds.mean() for r in mine for o in r.adaptive.values()])
            out.append(
                f"| {rule} | {prompts} | {np.mean([r.mean_saving() for r in mine]):.1%} | "
                f"{slower} of {len(mine) * len(effects)} | {fixed_s / 60:.0f} | "
                f"{site_s / 60:.0f} |"
            )
    return "\n".join(out)


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sims", type=int, default=200)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--check", type=int, default=5, help="sims decided again with stats")
    p.add_argument("--restart-cv", type=float, nargs="+", default=[0.05, 0.10])
    p.add_argument("--request-cv", type=float, nargs="+", default=[0.03, 0.10])
    p.add_argument("--prompts", nargs="+", choices=list(PROMPTS), default=list(PROMPTS))
    p.add_argument("--effect", type=float, nargs="+", default=[0.0, 0.05, 0.10, 0.20])
    p.add_argument("--rules", nargs="+", choices=RULES, default=list(RULES), help="m* rules")
    p.add_argument("--arms", type=int, default=8, help="baseline + speculative arms")
    p.add_argument("--prompt-set", type=int, default=20, help="prompts in the workload")
    p.add_argument("--startup", type=float, default=90.0, help="seconds a server start takes")
    p.add_argument("--request", type=float, default=2.0, help="seconds one request takes")
    p.add_argument(
        "--power", type=float, default=0.90, help="power at +10% both plans are sized for"
    )
    p.add_argument("--max-blocks", type=int, default=90, help="largest plan searched")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    began, load = time.perf_counter(), os.getloadavg()[0]
    rows = run(args)
    print(
        f"Seed {args.seed}, {args.sims} simulations per condition, {args.arms} arms (family of "
        f"{args.arms - 1}) and the baseline's A/A repeat, {args.prompt_set} prompts, start-up "
        f"{args.startup:g} s, request {args.request:g} s, δ = {defaults.MARGIN}, target "
        f"+{defaults.TARGET:.0%}, futility α = {defaults.FUTILITY_ALPHA}; both plans sized for "
        f"{args.power:.0%} power at +10%; {time.perf_counter() - began:.0f} s, load average "
        f"{load:.1f} → {os.getloadavg()[0]:.1f}. WIN: share of spec arms called WIN; wrong: "
        "the largest share, over the effects, of bundles with a verdict the truth "
        f"contradicts; MC SE of a rate ≤ {0.5 / math.sqrt(args.sims):.1%}.\n"
    )
    for rule in args.rules:
        print(f"m* rule: {rule}\n")
        print(table([r for r in rows if r.rule == rule], args.effect))
        print()
    print(summary(rows, args.effect))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
