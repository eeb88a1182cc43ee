"""Automatic checklist checks: each one judges one checklist item from a bundle's files
alone. The checks of what was recorded are in `recorded`, those of the measurement's design in
`design`; each registers itself by name in AUTO_CHECKS (`registry`)."""

from __future__ import annotations

from diagnostic.bundle.store import Bundle
from diagnostic.checklist import design, recorded
from diagnostic.checklist.bundle_facts import BundleFacts
from diagnostic.checklist.design import MIN_SWEEP_POINTS, arm_draft_length, arm_speculation
from diagnostic.checklist.registry import AUTO_CHECKS, Check, CheckResult, Status

__all__ = [
    "AUTO_CHECKS",
    "MIN_SWEEP_POINTS",
    "Check",
    "CheckResult",
    "Status",
    "arm_draft_length",
    "arm_speculation",
    "evaluate_check",
]

_REGISTERED = (recorded, design)  # imported for their checks


def evaluate_check(name: str, bundle: Bundle | BundleFacts) -> CheckResult:
    """Run the named check against a bundle (a BundleFacts shares reads between checks)."""
    facts = bundle if isinstance(bundle, BundleFacts) else BundleFacts(bundle)
    return AUTO_CHECKS[name].evaluate(facts)
