"""Benchmark: power and false decisions of the verdicts in a day on site, fixed and adaptive.

Usage::

    python benchmarks/verdict_power.py [--sims 100] [--null-sims 200] [--seed 0]
        [--cv 0.05 0.10 0.20] [--arms 4 8] [--effects 0.05 0.10 0.20]
        [--startup-s 300] [--request-s 3] [--requests 15] [--request-cv 0.05]
        [--json out.json]

The decision path is the package's own after loading a bundle: restarts' requests become
`Sample`s grouped into `Side`s, every comparison goes through `compare.start_comparison` and
one `compare.decide` over the family, exactly as `analyse` calls them (the same script runs
against an older checkout for the "before" column: it uses only names both have).

The truth. Arms: the baseline, its A/A repeat and arms − 2 speculative arms, every one with
the same true speedup (1 + effect; effect 0: the null). Blocks start every arm once. A restart's
level is base × speedup × a lognormal restart effect of CV `cv` × a block drift (random walk,
CV 1% a block, shared by the block's arms); its `requests` measured requests scatter around
it (lognormal, `request_cv`).

The day. One start costs `startup_s` + (1 + requests)·`request_s` (warm-up included); a day
on site (defaults.DAY_ON_SITE_S, 6 h) holds B = floor(day / (arms × start)) blocks.
- fixed: B blocks, decided once; the A/A arm checks the design (not pooled);
- adaptive (`sweep --adaptive`): looks at planned_looks(B), the A/A repeat pooled into the
  reference, the plan's target +10% for futility; at each look an arm whose comparison can
  stop (decided, futile or the last look) gets no more blocks.

Read per bundle: power = the share of speculative comparisons called WIN when effect > 0;
false decisions = bundles with any WIN or LOSS among the speculative comparisons when the
effect is 0 (family-wise).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from diagnostic import defaults  # noqa: E402
from diagnostic.analyse.compare import Side, decide, start_comparison  # noqa: E402
from diagnostic.analyse.requests import Sample  # noqa: E402
from diagnostic.schema.bundle import Design  # noqa: E402

try:  # the group-sequential looks moved out of stats (issue 29)
    from diagnostic.analyse.sequential import planned_looks
except ImportError:  # an older checkout, for the "before" column
    from diagnostic.analyse.stats import planned_looks  # type: ignore[attr-defined,no-redef]

REPEAT = 1_000_000  # restart keys of the pooled A/A repeat (as analyse keys them)
DRIFT_CV = 0.01


def day_blocks(arms: int, startup_s: float, request_s: float, requests: int) -> int:
    start = startup_s + (1 + requests) * request_s
    return int(defaults.DAY_ON_SITE_S // (arms * start))


def _samples(arm: str, block: int, tps: np.ndarray) -> list[Sample]:
    return [
        Sample(arm, block, block, "code", 1, j, float(j), f"p{j}", float(v), 0.02, 1.0, 1.0)
        for j, v in enumerate(tps)
    ]


def simulate(
    rng: np.random.Generator, arms: int, blocks: int, cv: float, effect: float, args: object
) -> dict[str, dict[int, list[Sample]]]:
    """Every arm's restarts (block = restart) over `blocks` blocks."""
    names = ["base", "base-aa"] + [f"k{i}" for i in range(1, arms - 1)]
    drift = np.cumsum(rng.normal(0, DRIFT_CV, blocks))
    out: dict[str, dict[int, list[Sample]]] = {n: {} for n in names}
    for b in range(blocks):
        for n in names:
            ratio = 1.0 if n.startswith("base") else 1.0 + effect
            level = 100.0 * ratio * math.exp(drift[b] + rng.normal(0, cv))
            tps = level * np.exp(rng.normal(0, args.request_cv, args.requests))  # type: ignore[attr-defined]
            out[n][b] = _samples(n, b, tps)
    return out


def _decide(data: dict[str, dict[int, list[Sample]]], design: Design, upto: dict[str, int]):  # type: ignore[no-untyped-def]
    """The spec comparisons, each arm's restarts cut at its own block count."""
    base = {r: g for r, g in data["base"].items() if r < upto["base"]}
    aa = {r: g for r, g in data["base-aa"].items() if r < upto["base-aa"]}
    ref = (
        Side("base", base | {REPEAT + r: g for r, g in aa.items()}, {"base-aa": len(aa)})
        if design.pool_aa
        else Side("base", base)
    )
    pending = [
        start_comparison(
            Side(n, {r: g for r, g in groups.items() if r < upto[n]}),
            ref,
            "code",
            1,
            kind="spec",
            k=None,
            blocked=True,
        )
        for n, groups in data.items()
        if not n.startswith("base")
    ]
    return decide(pending, delta=defaults.MARGIN, design=design)


def run_fixed(data, blocks: int):  # type: ignore[no-untyped-def]
    return _decide(data, Design(), dict.fromkeys(data, blocks))


def cell(args: argparse.Namespace, arms: int, cv: float, effect: float, design: str) -> dict:
    blocks = day_blocks(arms, args.startup_s, args.request_s, args.requests)
    rng = np.random.default_rng([args.seed, arms, round(cv * 1000), round(effect * 1000)])
    sims = args.null_sims if effect == 0 else args.sims
    wins = total = false = 0
    used = []
    for _ in range(sims):
        data = simulate(rng, arms, blocks, cv, effect, args)
        out = run_fixed(data, blocks) if design == "fixed" else run_adaptive(data, blocks)
        verdicts = [c.verdict for c in out if not getattr(c, "withheld", False)]
        wins += sum(v == "WIN" for v in verdicts)
        total += len(out)
        false += effect == 0 and any(v in ("WIN", "LOSS") for v in verdicts)
        used.append(max(c.n_restarts_arm for c in out))
    return {
        "arms": arms,
        "cv": cv,
        "effect": effect,
        "design": design,
        "blocks": blocks,
        "sims": sims,
        "power": wins / total if effect else None,
        "false_decisions": false / sims if effect == 0 else None,
        "mean_blocks": float(np.mean(used)),
    }


def run_adaptive(data, blocks: int):  # type: ignore[no-untyped-def]
    """Per-arm stopping at the planned looks (the sweep's rule), block counts kept plainly."""
    looks = planned_looks(blocks)
    design = Design(kind="adaptive", looks=looks, pool_aa=True, target=defaults.TARGET)
    stopped: dict[str, int] = {}
    out = []
    for look in looks:
        upto = {n: stopped.get(n, look) for n in data}
        if len(stopped) == len([n for n in data if not n.startswith("base")]):
            break
        out = _decide(data, design, upto)
        for c in out:
            if c.arm not in stopped and c.stopping and c.stopping.can_stop:
                stopped[c.arm] = look
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sims", type=int, default=100)
    parser.add_argument("--null-sims", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cv", type=float, nargs="+", default=[0.05, 0.10, 0.20])
    parser.add_argument("--arms", type=int, nargs="+", default=[4, 8])
    parser.add_argument("--effects", type=float, nargs="+", default=[0.05, 0.10, 0.20])
    parser.add_argument("--designs", nargs="+", default=["fixed", "adaptive"])
    parser.add_argument("--startup-s", type=float, default=300.0)
    parser.add_argument("--request-s", type=float, default=3.0)
    parser.add_argument("--requests", type=int, default=15)
    parser.add_argument("--request-cv", type=float, default=0.05)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    t0 = time.monotonic()
    rows = []
    effects = " | ".join(f"power {e:+.0%}" for e in args.effects)
    print(f"| arms | blocks | restart CV | design | {effects} | false decisions |")
    print("|---|---|---|---|" + "---|" * len(args.effects) + "---|")
    for arms in args.arms:
        for cv in args.cv:
            for design in args.designs:
                got = [cell(args, arms, cv, e, design) for e in [0.0, *args.effects]]
                rows += got
                power = " | ".join(f"{g['power']:.0%}" for g in got[1:])
                print(
                    f"| {arms} | {got[0]['blocks']} | {cv:.0%} | {design} | {power} | "
                    f"{got[0]['false_decisions']:.1%} |",
                    flush=True,
                )
    print(f"\n{time.monotonic() - t0:.0f} s")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
