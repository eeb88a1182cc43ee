"""Page 1's recommended serving profiles, and the chart beside them: each workload's decode
throughput without speculation and with the setting page 1 speaks of."""

from __future__ import annotations

from diagnostic.report import charts
from diagnostic.report import fmt as f
from diagnostic.report import select as sel
from diagnostic.report.inputs import Describe, name_of
from diagnostic.report.views.base import Chart
from diagnostic.report.views.page_one import Profile
from diagnostic.schema.analysis import Analysis

__all__ = ["chart", "profile"]

# An undecided lead faster with less probability than this is served without speculation.
UNLIKELY = 0.05


def profile(a: Analysis, workload: str, describe: Describe) -> Profile:
    """What to serve a workload with, and the measurement behind it in a few words (the
    verdict lines of chapter 2 give the interval and its level)."""
    c = sel.lead_comparison(a, workload)
    if c is None:
        return Profile(workload=workload, profile="no speculation", reason=f.MISSING)
    name = name_of(a, c.arm, describe)
    # No interval: the answer above gives this comparison's range (one range per comparison).
    measured = f"{f.ratio(c.ratio)} of no speculation, {'no verdict' if c.withheld else c.verdict}"
    if c.verdict == "WIN":
        return Profile(workload=workload, profile=name, reason=measured)
    if c.withheld:  # too few restarts to decide: not a reason to give the gain up
        return Profile(
            workload=workload,
            profile=f"undecided: {name} has no verdict yet",
            reason=f"{name}: {measured}",
        )
    if c.verdict == "INCONCLUSIVE" and not c.withheld and not f.futility(c) and c.outlook:
        odds = f"{name} is faster with probability {c.outlook.p_faster:.0%}"
        # an arm all but surely slower is not the one to wait for: the default stands
        profile = (
            f"no speculation: {odds}, not decided"
            if round(c.outlook.p_faster, 2) < UNLIKELY  # as printed: 5% is not below 5%
            else f"undecided: {odds}"
        )
        return Profile(workload=workload, profile=profile, reason=f"{name}: {measured}")
    return Profile(workload=workload, profile="no speculation", reason=f"{name}: {measured}")


def chart_bars(a: Analysis) -> tuple[list[charts.Bar], bool]:
    """The bars of page 1's chart, and whether a reference pools the A/A repeat. No
    speculation against the setting page 1 speaks of, per workload, on one reference:
    the bar of no speculation is the reference its ratio divides by (over the blocks the ratio
    pairs, with the A/A repeat when the design pools it), the speculative bar that reference
    times the ratio, with the ratio's deciding interval: the figures of the answer beside it.
    A workload with no ratio to show draws each arm's own estimate and 95% interval."""
    level, out = sel.low_level(a), list[charts.Bar]()
    pooled = False
    for w in sel.workloads(a):
        c = sel.lead_comparison(a, w)
        if c is not None and c.reference_tps and c.ratio and c.ci_low and c.ci_high:
            ref = c.reference_tps
            pooled = pooled or bool(c.pooled_with)
            out.append(charts.Bar(w, "no speculation", ref, None, None, True))
            out.append(
                charts.Bar(
                    w, "best speculative setting", ref * c.ratio, ref * c.ci_low, ref * c.ci_high
                )
            )
            continue
        base = c.baseline if c else a.baseline  # the matched baseline the ratio is against
        for arm_id, is_base in ((base, True), (c.arm if c else None, False)):
            arm = sel.arm_by_id(a, arm_id) if arm_id else None
            aw = sel.arm_workload(arm, w, level) if arm else None
            est = aw.decode_tps.estimate if aw is not None else None
            if aw is None or est is None:
                continue
            e = aw.decode_tps
            label = "no speculation" if is_base else "best speculative setting"
            out.append(charts.Bar(w, label, est, e.ci_low, e.ci_high, is_base))
    return out, pooled


def chart(a: Analysis) -> Chart | None:
    """Page 1's chart of chart_bars."""
    bars, pooled = chart_bars(a)
    if not bars:
        return None
    cut = charts.bar_axis(bars).cuts([b.low for b in bars], [b.high for b in bars])
    return Chart(
        title=(
            "Decode tok/s: no speculation"
            + (" (the baseline pooled with its A/A repeat)" if pooled else "")
            + ", and the best speculative setting at its ratio to it, with the ratio's interval"
            + (f"; {charts.CUT}" if cut else "")
            + "."
        ),
        # Shorter than chapter 2's: page 1 must hold the whole executive summary.
        uri=charts.data_uri(charts.before_after_chart(bars, legend_on_top=True, height_in=1.0)),
        alt="Bar chart of decode tokens per second, baseline against best speculative arm.",
    )
