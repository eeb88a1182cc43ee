"""Which numbers of an Analysis a report shows: workloads, levels, arms and best comparisons."""

from __future__ import annotations

from diagnostic.analyse.before_after import recommended
from diagnostic.schema.analysis import ALL_WORKLOADS, Analysis, ArmResult, ArmWorkload, Comparison

__all__ = [
    "aa_failures",
    "aa_text",
    "arm_by_id",
    "arm_workload",
    "best_comparison",
    "comparison",
    "denied",
    "headline_arm",
    "lead_comparison",
    "levels",
    "low_level",
    "ordered_arms",
    "spec_comparisons",
    "workloads",
]


def aa_failures(a: Analysis) -> list[Comparison]:
    """The A/A comparisons whose interval excludes 1: why the design check failed (the noise
    band's interval is the widest A/A one, which may well contain 1)."""
    return [
        c
        for c in a.comparisons
        if c.checks_design and not c.ci_low <= 1.0 <= c.ci_high  # type: ignore[operator]
    ]


def aa_text(c: Comparison) -> str:
    """'triton-base-aa vs triton-base on prose: 0.81–0.99'."""
    return f"{c.arm} vs {c.baseline} on {c.workload}: {c.ci_low:.2f}–{c.ci_high:.2f}"


def workloads(a: Analysis) -> list[str]:
    """Workloads to report one by one ('all' only when nothing finer exists)."""
    named = [w for w in a.workloads if w != ALL_WORKLOADS]
    return named or [ALL_WORKLOADS]


def levels(a: Analysis) -> list[int]:
    """Concurrency levels, lowest first."""
    return sorted(a.concurrency_levels) or [1]


def low_level(a: Analysis) -> int:
    """The lowest concurrency level: where the headline numbers come from."""
    return levels(a)[0]


def arm_by_id(a: Analysis, arm_id: str | None) -> ArmResult | None:
    """The ArmResult of an arm id."""
    return next((arm for arm in a.arms if arm.id == arm_id), None)


def arm_workload(arm: ArmResult, workload: str, level: int) -> ArmWorkload | None:
    """An arm's breakdown on one workload and concurrency level."""
    return next(
        (w for w in arm.workloads if w.workload == workload and w.concurrency == level), None
    )


def ordered_arms(a: Analysis) -> list[ArmResult]:
    """Baseline first, then A/A arms, then the rest by k and name."""

    def key(arm: ArmResult) -> tuple[int, int, str]:
        rank = 0 if arm.is_baseline else 1 if arm.aa_of else 2
        return rank, arm.k if arm.k is not None else -1, arm.id

    return sorted(a.arms, key=key)


def comparison(a: Analysis, arm: str, workload: str, level: int) -> Comparison | None:
    """The comparison of one arm against the baseline on one workload and level."""
    return next(
        (
            c
            for c in a.comparisons
            if c.arm == arm and c.workload == workload and c.concurrency == level
        ),
        None,
    )


def spec_comparisons(a: Analysis, workload: str) -> list[Comparison]:
    """Headline comparisons on one workload at the lowest concurrency level: speculative arms
    against their matched baselines (never one across other differences)."""
    level = low_level(a)
    return [
        c
        for c in a.comparisons
        if c.kind == "spec" and c.matched and c.workload == workload and c.concurrency == level
    ]


def best_comparison(a: Analysis, workload: str) -> Comparison | None:
    """The configuration to recommend on a workload at the lowest level (one rule, shared with
    the analysis' before-and-after: `before_after.recommended`); None without a WIN."""
    return recommended(a, workload, low_level(a))


def lead_comparison(a: Analysis, workload: str) -> Comparison | None:
    """The comparison page 1 speaks of on a workload: the recommended WIN, else by the
    decision rule the one with the highest lower bound among comparisons with a verdict,
    else any (withheld) one (the highest ratio: their intervals say little)."""
    comps = _on_plan_baseline(a, spec_comparisons(a, workload))
    best = best_comparison(a, workload)
    decided = [c for c in comps if not c.withheld]
    if best or decided:
        return best or max(decided, key=lambda c: c.ci_low or 0.0)
    return max(
        comps,
        key=lambda c: (min(c.n_restarts_arm, c.n_restarts_baseline), c.ratio or 0.0),
        default=None,
    )


def headline_arm(a: Analysis) -> str | None:
    """The arm the headline speaks of: the first workload's recommended WIN, else among the
    workloads' leads (the arms the verdict lines speak of) the one with the most wins and
    then the highest mean ratio; None when nothing was compared."""
    best = {w: c for w in workloads(a) if (c := lead_comparison(a, w)) is not None}
    wins = [c.arm for c in best.values() if c.verdict == "WIN"]
    if wins:
        return wins[0]
    leads = {c.arm for c in best.values()}
    per_arm: dict[str, list[Comparison]] = {}
    for w in workloads(a):
        for c in spec_comparisons(a, w):
            if c.arm in leads:
                per_arm.setdefault(c.arm, []).append(c)
    if not per_arm:
        return None

    def score(arm: str) -> tuple[int, float]:
        comps = per_arm[arm]
        return sum(c.verdict == "WIN" for c in comps), sum(c.ratio or 0.0 for c in comps)

    return max(per_arm, key=lambda arm: (score(arm)[0], score(arm)[1] / len(per_arm[arm])))


def _on_plan_baseline(a: Analysis, comps: list[Comparison]) -> list[Comparison]:
    """Comparisons against the plan's baseline (the configuration the client runs) when there
    are any: a speedup over another matched baseline (an eager one, say) can be large and still
    slower in tokens/s than the plan's baseline."""
    return [c for c in comps if c.baseline == a.baseline] or comps


# Problems of the drafter itself: an arm without the finding may still have the problem (the
# same head under the wrong flag cannot show that it accepts nothing under the right one), so
# no arm denies them.
DRAFTER_RULES = frozenset({"eagle3-head-accepts-nothing"})


def denied(a: Analysis, arms: list[str], rule: str = "") -> str:
    """Why the measurements deny that a problem on `arms` explains their loss: a speculative
    arm without it lost as much on the same workload (its ratio inside the range of the
    problem's arm, both slower than the margin allows); '' when none did, and for a problem of
    the drafter itself (DRAFTER_RULES)."""
    if rule in DRAFTER_RULES:
        return ""
    floor = 1 / (1 + a.noise_band.delta)
    for w in workloads(a):
        comps = spec_comparisons(a, w)
        mine = [c for c in comps if c.arm in arms and (c.ratio or 1.0) < floor]
        for other in comps:
            if other.arm in arms or (other.ratio or 1.0) >= floor:
                continue
            if any((other.ratio or 1.0) <= (c.ci_high or c.ratio or 1.0) for c in mine):
                return (
                    f"{other.arm}, without this problem, is {other.ratio:.2f}× of "
                    f"{other.baseline} on {w} as well"
                )
    return ""
