"""Page 1's box for a bundle that cannot say whether speculation pays: one arm alone, or no
arm that speculates."""

from __future__ import annotations

from diagnostic.report import fmt as f
from diagnostic.schema.analysis import Analysis

__all__ = ["missing"]


def missing(a: Analysis) -> str:
    """What the bundle lacks to say whether speculation pays at all: '' when it has it."""
    if len(a.arms) < 2:
        only = a.arms[0].id if a.arms else "none"
        return (
            f"This bundle holds one arm ({only}) and nothing to compare it with, so it cannot "
            "say whether speculation pays. Measure a speculative arm into the same bundle "
            "(diagnose collect URL -o BUNDLE --arm ngram-k3 against the server restarted "
            "with speculation on), or let diagnose sweep run both."
        )
    if not any(c.kind == "spec" for c in a.comparisons):
        noise = (
            " Its A/A repeat measures the restart noise a speculative arm's verdict will meet "
            "(below: what a day decides at that noise)."
            if any(x.aa_of for x in a.arms)
            else ""
        )
        return (
            f"No arm of this bundle runs speculation ({f.join([x.id for x in a.arms])}): it "
            "compares server configurations but cannot say whether speculation pays. Add a "
            f"speculative arm (the baseline's launch with the speculation flags added).{noise}"
        )
    return ""
