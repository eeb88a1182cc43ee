"""The before-and-after the client pays for: the configuration as found (the plan's `as_found`
arm) against the configuration the report recommends after the remedies, per workload and
concurrency level, from the same restarts, paired by block where the schedule allows.

What is recommended is one rule (`recommended`), used here and by the report's pages: the WIN
at the sweep's best k, else the WIN with the highest lower bound (against the plan's baseline
when any WIN is); without a WIN, speculation switched off when the configuration as found
speculates and is a LOSS, else the configuration as found itself."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from diagnostic.analyse.compare import Pending, Side, start_comparison
from diagnostic.schema.analysis import ALL_WORKLOADS, Analysis, Comparison

__all__ = ["after_arm", "pending", "recommended"]

SideOf = Callable[[str, str, int], Side]  # (arm, workload, level) → its restarts


def _spec(a: Analysis, workload: str, level: int) -> list[Comparison]:
    return [
        c
        for c in a.comparisons
        if c.kind == "spec" and c.matched and c.workload == workload and c.concurrency == level
    ]


def _best_k(a: Analysis, workload: str, level: int) -> int | None:
    if a.sweep is None:
        return None
    return next(
        (s.best_k for s in a.sweep.workloads if s.workload == workload and s.concurrency == level),
        None,
    )


def recommended(a: Analysis, workload: str, level: int) -> Comparison | None:
    """The speculative configuration to serve a workload with: the sweep's best k among WINs
    when the sweep names one, else the WIN with the highest lower bound; None without a WIN.
    A speedup over another matched baseline (an eager one, say) counts only when no WIN is
    against the plan's baseline: it can be large and still slower in tokens per second."""
    wins = [c for c in _spec(a, workload, level) if c.verdict == "WIN" and not c.withheld]
    wins = [c for c in wins if c.baseline == a.baseline] or wins
    best_k = _best_k(a, workload, level)
    at_k = [c for c in wins if best_k and c.k == best_k]
    if at_k:
        return at_k[0]
    return max(wins, key=lambda c: c.ci_low or 0.0, default=None)


def after_arm(a: Analysis, as_found: str, workload: str, level: int) -> str:
    """The arm the client should serve after the fix: the recommended WIN; else, when the
    configuration as found speculates and loses to its own baseline, that baseline
    (speculation off); else the configuration as found."""
    best = recommended(a, workload, level)
    if best is not None:
        return best.arm
    own = next((c for c in _spec(a, workload, level) if c.arm == as_found), None)
    if own is not None and not own.withheld and own.verdict == "LOSS":
        return own.baseline
    return as_found


def pending(
    a: Analysis, as_found: str, side: SideOf, keys: Sequence[str], blocked: bool
) -> list[Pending]:
    """One comparison per workload key and level whose after differs from as found: after
    against as found (the pooled row only when every workload has the same after)."""
    out = []
    for level in a.concurrency_levels:
        named = [w for w in keys if w != ALL_WORKLOADS]
        afters = {w: after_arm(a, as_found, w, level) for w in named}
        if ALL_WORKLOADS in keys and len(set(afters.values())) == 1:
            afters[ALL_WORKLOADS] = next(iter(afters.values()))
        for w, after in afters.items():
            if after == as_found:
                continue
            arm, base = side(after, w, level), side(as_found, w, level)
            if arm.groups and base.groups:
                out.append(
                    start_comparison(arm, base, w, level, kind="after", k=None, blocked=blocked)
                )
    return out
