"""Per-arm stopping on the recorded CPU runs (samples/llamacpp-cpu-gemma3, 3 blocks of 9 arms)
read as look 1 of an adaptive design with looks after 3 and 6 blocks: an arm stops only when
every one of its comparisons is decided; the baseline and the A/A arm go on while any is open."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from diagnostic.analyse.core import analyse
from diagnostic.bundle.store import Bundle
from diagnostic.measure.sweep.timekeeper import open_arms
from diagnostic.schema.analysis import Comparison
from diagnostic.schema.bundle import Design

SAMPLE = Path(__file__).parents[1] / "samples" / "llamacpp-cpu-gemma3"


@pytest.fixture(scope="module")
def at_look_1(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[Comparison], list[str]]:
    path = tmp_path_factory.mktemp("look") / "b"
    shutil.copytree(SAMPLE, path)
    bundle = Bundle.open(path)
    plan = bundle.manifest.plan.model_copy(
        update={"design": Design(kind="adaptive", looks=[3, 6]), "restarts": 6}
    )
    bundle.write_manifest(bundle.manifest.model_copy(update={"plan": plan}))
    return analyse(Bundle.open(path)).comparisons, [a.name for a in plan.arms]


def test_an_arm_with_one_open_comparison_keeps_its_restarts(
    at_look_1: tuple[list[Comparison], list[str]],
) -> None:
    comparisons, arms = at_look_1
    spec = [c for c in comparisons if c.kind == "spec"]
    decided = {(c.arm, c.workload) for c in spec if c.stopping and c.stopping.can_stop}
    # selfdraft-k4 is a LOSS on code and over both workloads, not yet on prose: it goes on.
    assert ("selfdraft-k4", "code") in decided and ("selfdraft-k4", "prose") not in decided
    assert open_arms(comparisons, arms, {}, look=1) == {}


def test_arms_decided_on_every_comparison_stop_and_the_baseline_goes_on(
    at_look_1: tuple[list[Comparison], list[str]],
) -> None:
    """Read as a code-only plan: ngram-k2 and selfdraft-k4 are LOSS on code at the Pocock
    level of look 1 (of 2) over the family: they stop; the others, the baseline and the A/A
    arm go on."""
    comparisons, arms = at_look_1
    code = [c for c in comparisons if c.workload == "code"]
    closed = open_arms(code, arms, {}, look=1)
    assert closed == {
        "ngram-k2": "decided at look 1 (LOSS)",
        "selfdraft-k4": "decided at look 1 (LOSS)",
    }
    # Once every speculative arm is decided, every arm closes (the sweep stops).
    spec_arms = {c.arm for c in code if c.kind == "spec"}
    everything = open_arms(code, arms, {a: "earlier look" for a in spec_arms}, look=2)
    assert set(everything) == set(arms)
    assert everything["baseline"] == "every comparison decided at look 2"
