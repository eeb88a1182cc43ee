"""Page 1's caveats: what the reader must weigh beside the verdicts."""

from __future__ import annotations

from diagnostic import defaults
from diagnostic.report import fmt as f
from diagnostic.report.inputs import Inputs
from diagnostic.schema.analysis import WITHIN_PROCESS_LABEL

__all__ = ["caveats", "design_warning"]


def design_warning(inputs: Inputs) -> str:
    """The caveat every verdict carries (a failed A/A check), shown under the verdicts in
    red; '' when the design check passed or there was none."""
    nb = inputs.analysis.noise_band
    if nb.aa_check is not False:
        return ""
    return (
        "The A/A check failed: the same configuration measured twice differs beyond its "
        "interval, so the schedule has drift or order effects — read every verdict of this "
        "report with that caveat."
    )


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
        out.append(
            "Each block's reference pools the baseline and its A/A repeat (a design choice of "
            "the plan; the A/A check cannot prove the two equal). Against the baseline alone: "
            + "; ".join(f"{c.arm} on {c.workload}: {c.sensitivity}" for c in sensitive)
            + "."
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
    decides = inputs.day.decides(a, inputs.bundle.manifest.plan)
    if decides:
        out.append(decides)
    return out
