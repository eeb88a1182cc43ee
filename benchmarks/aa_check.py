"""Benchmark: how often the A/A check fails on every recorded bundle, and why.

Usage::

    python benchmarks/aa_check.py [BUNDLE ...]   # default: every samples/* with an A/A arm

Issue 45 item 4. For each bundle whose plan has an A/A arm (`aa_of`), through the package's
own analysis (diagnostic.analyse.core.analyse) and its context (build_context):

1. The checks: each A/A comparison per workload and level (the derived 'all' row left out),
   its ratio and the interval the check reads (NoiseBand.aa_check), and whether it excludes 1.
   The failures are counted against what the check's level allows: each interval at 95% alone
   misses 5% of the time with no drift, so a bundle with k workloads fails the check (any
   interval excluding 1) with probability 1 − 0.95^k under independence.
2. Where each block ran the repeat: the order of the arms in the block (run.json started_at),
   whether the repeat ran before or after the arm it repeats, what ran just before it, and
   the block's log ratio repeat/original per workload. A systematic cause would show as a
   sign that follows the position (e.g. the second start of the configuration always slower).
3. What the tool does differently for the repeat: the launch command, environment and
   variables of the two arms, compared token by token.

Host telemetry is not read here: only one bundle with an A/A arm recorded it
(vllm-h200-gemma3-noise), and issue 45 item 2 studies it.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from diagnostic.analyse.context import build_context  # noqa: E402
from diagnostic.analyse.core import analyse  # noqa: E402
from diagnostic.bundle.store import Bundle  # noqa: E402

ALL = "all"


def bundles(argv: Sequence[str]) -> list[Path]:
    """The bundles named, else every sample whose plan has an A/A arm."""
    paths = [Path(a) for a in argv] or sorted((ROOT / "samples").iterdir())
    out = []
    for p in paths:
        if (p / "manifest.json").is_file():
            plan = Bundle.open(p).manifest.plan
            if any(a.aa_of for a in plan.arms):
                out.append(p)
    return out


def checks(path: Path) -> list[str]:
    """Table rows of the bundle's A/A checks: (bundle, pair, workload, ratio, interval, verdict
    of the check, blocks)."""
    a = analyse(Bundle.open(path))
    rows = []
    for c in a.comparisons:
        if c.kind != "aa" or c.workload == ALL or not c.checks_design:
            continue
        fails = not (c.ci_low <= 1.0 <= c.ci_high)  # type: ignore[operator]
        rows.append(
            f"| {path.name} | {c.arm} / {c.baseline} | {c.workload} | {c.ratio:.3f} | "
            f"{c.ci_low:.3f}–{c.ci_high:.3f} | {'fails' if fails else 'holds'} | "
            f"{c.n_restarts_arm} |"
        )
    return rows


def blocks(path: Path) -> list[tuple[str, str, str, float | None]]:
    """(bundle, position, run before, log ratio per workload 'code=…') per block of each A/A
    pair: position 'after' when the repeat started after the arm it repeats."""
    bundle = Bundle.open(path)
    ctx = build_context(bundle)
    runs = ctx.loaded.runs
    order: dict[int, list[tuple[str, str]]] = {}
    for r in runs:
        if r.block is not None:
            order.setdefault(r.block, []).append((r.started_at, r.arm))
    out = []
    for aa in [s for s in bundle.manifest.plan.arms if s.aa_of]:
        orig = aa.aa_of or ""
        logs = {
            w: (ctx.side(aa.name, w, 1).block_logs(), ctx.side(orig, w, 1).block_logs())
            for w in ctx.workloads
        }
        for b, seq in sorted(order.items()):
            names = [arm for _, arm in sorted(seq)]
            if aa.name not in names or orig not in names:
                continue
            i, j = names.index(aa.name), names.index(orig)
            before = names[i - 1] if i > 0 else "(none: first of the block)"
            ratios = " ".join(
                f"{w}={100 * (math.exp(x[b] - y[b]) - 1):+.1f}%"
                for w, (x, y) in logs.items()
                if b in x and b in y
            )
            out.append((path.name, b, "after" if i > j else "before", before, ratios, names))
    return out  # type: ignore[return-value]


def positions(path: Path) -> list[tuple[int, float]]:
    """(position in its block, residual) of every run on every workload: the log restart mean
    less its arm's and its block's means (two-way, blocks where every arm ran)."""
    import numpy as np

    bundle = Bundle.open(path)
    ctx = build_context(bundle)
    order: dict[int, list[tuple[str, str]]] = {}
    for r in ctx.loaded.runs:
        if r.block is not None:
            order.setdefault(r.block, []).append((r.started_at, r.arm))
    out = []
    for w in ctx.workloads:
        logs = {a: ctx.side(a, w, 1).block_logs() for a in ctx.arms}
        full = [b for b in sorted(order) if all(b in logs[a] for a in ctx.arms)]
        if len(full) < 2:
            continue
        y = np.array([[logs[a][b] for b in full] for a in ctx.arms])
        resid = y - y.mean(axis=1, keepdims=True) - y.mean(axis=0) + y.mean()
        for j, b in enumerate(full):
            names = [arm for _, arm in sorted(order[b])]
            for i, a in enumerate(ctx.arms):
                out.append((names.index(a), float(resid[i, j])))
    return out


def launch_differences(path: Path) -> list[str]:
    """What differs between the repeat's launch and its original's, in the plan."""
    plan = Bundle.open(path).manifest.plan
    specs = {a.name: a for a in plan.arms}
    out = []
    for aa in [a for a in plan.arms if a.aa_of]:
        orig = specs[aa.aa_of or ""]
        diffs = []
        for field in ("launch", "env", "stop", "health", "logs"):
            x, y = getattr(aa, field, None), getattr(orig, field, None)
            if x != y:
                diffs.append(f"{field}: {y!r} → {x!r}")
        out.append(f"{path.name}: {aa.name} vs {orig.name}: " + ("; ".join(diffs) or "identical"))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    paths = bundles(sys.argv[1:] if argv is None else argv)
    print("## The checks (each A/A interval at 95% alone; the 'all' row left out)\n")
    print("| bundle | pair | workload | ratio | interval | check | restarts |")
    print("|---|---|---|---:|---|---|---:|")
    rows = [r for p in paths for r in checks(p)]
    print("\n".join(rows))
    fails = sum("| fails |" in r for r in rows)
    per_bundle = {p.name: sum(p.name in r for r in rows) for p in paths}
    expected_bundles = sum(1 - 0.95**k for k in per_bundle.values())
    failed_bundles = len({r.split(" | ")[0] for r in rows if "| fails |" in r})
    print(
        f"\n{fails} of {len(rows)} intervals exclude 1 (5% each allowed: {0.05 * len(rows):.1f} "
        f"expected); {failed_bundles} of {len(paths)} bundles fail the check (any interval: "
        f"{expected_bundles:.2f} expected at 1 − 0.95^k with k workloads each)."
    )
    print("\n## Where the repeat ran, block by block (repeat / original − 1)\n")
    print("| bundle | block | repeat ran | run just before it | per workload | order |")
    print("|---|---:|---|---|---|---|")
    for name, b, pos, before, ratios, names in [x for p in paths for x in blocks(p)]:  # type: ignore[misc]
        print(f"| {name} | {b} | {pos} | {before} | {ratios} | {' → '.join(names)} |")
    print("\n## Every run's position in its block (residual of its log mean, two-way)\n")
    print("| bundle | first of its block | later | difference (first − later) | Welch p |")
    print("|---|---:|---:|---:|---:|")
    from scipy import stats as sps

    for p in paths:
        pos = positions(p)
        first = [r for i, r in pos if i == 0]
        later = [r for i, r in pos if i > 0]
        if len(first) < 2:
            continue
        test = sps.ttest_ind(first, later, equal_var=False)
        gap = sum(first) / len(first) - sum(later) / len(later)
        print(
            f"| {p.name} | {len(first)} runs | {len(later)} runs | "
            f"{100 * (math.exp(gap) - 1):+.1f}% | {test.pvalue:.2f} |"
        )
    print("\n## What the plan launches differently for the repeat\n")
    for line in [x for p in paths for x in launch_differences(p)]:
        print(f"- {line}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
