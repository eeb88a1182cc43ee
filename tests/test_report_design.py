"""The methodology's design rows on a recorded bundle without a sweep's TimePlan (the CPU
sample): the fixed design, one restart count for every arm, no invented estimate."""

from __future__ import annotations

from pathlib import Path

from diagnostic.analyse.core import analyse
from diagnostic.bundle.store import Bundle
from diagnostic.common.progress import duration
from diagnostic.report.chapters.methodology import design_rows

SAMPLE = Path(__file__).parents[1] / "samples" / "llamacpp-cpu-gemma3"


def test_a_fixed_bundle_without_time_plan_says_what_ran_and_nothing_more() -> None:
    bundle = Bundle.open(SAMPLE)
    rows = {r.key: r.value for r in design_rows(bundle.manifest, analyse(bundle))}
    restarts = bundle.manifest.plan.restarts
    assert rows["Design"] == f"fixed: every planned restart ({restarts} per arm), decided once"
    assert rows["Restarts per arm (run)"] == f"{restarts} for every arm"
    assert "Wall-clock: planned against taken" not in rows


def test_durations_read_as_a_clock() -> None:
    assert [duration(s) for s in (25, 45, 720, 7500)] == ["25 s", "1 min", "12 min", "2 h 05 min"]
