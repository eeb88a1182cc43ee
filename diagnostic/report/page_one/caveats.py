"""Page 1's caveats: what the reader must weigh beside the verdicts."""

from __future__ import annotations

from diagnostic import defaults
from diagnostic.report import fmt as f
from diagnostic.report import select as sel
from diagnostic.report.inputs import Inputs
from diagnostic.schema.analysis import WITHIN_PROCESS_LABEL, Analysis, Comparison

__all__ = ["aa_bias", "caveats", "design_warning", "stands"]


def aa_bias(a: Analysis) -> float | None:
    """The largest difference a failed A/A check measured between two starts of one
    configuration, as a factor (1.23 for 0.81–0.99): the far end of each failing interval;
    None when the A/A check passed or there was none."""
    failed = sel.aa_failures(a)
    if not failed:
        return None
    return max(max(c.ci_high or 1.0, 1 / (c.ci_low or 1.0)) for c in failed)


def stands(c: Comparison, a: Analysis) -> bool:
    """The one rule for a failed A/A check: a verdict stands only when its interval clears the
    margin widened by the difference the A/A check measured (a WIN's lower end above
    (1 + δ)·b, a LOSS's upper end below 1 / ((1 + δ)·b)); an undecided or equivalent verdict
    is not confirmed. With no failed A/A check every verdict stands."""
    b = aa_bias(a)
    if b is None or c.withheld:
        return True
    edge = (1 + a.noise_band.delta) * b
    if c.verdict == "WIN":
        return (c.ci_low or 0.0) > edge
    if c.verdict == "LOSS":
        return (c.ci_high or 1.0) < 1 / edge
    return False


def design_warning(inputs: Inputs) -> str:
    """The failed A/A check and its rule, said once, in red under the answer; '' when the
    design check passed or there was none."""
    b = aa_bias(inputs.analysis)
    if b is None:
        return ""
    return (
        "The A/A check failed: two starts of the same configuration differed by up to "
        f"{b - 1:.0%}, more than restart noise explains, so the schedule has drift or order "
        "effects. A verdict counts only when its range clears that difference as well as the "
        "margin: page 1 marks the others not confirmed."
    )


def _alone(sensitivity: str | None) -> str:
    """'INCONCLUSIVE against baseline alone (1.15×, …)' → 'INCONCLUSIVE' (page 1's words)."""
    return (sensitivity or "").split(" against ")[0]


def caveats(inputs: Inputs) -> list[str]:
    """What page 1 must add to its verdicts: comparisons without a verdict, a pooled
    reference's sensitivity, unmatched arms, runs and requests left out, and what a day on
    site could decide at the measured noise when it could not decide the plan's target."""
    a = inputs.analysis
    out = []
    withheld = [c for c in a.comparisons if c.withheld and not c.derived]
    single = sorted(
        {c.arm if c.n_restarts_arm == 1 else c.baseline for c in withheld if c.within_process_only}
    )
    few = sorted({c.arm for c in withheld if not c.within_process_only})
    if single:
        out.append(
            f"{f.join(single)} ran in one server process only: restart variance is not "
            f"measured there ({WITHIN_PROCESS_LABEL}), so those comparisons get no verdict; "
            f"a verdict needs at least {defaults.MIN_RESTARTS} restarts per arm."
        )
    if few:
        out.append(
            f"{f.join(few)} had fewer than {defaults.MIN_RESTARTS} restarts on a side: their "
            "intervals are shown, without a verdict."
        )
    sensitive = [c for c in a.comparisons if c.sensitivity and not c.derived]
    if sensitive:
        alone = [f"{c.arm} on {c.workload} ({_alone(c.sensitivity)})" for c in sensitive]
        out.append(
            "Each block's reference pools the baseline and its A/A repeat (a design choice of "
            "the plan; the A/A check cannot prove the two equal). Against the baseline alone "
            f"the verdict differs for {f.join(alone)}: see the before-and-after chapter."
        )
    unmatched = sorted({c.arm for c in a.comparisons if c.kind == "spec" and not c.matched})
    if unmatched:
        out.append(
            f"{f.join(unmatched)} had no baseline differing only in speculation: compared with "
            f"{a.baseline} in the tables only, never in the headline."
        )
    for run in a.left_out_runs:
        out.append(f"Run {run.run} is left out of every figure: {run.reason}.")
    if a.failed_requests:
        out.append(f"{a.failed_requests} measured request(s) failed (counted, not measured).")
    excluded = sum(n for reason, n in a.exclusions.by_reason.items() if reason != "warmup")
    if excluded:
        out.append(
            f"{excluded} measured request(s) were excluded from the statistics "
            "(see Output equivalence and data quality)."
        )
    # What a day decides at the measured noise is page 1's point only for a noise study (no
    # speculative comparison); elsewhere the methodology chapter says it.
    if not any(c.kind == "spec" for c in a.comparisons):
        out.append(inputs.day.decides(a, inputs.bundle.manifest.plan))
    return [c for c in out if c]
