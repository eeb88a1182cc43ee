"""A finding's fix measured by the plan (report/remedied.py): the arm that is the finding's arm
with one of its rule's remedies applied and nothing else changed, found in recorded samples,
and the sentence that puts both arms' measured acceptance and speed beside the finding."""

from __future__ import annotations

from pathlib import Path

import pytest

from diagnostic.analyse.core import analyse
from diagnostic.bundle.store import Bundle
from diagnostic.report import remedied
from diagnostic.report.build import load_check
from diagnostic.report.chapters.capture import findings
from diagnostic.report.inputs import Inputs

SAMPLES = Path(__file__).resolve().parent.parent / "samples"


def _inputs(name: str) -> Inputs:
    bundle = Bundle.open(SAMPLES / name, strict=False)
    return Inputs(analysis=analyse(bundle), bundle=bundle, check=load_check(bundle))


@pytest.mark.parametrize(
    ("sample", "rule", "arm", "twin"),
    [
        # the wrong flag's fix: only the arm whose launch differs by the algorithm alone
        # (not ngram-k3, not the base arms)
        (
            "sglang-h200-gemma3",
            "sglang-eagle-with-eagle3-drafter",
            "eagle-flag-k3",
            "eagle3-head-k3",
        ),
        # the capture downgrade's fix: another attention backend, the rest of the launch equal
        (
            "vllm-h200-mla-remedy",
            "capture-downgraded-under-spec",
            "triton-ngram-k3",
            "flash-attn-mla-spec",
        ),
    ],
)
def test_the_arm_with_the_fix_is_found_and_no_other(
    sample: str, rule: str, arm: str, twin: str
) -> None:
    inputs = _inputs(sample)
    found = remedied.twins(inputs, rule, [arm])
    assert [(t.arm, t.twin) for t in found] == [(arm, twin)]
    text = remedied.sentence(inputs.analysis, found[0], "code")
    assert text.startswith(f"Measured on code: {arm} accepts "), text
    assert f"; {twin}, {found[0].title}, accepts " in text, text


def test_rules_without_a_flag_remedy_have_no_twin() -> None:
    inputs = _inputs("sglang-h200-gemma3")
    # eagle3-head-accepts-nothing names no flag that fixes a head; acceptance-near-one has no fix
    assert remedied.twins(inputs, "eagle3-head-accepts-nothing", ["eagle3-head-k3"]) == []
    assert remedied.twins(inputs, "acceptance-near-one", ["eagle-flag-k3"]) == []
    assert remedied.twins(inputs, "no-such-rule", ["eagle-flag-k3"]) == []


def test_chapter_one_shows_the_fix_measured_on_every_workload() -> None:
    inputs = _inputs("sglang-h200-gemma3")
    (flag,) = [v for v in findings(inputs) if v.rule == "sglang-eagle-with-eagle3-drafter"]
    assert [m.split(":")[0] for m in flag.measured] == ["Measured on code", "Measured on prose"]
    (head,) = [v for v in findings(inputs) if v.rule == "eagle3-head-accepts-nothing"]
    assert head.measured == []


def test_page_one_quotes_the_fix_only_for_a_claim_about_acceptance() -> None:
    inputs = _inputs("vllm-h200-mla-remedy")
    rule, arm = "capture-downgraded-under-spec", "triton-ngram-k3"
    assert remedied.twins(inputs, rule, [arm]) and not remedied.twins(
        inputs, rule, [arm], about_acceptance=True
    )
