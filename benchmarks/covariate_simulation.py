"""Benchmark: power and error of the covariate adjustment (issue 45), and its balance check.

Usage::

    python benchmarks/covariate_simulation.py [--sims 1000] [--seed 0] [--blocks 5 8]
        [--arms 1 7] [--cv 0.10] [--explained 0.6] [--reliability 1.0 0.5]
        [--moved 0.5 1 2] [--moved-arms 1] [--balance-alpha 0.10]
    python benchmarks/covariate_simulation.py --bundle BUNDLE [--column steal_pct]

Through the package's own decision code: each simulated experiment's restart means become
`Side`s (one sample per restart whose decode tok/s is the restart mean), compared by
`start_comparison` and decided by `decide` (the simultaneous intervals of the family, as
`analyse` does), once on the raw means and once on the means adjusted by
`covariate.arm_shifts`; the balance check is `covariate.balance_test` on blocks with
`covariate.failing`'s Bonferroni rule. Nothing of the statistics is re-implemented here.

The truth. A blocked experiment: each block starts the baseline and every speculative arm
once. A run's log restart mean is log(100) + the arm's log ratio + a block drift (shared by
the block's runs, SD `--drift`) + beta x its VM steal + the rest. Steal is drawn per run
(standard normal); beta is set so that steal explains `--explained` of the restart variance
(restart CV `--cv`). The covariate is a measurement of that steal with reliability
`--reliability` (1: the run's own steal; 0.5: a quiet window whose correlation with it is
0.71). "Moved": every speculative arm really gets `--moved` SD more steal (its busier server
draws it) and the covariate shows it; its measured ratio (the truth here, what the client
gets) includes the slowdown, and an adjustment would take it away.

Read from each decided comparison: a false decision is a WIN or LOSS at a true ratio of 1, or
a LOSS or EQUIVALENT at +10%; power is WIN at +10%; coverage is the deciding interval holding
the true ratio. The "tool" columns use the adjusted verdict when the balance check passes and
the raw one when it fails (what `analyse` reports); "forced" adjusts whatever the check says.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

from diagnostic.analyse.compare import Side, decide, start_comparison  # noqa: E402
from diagnostic.analyse.context import build_context  # noqa: E402
from diagnostic.analyse.covariate import (  # noqa: E402
    BALANCE_ALPHA,
    adjust_by_covariate,
    arm_shifts,
    balance_test,
    failing,
    run_covariate,
    telemetry_covariate,
)
from diagnostic.analyse.requests import Sample  # noqa: E402
from diagnostic.bundle.store import Bundle  # noqa: E402
from diagnostic.schema.bundle import Design  # noqa: E402
from diagnostic.schema.covariate import CovariateBalance  # noqa: E402

MARGIN = 0.02
BASE = "base"


@dataclass(frozen=True)
class Condition:
    blocks: int
    arms: int  # speculative arms in the family
    effect: float  # true ratio − 1 of every speculative arm (what the client gets)
    reliability: float
    moved: float  # SD of steal a speculative arm adds to its own runs
    alpha: float  # family-wise level of the balance check


@dataclass
class Tally:
    n: int = 0
    false: int = 0
    win: int = 0
    covered: int = 0
    width: float = 0.0

    def add(self, verdict: str, low: float, high: float, truth: float) -> None:
        self.n += 1
        null = truth == 1.0
        self.false += verdict in (("WIN", "LOSS") if null else ("LOSS", "EQUIVALENT"))
        self.win += verdict == "WIN"
        self.covered += low <= truth <= high
        self.width += math.log(high / low)

    def rate(self, k: int) -> float:
        return k / self.n if self.n else float("nan")


def _side(name: str, logs: Sequence[float], shift: dict[int, float] | None = None) -> Side:
    groups = {
        b: [
            Sample(
                arm=name,
                restart=b,
                block=b,
                workload="code",
                concurrency=1,
                seq=0,
                t_send=0.0,
                prompt_id="p",
                decode_tps=math.exp(y),
                ttft_s=None,
                e2e_s=None,
                tokens_per_chunk=1.0,
            )
        ]
        for b, y in enumerate(logs)
    }
    return Side(name, groups, shift=shift or {})


def _decide(logs: dict[str, list[float]], shifts: dict[str, dict[int, float]]) -> list:
    base = _side(BASE, logs[BASE], shifts.get(BASE))
    pending = [
        start_comparison(
            _side(arm, y, shifts.get(arm)), base, "code", 1, kind="spec", k=None, blocked=True
        )
        for arm, y in logs.items()
        if arm != BASE
    ]
    return decide(pending, delta=MARGIN, design=Design())


def simulate(c: Condition, sims: int, cv: float, explained: float, drift: float, seed: int):
    rng = np.random.default_rng(seed)
    beta = -cv * math.sqrt(explained)
    rest = cv * math.sqrt(1 - explained)
    arms = [BASE] + [f"spec{i}" for i in range(1, c.arms + 1)]
    tallies = {k: Tally() for k in ("raw", "tool", "forced")}
    withheld = 0
    sd_raw = sd_adj = 0.0
    for _ in range(sims):
        d = rng.normal(0, drift, c.blocks)
        logs, points = {}, {}
        for arm in arms:
            spec = arm != BASE
            steal = rng.normal(0, 1, c.blocks) + (c.moved if spec else 0.0)
            measured = math.sqrt(c.reliability) * steal + math.sqrt(1 - c.reliability) * rng.normal(
                0, 1, c.blocks
            )
            # the client's ratio includes what the moved steal costs: the direct effect is less
            direct = math.log1p(c.effect) - beta * c.moved if spec else 0.0
            y = math.log(100) + direct + d + beta * steal + rng.normal(0, rest, c.blocks)
            logs[arm] = list(y)
            points[arm] = {b: (y[b], measured[b]) for b in range(c.blocks)}
        found = arm_shifts(points)
        shifts = found[1] if found else {}
        if found:
            sd_raw += found[0].sd_raw
            sd_adj += found[0].sd_adjusted
        balance = []
        for arm in arms[1:]:
            diff, p, n = balance_test(
                {b: x for b, (_, x) in points[arm].items()},
                {b: x for b, (_, x) in points[BASE].items()},
                paired=True,
            )
            balance.append(
                CovariateBalance(
                    arm=arm,
                    reference=BASE,
                    difference=diff,
                    p_value=p,
                    method="paired-blocks",
                    runs=n,
                )
            )
        failed, _ = failing(balance, c.alpha)
        withheld += bool(failed)
        raw = _decide(logs, {})
        adjusted = _decide(logs, shifts)
        gains = found is not None and found[0].sd_adjusted < found[0].sd_raw
        tool = adjusted if gains and not failed else raw
        truth = 1.0 + c.effect
        for name, result in (("raw", raw), ("tool", tool), ("forced", adjusted)):
            for comp in result:
                tallies[name].add(comp.verdict, comp.ci_low, comp.ci_high, truth)
    return tallies, withheld / sims, sd_raw / sims, sd_adj / sims


def measure(path: Path, column: str | None) -> None:
    """A recorded bundle: the restart-mean SD before and after, the balance check, and each
    comparison raw and adjusted, through analyse's own adjust_by_covariate."""
    bundle = Bundle.open(path)
    ctx = build_context(bundle)
    cov = telemetry_covariate(bundle, ctx.loaded.runs, column) if column else None
    cov = cov if column else run_covariate(ctx.loaded.runs)
    if cov is None:
        print(f"{path}: no covariate ({column or 'quiet windows'}) in every run")
        return
    plan = bundle.manifest.plan
    _, found = adjust_by_covariate(ctx, delta=plan.margin, design=plan.design, covariate=cov)
    assert found is not None
    print(f"{path}: {found.description} ({found.covariate}); arm-free: {found.arm_free}\n")
    print("| workload | restarts | slope | restart-mean SD raw | adjusted |")
    print("|---|---|---|---|---|")
    for sl in found.slopes:
        print(
            f"| {sl.workload} | {sl.restarts} | {sl.slope:.4g} | {sl.sd_raw:.1%} | "
            f"{sl.sd_adjusted:.1%} |"
        )
    print("\n| arm | reference | difference | p | method |\n|---|---|---|---|---|")
    for b in found.balance:
        print(f"| {b.arm} | {b.reference} | {b.difference:.3g} | {b.p_value} | {b.method} |")
    print(f"\nbalanced: {found.balanced}; applied: {found.applied}: {found.why}\n")
    print("| comparison | raw | adjusted |\n|---|---|---|")
    for e in found.estimates:
        print(
            f"| {e.arm} vs {e.baseline}, {e.workload} | {e.raw_ratio:.3f} "
            f"[{e.raw_low:.3f}, {e.raw_high:.3f}] {e.raw_verdict} | {e.adjusted_ratio:.3f} "
            f"[{e.adjusted_low:.3f}, {e.adjusted_high:.3f}] {e.adjusted_verdict} |"
        )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sims", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--blocks", type=int, nargs="+", default=[5, 8])
    parser.add_argument("--arms", type=int, nargs="+", default=[1, 7])
    parser.add_argument("--cv", type=float, default=0.10)
    parser.add_argument("--explained", type=float, default=0.6)
    parser.add_argument("--drift", type=float, default=0.01)
    parser.add_argument("--reliability", type=float, nargs="+", default=[1.0, 0.5])
    parser.add_argument("--moved", type=float, nargs="*", default=[0.5, 1.0, 2.0])
    parser.add_argument("--balance-alpha", type=float, nargs="+", default=[BALANCE_ALPHA])
    parser.add_argument("--moved-arms", type=int, nargs="*", default=[1])
    parser.add_argument(
        "--bundle",
        type=Path,
        help="instead: measure a recorded bundle, its runs' quiet windows (the pre-declared "
        "covariate) or, with --column, a host telemetry column during the runs",
    )
    parser.add_argument("--column", help="host telemetry column, e.g. steal_pct (a study)")
    o = parser.parse_args(argv)
    if o.bundle is not None:
        measure(o.bundle, o.column)
        return
    conditions = [
        Condition(b, k, e, r, 0.0, a)
        for k in o.arms
        for b in o.blocks
        for r in o.reliability
        for a in o.balance_alpha
        for e in (0.0, 0.10)
    ]
    conditions += [
        Condition(b, k, e, 1.0, m, a)
        for k in o.moved_arms
        for b in o.blocks
        for m in o.moved
        for a in o.balance_alpha
        for e in (0.0, 0.10)
    ]
    started = time.time()
    print(
        f"restart CV {o.cv:.0%}, steal explains {o.explained:.0%} of its variance, block drift "
        f"{o.drift:.0%}, margin {MARGIN:.0%}; {o.sims} simulations per row, seed {o.seed}; "
        f"load average {os.getloadavg()[0]:.1f}\n"
    )
    print(
        "| arms | blocks | covariate | moved (SD) | check level | true ratio | "
        "SD raw → adjusted | check withheld | raw: false / power / cover | "
        "tool: false / power / cover | forced: false / power / cover | width adj/raw |"
    )
    print("|---" * 12 + "|")
    for i, c in enumerate(conditions):
        t, withheld, sd_raw, sd_adj = simulate(c, o.sims, o.cv, o.explained, o.drift, o.seed + i)
        cells = []
        for name in ("raw", "tool", "forced"):
            x = t[name]
            power = f"{x.rate(x.win):.1%}" if c.effect else "–"
            cells.append(f"{x.rate(x.false):.1%} / {power} / {x.rate(x.covered):.1%}")
        width = (t["tool"].width / t["tool"].n) / (t["raw"].width / t["raw"].n)
        cov = "run's steal" if c.reliability == 1 else f"reliability {c.reliability:g}"
        print(
            f"| {c.arms + 1} | {c.blocks} | {cov} | {c.moved:g} | {c.alpha:.0%} | "
            f"{1 + c.effect:.2f} | "
            f"{sd_raw:.1%} → {sd_adj:.1%} | {withheld:.1%} | "
            + " | ".join(cells)
            + f" | {width:.2f} |",
            flush=True,
        )
    print(f"\n{time.time() - started:.0f} s")


if __name__ == "__main__":
    main()
