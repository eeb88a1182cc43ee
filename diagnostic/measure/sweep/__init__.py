"""`diagnose sweep`: restart the server per configuration, in interleaved blocks, from a plan."""

from diagnostic.measure.sweep.runner import (
    OVERALL,
    OutcomeStatus,
    RunOutcome,
    StartRunner,
    capture_facts,
)
from diagnostic.measure.sweep.stage import SweepResult, adaptive_looks, run_settings, sweep

__all__ = [
    "OVERALL",
    "OutcomeStatus",
    "RunOutcome",
    "StartRunner",
    "SweepResult",
    "adaptive_looks",
    "capture_facts",
    "run_settings",
    "sweep",
]
