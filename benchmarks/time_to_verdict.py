"""Benchmark: server restarts needed for a verdict, adaptive plan (Pocock looks) vs fixed plan.

Usage::

    python benchmarks/time_to_verdict.py [--sims 4000] [--seed 0] [--restart-cv 0.05 0.10]
        [--looks 3 5 8 12] [--method paired|welch] [--delta 0.02]

Simulates blocks of (baseline, spec) server restarts. Each restart gets a random level
(lognormal, SD `restart_cv` on the log scale: the restart-to-restart CV) and serves
`requests` requests whose decode tok/s scatter around it (lognormal, SD `request_cv`: the
within-restart noise); a block may add a drift shared by its two restarts. The spec arm is
faster by `effect` (10%) or not at all (0%: the type-I check). Each simulated experiment is
then decided the way `diagnose report` decides it (diagnostic.analyse.compare):

- restart summary = log of the mean decode tok/s of its requests;
- ratio interval = stats.paired_ratio_ci on the per-block log ratios (blocked schedule), or
  stats.welch_ratio_ci on log restart means with --method welch;
- verdict = stats.verdict(low, high, δ), δ = stats.DEFAULT_DELTA unless --delta;
- adaptive plan: looks after compare.DEFAULT_LOOKS = 3, 5, 8, 12 blocks, each at the Pocock
  level 1 − stats.pocock_alpha(4) (stats.look_number finds the look), stop at the first look
  whose verdict is not INCONCLUSIVE, else at the last;
- fixed plan: as many blocks as the last look, one look at 95%.

Both plans see the same simulated restarts (common random numbers). Reported per scenario:
mean and median restarts used (2 per block), the verdict rates, power (WIN under the effect),
type-I error (WIN or LOSS under no effect) and the size of the bare test (δ = 0: the interval
excludes 1) under no effect, which Pocock's bound must keep at or below 5%. Also the smallest
fixed plan with at least the adaptive plan's power: the comparison at equal error rates.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from diagnostic import stats  # noqa: E402
from diagnostic.analyse.compare import DEFAULT_LOOKS  # noqa: E402

FIXED_LEVEL = 0.95
VERDICTS = ("WIN", "LOSS", "EQUIVALENT", "INCONCLUSIVE")


@dataclass(frozen=True)
class Scenario:
    """What the simulated server does."""

    effect: float
    restart_cv: float
    request_cv: float = 0.10
    requests: int = 15
    drift_cv: float = 0.0

    def label(self) -> str:
        """Short description for the table."""
        return f"CV {self.restart_cv:.0%}, effect {self.effect:+.0%}"


@dataclass(frozen=True)
class Design:
    """How an experiment is decided: planned looks, interval method, noise band."""

    looks: tuple[int, ...] = DEFAULT_LOOKS
    method: str = "paired"
    delta: float = stats.DEFAULT_DELTA

    def name(self) -> str:
        """Looks as 3/5/8/12."""
        return "/".join(str(n) for n in self.looks)


def simulate(rng: np.random.Generator, sc: Scenario, blocks: int) -> tuple[np.ndarray, np.ndarray]:
    """Log restart summaries (spec, baseline) of `blocks` blocks: log of the mean request."""
    drift = rng.normal(0.0, sc.drift_cv, blocks) if sc.drift_cv else np.zeros(blocks)

    def arm(shift: float) -> np.ndarray:
        level = np.log(100.0) + shift + drift + rng.normal(0.0, sc.restart_cv, blocks)
        requests = np.exp(level[:, None] + rng.normal(0.0, sc.request_cv, (blocks, sc.requests)))
        return np.log(requests.mean(axis=1))

    base = arm(0.0)
    return arm(np.log1p(sc.effect)), base


@dataclass(frozen=True)
class Outcome:
    """Where a plan stopped and what it said."""

    blocks: int
    verdict: str


def ratio_ci(spec: np.ndarray, base: np.ndarray, level: float, method: str) -> stats.RatioCI:
    """The interval analyse forms for a blocked schedule (paired), or Welch to compare."""
    if method == "welch":
        return stats.welch_ratio_ci(spec, base, level)
    return stats.paired_ratio_ci(spec, base, level)


def adaptive(spec: np.ndarray, base: np.ndarray, design: Design, delta: float) -> Outcome:
    """Group-sequential plan: Pocock level at every planned look, stop once decided."""
    looks = design.looks
    level = 1.0 - stats.pocock_alpha(len(looks))
    for n in range(2, looks[-1] + 1):
        look = stats.look_number(n, looks)
        if look is None:
            continue
        ci = ratio_ci(spec[:n], base[:n], level, design.method)
        decision = stats.verdict(ci.low, ci.high, delta)
        if decision != "INCONCLUSIVE" or look == len(looks):
            return Outcome(n, decision)
    raise AssertionError("the last look always returns")


def fixed(spec: np.ndarray, base: np.ndarray, blocks: int, method: str, delta: float) -> Outcome:
    """Fixed plan: one 95% look after `blocks` blocks."""
    ci = ratio_ci(spec[:blocks], base[:blocks], FIXED_LEVEL, method)
    return Outcome(blocks, stats.verdict(ci.low, ci.high, delta))


@dataclass
class PlanResult:
    """Outcomes of one plan over every simulation of one scenario."""

    outcomes: list[Outcome]

    def restarts(self) -> list[int]:
        """Restarts used (two per block)."""
        return [2 * o.blocks for o in self.outcomes]

    def rate(self, *verdicts: str) -> float:
        """Share of simulations that ended in one of `verdicts`."""
        counts = Counter(o.verdict for o in self.outcomes)
        return sum(counts[v] for v in verdicts) / len(self.outcomes)


@dataclass
class ScenarioResult:
    """Both plans on one scenario, plus what the bare test (δ = 0) and shorter fixed plans do."""

    scenario: Scenario
    adaptive: PlanResult
    fixed: PlanResult
    adaptive_size: float
    fixed_size: float
    fixed_power_by_blocks: dict[int, float]


def run_scenario(sc: Scenario, sims: int, seed: int, design: Design) -> ScenarioResult:
    """Every simulation of one scenario, both plans on the same restarts."""
    rng = np.random.default_rng(seed)
    n_max, method, delta = design.looks[-1], design.method, design.delta
    ad, fx, ad0, fx0 = [], [], [], []
    by_blocks: dict[int, list[Outcome]] = {n: [] for n in range(2, n_max)}
    for _ in range(sims):
        spec, base = simulate(rng, sc, n_max)
        ad.append(adaptive(spec, base, design, delta))
        fx.append(fixed(spec, base, n_max, method, delta))
        if sc.effect == 0:
            ad0.append(adaptive(spec, base, design, 0.0))
            fx0.append(fixed(spec, base, n_max, method, 0.0))
        else:
            for n in by_blocks:
                by_blocks[n].append(fixed(spec, base, n, method, delta))
    power = {n: PlanResult(o).rate("WIN") for n, o in by_blocks.items() if o}
    if power:
        power[n_max] = PlanResult(fx).rate("WIN")
    nan = float("nan")
    return ScenarioResult(
        scenario=sc,
        adaptive=PlanResult(ad),
        fixed=PlanResult(fx),
        adaptive_size=PlanResult(ad0).rate("WIN", "LOSS") if ad0 else nan,
        fixed_size=PlanResult(fx0).rate("WIN", "LOSS") if fx0 else nan,
        fixed_power_by_blocks=power,
    )


def _mean_median(values: list[int]) -> str:
    return f"{statistics.fmean(values):.1f} ({statistics.median(values):g})"


def detail_table(results: list[ScenarioResult], design: Design) -> str:
    """Every scenario and plan: restarts used and how often each verdict came out."""
    lines = [
        "| scenario | plan | restarts mean (median) | WIN | LOSS | EQUIVALENT | INCONCLUSIVE |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    names = (f"fixed {design.looks[-1]} blocks", f"adaptive {design.name()}")
    for r in results:
        for name, plan in zip(names, (r.fixed, r.adaptive), strict=True):
            rates = " | ".join(f"{plan.rate(v):.1%}" for v in VERDICTS)
            lines.append(
                f"| {r.scenario.label()} | {name} | {_mean_median(plan.restarts())} | {rates} |"
            )
    return "\n".join(lines)


def _equal_power_blocks(effect: ScenarioResult) -> int | None:
    """Smallest fixed plan whose power reaches the adaptive plan's (None: none that short)."""
    target = effect.adaptive.rate("WIN")
    for n, power in sorted(effect.fixed_power_by_blocks.items()):
        if power >= target:
            return n
    return None


def summary_table(results: list[ScenarioResult], design: Design) -> str:
    """Per restart CV: restarts saved under the effect, power, type-I error and test size."""
    n_max = design.looks[-1]
    lines = [
        f"| restart CV | restarts, fixed {n_max} | restarts, adaptive {design.name()} | saved "
        "| power fixed / adaptive | type-I fixed / adaptive | size δ=0 fixed / adaptive "
        "| fixed plan with adaptive's power | saved vs it | restarts under no effect "
        "fixed / adaptive |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for cv in sorted({r.scenario.restart_cv for r in results}):
        eff = next(r for r in results if r.scenario.restart_cv == cv and r.scenario.effect)
        null = next(r for r in results if r.scenario.restart_cv == cv and not r.scenario.effect)
        f_mean = statistics.fmean(eff.fixed.restarts())
        a_mean = statistics.fmean(eff.adaptive.restarts())
        n_eq = _equal_power_blocks(eff)
        eq = f"{2 * n_eq} restarts" if n_eq else "none"
        saved_eq = f"{1 - a_mean / (2 * n_eq):+.0%}" if n_eq else "n/a"
        lines.append(
            f"| {cv:.0%} | {f_mean:.0f} | {_mean_median(eff.adaptive.restarts())} "
            f"| {1 - a_mean / f_mean:.0%} "
            f"| {eff.fixed.rate('WIN'):.1%} / {eff.adaptive.rate('WIN'):.1%} "
            f"| {null.fixed.rate('WIN', 'LOSS'):.1%} / {null.adaptive.rate('WIN', 'LOSS'):.1%} "
            f"| {null.fixed_size:.1%} / {null.adaptive_size:.1%} | {eq} | {saved_eq} "
            f"| {statistics.fmean(null.fixed.restarts()):.0f} / "
            f"{_mean_median(null.adaptive.restarts())} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    """Simulate every scenario and print the two tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sims", type=int, default=4000, help="simulations per scenario")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--effect", type=float, default=0.10, help="true speedup, 0.10 = 10%%")
    parser.add_argument("--restart-cv", type=float, nargs="+", default=[0.05, 0.10])
    parser.add_argument("--request-cv", type=float, default=0.10, help="within-restart CV")
    parser.add_argument("--requests", type=int, default=15, help="measured requests/restart")
    parser.add_argument("--drift-cv", type=float, default=0.0, help="drift shared by a block")
    parser.add_argument("--delta", type=float, default=stats.DEFAULT_DELTA, help="noise band δ")
    parser.add_argument("--looks", type=int, nargs="+", default=list(DEFAULT_LOOKS))
    parser.add_argument("--method", choices=("paired", "welch"), default="paired")
    args = parser.parse_args(argv)
    design = Design(tuple(sorted(args.looks)), args.method, args.delta)
    start = time.perf_counter()
    results = []
    for i, cv in enumerate(args.restart_cv):
        for j, effect in enumerate((args.effect, 0.0)):
            sc = Scenario(effect, cv, args.request_cv, args.requests, args.drift_cv)
            seed = args.seed * 1000 + 10 * i + j  # one stream per scenario: order-independent
            results.append(run_scenario(sc, args.sims, seed, design))
    print(summary_table(results, design))
    print()
    print(detail_table(results, design))
    print(
        f"\n{args.sims} simulations per scenario, seed {args.seed}, {design.method} intervals, "
        f"looks {list(design.looks)} at level {1 - stats.pocock_alpha(len(design.looks)):.4f}, "
        f"δ = {design.delta:g}, {args.requests} requests/restart at CV {args.request_cv:.0%}, "
        f"block drift CV {args.drift_cv:.0%}; {time.perf_counter() - start:.0f} s"
    )


if __name__ == "__main__":
    main()
