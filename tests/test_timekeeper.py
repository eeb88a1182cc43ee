"""Per-arm stopping on the recorded CPU runs (samples/llamacpp-cpu-gemma3, 3 blocks of 9 arms)
read as look 1 of an adaptive design with looks after 3 and 6 blocks: an arm stops only when
every one of its comparisons is decided; the baseline and the A/A arm go on while any is open."""

from __future__ import annotations

import json
import math
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
    """ngram-k2 is a LOSS on code at look 1, not yet decided on prose: it goes on;
    selfdraft-k4 is a LOSS on both (the derived all-workloads row never decides): it stops."""
    comparisons, arms = at_look_1
    spec = [c for c in comparisons if c.kind == "spec" and not c.derived]
    decided = {(c.arm, c.workload) for c in spec if c.stopping and c.stopping.can_stop}
    assert ("ngram-k2", "code") in decided and ("ngram-k2", "prose") not in decided
    assert {("selfdraft-k4", "code"), ("selfdraft-k4", "prose")} <= decided
    assert all(c.stopping is None for c in comparisons if c.derived)
    assert open_arms(comparisons, arms, {}, look=1) == {"selfdraft-k4": "stopped at look 1 (LOSS)"}


def test_arms_decided_on_every_comparison_stop_and_the_baseline_goes_on(
    at_look_1: tuple[list[Comparison], list[str]],
) -> None:
    """Read as a code-only plan: ngram-k2 and selfdraft-k4 are LOSS on code at the Pocock level
    of look 1 (of 2) over the family: they stop; the others (ngram-k8 too: on its own, noisier
    variance its interval still reaches 1), the baseline and the A/A arm go on."""
    comparisons, arms = at_look_1
    code = [c for c in comparisons if c.workload == "code"]
    closed = open_arms(code, arms, {}, look=1)
    assert closed == {
        "ngram-k2": "stopped at look 1 (LOSS)",
        "selfdraft-k4": "stopped at look 1 (LOSS)",
    }
    # Once every speculative arm is decided, every arm closes (the sweep stops).
    spec_arms = {c.arm for c in code if c.kind == "spec"}
    everything = open_arms(code, arms, {a: "earlier look" for a in spec_arms}, look=2)
    assert set(everything) == set(arms)
    assert everything["baseline"] == "every comparison decided at look 2"


def test_a_futile_arm_stops_undecided_and_a_promising_one_goes_on(tmp_path: Path) -> None:
    """With the plan's target (+10%) recorded, look 1 also closes an arm whose every
    comparison rejects a +10% speedup (one-sided t test at 2.5%), INCONCLUSIVE: ngram-k1
    (0.99× on both workloads) stops; ngram-k3 (1.11× on prose) keeps its restarts."""
    path = tmp_path / "b"
    shutil.copytree(SAMPLE, path)
    bundle = Bundle.open(path)
    design = Design(kind="adaptive", looks=[3, 6], target=0.10)
    plan = bundle.manifest.plan.model_copy(update={"design": design, "restarts": 6})
    bundle.write_manifest(bundle.manifest.model_copy(update={"plan": plan}))
    comparisons = analyse(Bundle.open(path)).comparisons
    by = {(c.arm, c.workload): c for c in comparisons if c.kind == "spec"}
    k1 = by["ngram-k1", "prose"]
    assert k1.verdict == "INCONCLUSIVE" and k1.stopping and k1.stopping.futile
    assert k1.stopping.can_stop and "futility stop at look 1" in k1.stopping.reason
    k3 = by["ngram-k3", "prose"]
    assert k3.stopping and not k3.stopping.futile and not k3.stopping.can_stop
    # A decided comparison is never called futile.
    k2 = by["ngram-k2", "code"]
    assert k2.verdict == "LOSS" and k2.stopping and not k2.stopping.futile
    closed = open_arms(comparisons, [a.name for a in plan.arms], {}, look=1)
    assert closed["ngram-k1"] == "stopped at look 1 (futility stop on code, prose, against +10%)"
    assert closed["ngram-k2"] == "stopped at look 1 (LOSS; futility stop on prose, against +10%)"
    assert "ngram-k3" not in closed and "baseline" not in closed


def test_a_pooled_design_compares_with_the_mean_of_the_baseline_and_its_repeat(
    tmp_path: Path,
) -> None:
    """pool_aa: each block's reference is the mean of the baseline's and baseline-aa's log
    restart means; the ratio recomputed by hand from requests.jsonl (pandas), the interval
    the family's around it (test_analyse_compare checks those). The A/A check still compares
    the two starts."""
    import pandas as pd

    path = tmp_path / "b"
    shutil.copytree(SAMPLE, path)
    bundle = Bundle.open(path)
    design = Design(kind="adaptive", looks=[3], target=0.10, pool_aa=True)
    bundle.write_manifest(
        bundle.manifest.model_copy(
            update={"plan": bundle.manifest.plan.model_copy(update={"design": design})}
        )
    )
    comparisons = analyse(Bundle.open(path)).comparisons
    rows = [
        pd.read_json(run / "requests.jsonl", lines=True).assign(
            block=json.loads((run / "run.json").read_text())["block"]
        )
        for run in sorted(path.glob("runs/*"))
    ]
    frame = pd.concat(rows)
    frame = frame[(frame["workload"] == "code") & ~frame["warmup"].astype(bool)]
    frame = frame[frame["error"].isna()]
    # docs/architecture.md: (completion tokens − the first chunk's) / (last − first chunk time)
    first = frame["chunk_tokens"].map(lambda t: t[0] if isinstance(t, list) else 1)
    span = frame["chunk_times_s"].map(lambda t: t[-1] - t[0])
    frame = frame.assign(decode_tps=(frame["completion_tokens"] - first) / span)
    run_logs = frame.groupby(["arm", "block"])["decode_tps"].mean().map(math.log).unstack("arm")
    reference = run_logs[["baseline", "baseline-aa"]].mean(axis=1)
    c = next(c for c in comparisons if (c.arm, c.workload) == ("ngram-k3", "code"))
    assert c.ratio == pytest.approx(math.exp((run_logs["ngram-k3"] - reference).mean()))
    assert c.ci_low is not None and c.ci_high is not None and c.paired
    assert math.log(c.ci_high / c.ratio) == pytest.approx(math.log(c.ratio / c.ci_low))
    assert (c.n_restarts_baseline, c.pooled_with) == (3, "baseline-aa")  # 2 starts a block
    aa = next(c for c in comparisons if c.kind == "aa" and c.workload == "code")
    assert (aa.arm, aa.baseline, aa.n_restarts_baseline) == ("baseline-aa", "baseline", 3)
