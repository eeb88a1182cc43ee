"""Benchmark: server restarts needed for a verdict, adaptive plan vs fixed plan at equal power.

Usage::

    python benchmarks/time_to_verdict.py [--sims 40000] [--seed 0] [--restart-cv 0.05 0.10]
        [--effect 0.10] [--request-cv 0.10] [--requests 15] [--drift-cv 0] [--delta 0.02]
        [--power 0.9] [--looks N N ...] [--check 200]

Simulates blocks of (baseline, spec) server restarts. Each restart gets a random level
(lognormal, SD `restart_cv` on the log scale: the restart-to-restart CV) and serves
`requests` requests whose decode tok/s scatter around it (lognormal, SD `request_cv`: the
within-restart noise); a block may add a drift shared by its two restarts. The spec arm is
faster by `effect` (10%) or not at all (0%: the type-I check).

The two plans are sized the way a group-sequential design is compared, at equal error rates
(same α, same power), with the project's planning functions (diagnostic.analyse.sequential),
from the CV of one restart's mean, sqrt(restart_cv² + request_cv²/requests):

- fixed plan: plans.fixed_restarts_for_power, the fewest blocks whose 95% paired interval
  calls WIN with probability `power` (the simulation also shows the power one block less);
- adaptive plan: plans.adaptive_max_restarts blocks at most (Pocock's inflation of the fixed
  plan, plus what t intervals cost), looks at sequential.planned_looks (what `sweep --adaptive`
  uses), each at the level 1 − sequential.sequential_alpha(looks), stopping at the first look
  whose verdict is not INCONCLUSIVE (WIN, LOSS or EQUIVALENT), else at the last one.

Every experiment is decided as `diagnose report` decides it (diagnostic.analyse.compare):
restart summary = log of the mean request; interval = paired t interval on the block log
ratios; verdict = stats.verdict with δ = defaults.MARGIN. The decisions are vectorised
with numpy; the first `--check` simulations of every scenario are decided again, look by
look, with stats.paired_ratio_ci and stats.verdict, and the script stops if one differs.
Both plans see the same simulated restarts.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy import stats as sps

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

import power as plans  # noqa: E402  (benchmarks/power.py)

from diagnostic import defaults  # noqa: E402
from diagnostic.analyse import sequential, stats  # noqa: E402

FIXED_ALPHA = 0.05
VERDICTS = ("WIN", "LOSS", "EQUIVALENT", "INCONCLUSIVE")
WIN, LOSS, EQUIVALENT, INCONCLUSIVE = range(4)
CHUNK = 4000  # simulations drawn at once: bounds memory at 2 × CHUNK × blocks × requests


@dataclass(frozen=True)
class Scenario:
    """What the simulated server does."""

    effect: float
    restart_cv: float
    request_cv: float = 0.10
    requests: int = 15
    drift_cv: float = 0.0

    def summary_cv(self) -> float:
        """CV of one restart's mean: what a consultant measures across restarts."""
        return math.sqrt(self.restart_cv**2 + self.request_cv**2 / self.requests)


@dataclass(frozen=True)
class Design:
    """Both plans for one restart CV: fixed blocks, adaptive looks and per-look level."""

    fixed: int
    looks: tuple[int, ...]
    alpha_look: float
    delta: float

    @classmethod
    def size(cls, sc: Scenario, delta: float, power: float, looks: tuple[int, ...] = ()) -> Design:
        """Plans sized for `power` by benchmarks/power.py."""
        cv = sc.summary_cv()
        fixed = plans.fixed_restarts_for_power(cv, sc.effect, delta, power)
        if fixed is None:
            raise SystemExit(f"no fixed plan reaches {power:.0%} power at CV {cv:.1%}")
        if not looks:
            n_max = plans.adaptive_max_restarts(cv, sc.effect, delta, power)
            if n_max is None:
                raise SystemExit(f"no adaptive plan reaches {power:.0%} power at CV {cv:.1%}")
            looks = tuple(sequential.planned_looks(n_max))
        return cls(fixed, looks, sequential.sequential_alpha(looks), delta)

    def name(self) -> str:
        """Looks as 5/9/14/18."""
        return "/".join(str(n) for n in self.looks)


def simulate(rng: np.random.Generator, sc: Scenario, sims: int, blocks: int) -> np.ndarray:
    """Log restart summaries, shape (2, sims, blocks): [0] spec, [1] baseline."""
    drift = rng.normal(0.0, sc.drift_cv, (sims, blocks)) if sc.drift_cv else 0.0

    def arm(shift: float) -> np.ndarray:
        level = math.log(100.0) + shift + drift + rng.normal(0.0, sc.restart_cv, (sims, blocks))
        noise = rng.normal(0.0, sc.request_cv, (sims, blocks, sc.requests))
        return np.log(np.exp(noise).mean(axis=2)) + level

    base = arm(0.0)
    return np.stack([arm(math.log1p(sc.effect)), base])


def verdicts(d: np.ndarray, n: int, alpha: float, delta: float) -> np.ndarray:
    """Verdict codes after n blocks: paired t interval at level 1 − alpha on d[:, :n], the
    block log ratios, decided as stats.verdict decides (δ = 0: the bare test)."""
    return decide(d[:, :n], alpha, delta)


def decide(x: np.ndarray, alpha: float, delta: float) -> np.ndarray:
    """Verdict codes of paired block log ratios x (..., n) at level 1 − alpha."""
    n = x.shape[-1]
    mean = x.mean(axis=-1)
    half = float(sps.t.isf(alpha / 2, n - 1)) * x.std(axis=-1, ddof=1) / math.sqrt(n)
    low, high = np.exp(mean - half), np.exp(mean + half)
    upper, lower = 1.0 + delta, 1.0 / (1.0 + delta)
    return np.select(
        [low > upper, high < lower, (lower <= low) & (high <= upper)],
        [WIN, LOSS, EQUIVALENT],
        INCONCLUSIVE,
    )


def adaptive(d: np.ndarray, looks: tuple[int, ...], alpha: float, delta: float) -> np.ndarray:
    """(blocks used, verdict code) per simulation: stop at the first look that decides."""
    blocks = np.full(len(d), looks[-1])
    code = np.full(len(d), INCONCLUSIVE)
    open_ = np.ones(len(d), dtype=bool)
    for i, n in enumerate(looks):
        v = verdicts(d, n, alpha, delta)
        stop = open_ & ((v != INCONCLUSIVE) | (i == len(looks) - 1))
        blocks[stop], code[stop] = n, v[stop]
        open_ &= ~stop
    return np.stack([blocks, code])


def check(logs: np.ndarray, design: Design, sims: int) -> int:
    """Decide the first `sims` experiments again with stats.paired_ratio_ci + stats.verdict at
    every look and at the fixed plan; return how many decisions were compared."""
    d = logs[0] - logs[1]
    points = [(n, design.alpha_look) for n in design.looks] + [(design.fixed, FIXED_ALPHA)]
    compared = 0
    for n, alpha in points:
        vec = verdicts(d[:sims], n, alpha, design.delta)
        for s in range(min(sims, len(d))):
            ci = stats.paired_ratio_ci(logs[0, s, :n], logs[1, s, :n], 1 - alpha)
            if VERDICTS.index(stats.verdict(ci.low, ci.high, design.delta)) != vec[s]:
                raise SystemExit(f"vectorised verdict differs from stats at sim {s}, n {n}")
            compared += 1
    return compared


@dataclass
class Result:
    """Outcomes over every simulation of one scenario."""

    scenario: Scenario
    fixed: np.ndarray  # verdict codes of the fixed plan
    fixed_short: np.ndarray  # verdict codes one block short of the fixed plan
    adaptive: np.ndarray  # (blocks, code)
    size_fixed: float  # bare test (δ = 0) under the fixed plan
    size_adaptive: float  # bare test under the adaptive plan at its calibrated level
    size_pocock: float  # bare test at Pocock's normal-theory level instead
    checked: int

    def rate(self, codes: np.ndarray, *names: str) -> float:
        """Share of simulations that ended in one of `names`."""
        return float(np.isin(codes, [VERDICTS.index(v) for v in names]).mean())


def run(sc: Scenario, design: Design, sims: int, seed: int, n_check: int) -> Result:
    """Every simulation of one scenario, both plans on the same restarts."""
    rng = np.random.default_rng(seed)
    pocock = sequential.POCOCK_ALPHA.get(len(design.looks))  # tabulated for 1-4 looks
    n_max = max(design.looks[-1], design.fixed)
    parts: dict[str, list[np.ndarray]] = {k: [] for k in ("f", "s", "a", "b0", "a0", "p0")}
    checked = 0
    for start in range(0, sims, CHUNK):
        logs = simulate(rng, sc, min(CHUNK, sims - start), n_max)
        if start == 0 and n_check:
            checked = check(logs, design, n_check)
        d = logs[0] - logs[1]
        parts["f"].append(verdicts(d, design.fixed, FIXED_ALPHA, design.delta))
        parts["s"].append(verdicts(d, design.fixed - 1, FIXED_ALPHA, design.delta))
        parts["a"].append(adaptive(d, design.looks, design.alpha_look, design.delta))
        if sc.effect == 0:
            parts["b0"].append(verdicts(d, design.fixed, FIXED_ALPHA, 0.0))
            parts["a0"].append(adaptive(d, design.looks, design.alpha_look, 0.0)[1])
            if pocock is not None:
                parts["p0"].append(adaptive(d, design.looks, pocock, 0.0)[1])

    def joined(key: str, axis: int = 0) -> np.ndarray:
        return np.concatenate(parts[key], axis=axis)

    def size(key: str) -> float:
        return float(np.isin(joined(key), [WIN, LOSS]).mean()) if parts[key] else math.nan

    return Result(
        sc, joined("f"), joined("s"), joined("a", 1), size("b0"), size("a0"), size("p0"), checked
    )


def _restarts(blocks: np.ndarray) -> str:
    return f"{2 * blocks.mean():.1f} ({2 * float(np.median(blocks)):g})"


def summary_table(rows: list[tuple[Design, Result, Result]]) -> str:
    """Per restart CV: the two plans, restarts under the effect, error rates, sizes."""
    lines = [
        "| restart CV | fixed plan (restarts) | adaptive plan: looks (blocks), per-look level "
        "| restarts under the effect fixed / adaptive mean (median) | saved "
        "| power fixed / adaptive | power fixed, one block less "
        "| type-I fixed / adaptive | size δ=0 fixed / adaptive | size δ=0 at Pocock's 0.0182 "
        "| restarts under no effect fixed / adaptive |",
        "|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for design, eff, null in rows:
        fixed_r = 2 * design.fixed
        saved = 1 - 2 * float(eff.adaptive[0].mean()) / fixed_r
        pocock = sequential.POCOCK_ALPHA.get(len(design.looks))
        at_pocock = f"{null.size_pocock:.1%} ({pocock:g})" if pocock else "— (not tabulated)"
        lines.append(
            f"| {eff.scenario.restart_cv:.0%} | {design.fixed} blocks ({fixed_r}) "
            f"| {design.name()} ({design.looks[-1] / design.fixed:.2f}× the fixed), "
            f"{design.alpha_look:.4f} "
            f"| {fixed_r} / {_restarts(eff.adaptive[0])} | **{saved:.0%}** "
            f"| {eff.rate(eff.fixed, 'WIN'):.1%} / {eff.rate(eff.adaptive[1], 'WIN'):.1%} "
            f"| {eff.rate(eff.fixed_short, 'WIN'):.1%} "
            f"| {null.rate(null.fixed, 'WIN', 'LOSS'):.1%} / "
            f"{null.rate(null.adaptive[1], 'WIN', 'LOSS'):.1%} "
            f"| {null.size_fixed:.1%} / {null.size_adaptive:.1%} "
            f"| {at_pocock} "
            f"| {fixed_r} / {_restarts(null.adaptive[0])} |"
        )
    return "\n".join(lines)


def detail_table(rows: list[tuple[Design, Result, Result]]) -> str:
    """Every scenario and plan: restarts used and how often each verdict came out."""
    lines = [
        "| scenario | plan | restarts mean (median) | WIN | LOSS | EQUIVALENT | INCONCLUSIVE |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for design, *results in rows:
        for r in results:
            label = f"CV {r.scenario.restart_cv:.0%}, effect {r.scenario.effect:+.0%}"
            plans = (
                (f"fixed {design.fixed} blocks", f"{2 * design.fixed}", r.fixed),
                (f"adaptive {design.name()}", _restarts(r.adaptive[0]), r.adaptive[1]),
            )
            for name, used, codes in plans:
                rates = " | ".join(f"{r.rate(codes, v):.1%}" for v in VERDICTS)
                lines.append(f"| {label} | {name} | {used} | {rates} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    """Size both plans, simulate every scenario and print the two tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sims", type=int, default=40000, help="simulations per scenario")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--effect", type=float, default=0.10, help="true speedup, 0.10 = 10%%")
    parser.add_argument("--restart-cv", type=float, nargs="+", default=[0.05, 0.10])
    parser.add_argument("--request-cv", type=float, default=0.10, help="within-restart CV")
    parser.add_argument("--requests", type=int, default=15, help="measured requests/restart")
    parser.add_argument("--drift-cv", type=float, default=0.0, help="drift shared by a block")
    parser.add_argument("--delta", type=float, default=defaults.MARGIN, help="noise band δ")
    parser.add_argument("--power", type=float, default=0.9, help="power both plans aim at")
    parser.add_argument("--looks", type=int, nargs="*", default=[], help="override the looks")
    parser.add_argument("--check", type=int, default=200, help="sims re-decided with stats")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    rows: list[tuple[Design, Result, Result]] = []
    checked = 0
    for i, cv in enumerate(args.restart_cv):
        sc = Scenario(args.effect, cv, args.request_cv, args.requests, args.drift_cv)
        design = Design.size(sc, args.delta, args.power, tuple(sorted(args.looks)))
        null = Scenario(0.0, cv, args.request_cv, args.requests, args.drift_cv)
        seed = args.seed * 1000 + 10 * i  # one stream per scenario: order-independent
        results = [
            run(s, design, args.sims, seed + j, args.check) for j, s in enumerate((sc, null))
        ]
        rows.append((design, results[0], results[1]))
        checked += sum(r.checked for r in results)
    print(summary_table(rows))
    print()
    print(detail_table(rows))
    print(
        f"\n{args.sims} simulations per scenario, seed {args.seed}, paired intervals, "
        f"δ = {args.delta:g}, power target {args.power:.0%}, {args.requests} requests/restart "
        f"at CV {args.request_cv:.0%}, block drift CV {args.drift_cv:.0%}; standard error of a "
        f"5% rate {math.sqrt(0.05 * 0.95 / args.sims):.2%}, of a 90% power "
        f"{math.sqrt(0.9 * 0.1 / args.sims):.2%}; {checked} decisions "
        f"re-checked with stats.paired_ratio_ci + stats.verdict, all equal; "
        f"{time.perf_counter() - start:.0f} s"
    )


if __name__ == "__main__":
    main()
