"""Benchmark: coverage of the simultaneous intervals when the arms' restart noise differs.

Usage::

    python benchmarks/family_coverage.py [--families 300] [--arms 7] [--blocks 5]
        [--cv 0.10] [--alpha 0.05] [--seed 0]

Issue 29 item 1 asks that the many-to-one max-|t| intervals with restart noise moderated
across arms (`analyse.family.simultaneous_intervals`) hold when the arms' noise differs, 2×
between arms. Each simulated family: `arms` speculative arms and one baseline, `blocks`
blocks; a restart's log level is its arm's true log ratio plus normal noise of its arm's SD
(the baseline's restarts are shared by every comparison of a block, which is what makes the
comparisons correlated); a comparison's block difference is arm − baseline. Conditions:
- equal: every arm and the baseline at `cv`;
- half 2×: half the speculative arms at 2·cv;
- half 2×, baseline ½: as above with the baseline at cv/2 (the correlation falls);
- one arm 2×: one speculative arm at 2·cv;
- baseline 2×: the baseline at 2·cv (the correlation rises).
Joint coverage: every interval of the family covers its true difference (target 1 − α);
marginal: the mean over comparisons of each interval covering its own, against the mean
level each interval states (`FamilyInterval.level`).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from diagnostic.analyse.family import simultaneous_intervals

CONDITIONS = {
    "equal": lambda arms: ([1.0] * arms, 1.0),
    "half 2×": lambda arms: ([2.0 if i < arms // 2 else 1.0 for i in range(arms)], 1.0),
    "half 2×, baseline ½": lambda arms: ([2.0 if i < arms // 2 else 1.0 for i in range(arms)], 0.5),
    "one arm 2×": lambda arms: ([2.0] + [1.0] * (arms - 1), 1.0),
    "baseline 2×": lambda arms: ([1.0] * arms, 2.0),
}


def run(name: str, args: argparse.Namespace) -> tuple[float, float, float]:
    """(joint coverage, marginal coverage, mean stated level) of one condition."""
    scales, base_scale = CONDITIONS[name](args.arms)
    rng = np.random.default_rng([args.seed, len(name)])
    truth = np.log(rng.uniform(0.8, 1.3, args.arms))  # fixed per condition: any ratios
    joint = marginal = level = 0.0
    for _ in range(args.families):
        base = rng.normal(0.0, args.cv * base_scale, args.blocks)
        arms = truth[:, None] + rng.normal(0.0, 1.0, (args.arms, args.blocks)) * (
            args.cv * np.asarray(scales)[:, None]
        )
        diffs = [dict(enumerate(arm - base)) for arm in arms]
        out = simultaneous_intervals(diffs, args.alpha)
        covers = [i.low <= t <= i.high for i, t in zip(out, truth, strict=True)]
        joint += all(covers)
        marginal += float(np.mean(covers))
        level += float(np.mean([i.level for i in out]))
    n = args.families
    return joint / n, marginal / n, level / n


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--families", type=int, default=300)
    p.add_argument("--arms", type=int, default=7)
    p.add_argument("--blocks", type=int, default=5)
    p.add_argument("--cv", type=float, default=0.10)
    p.add_argument("--alpha", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    began = time.perf_counter()
    print(f"{args.arms} arms, {args.blocks} blocks, restart CV {args.cv:.0%}, "
          f"{args.families} families per condition, target {1 - args.alpha:.0%} joint")  # fmt: skip
    print("\n| condition | joint coverage | marginal coverage | mean stated level |")
    print("|---|---|---|---|")
    for name in CONDITIONS:
        joint, marginal, level = run(name, args)
        print(f"| {name} | {joint:.1%} | {marginal:.1%} | {level:.1%} |")
    print(f"\n{time.perf_counter() - began:.0f} s")


if __name__ == "__main__":
    main()
