"""The trained-head SGLang sample (issue 50, samples/sglang-h200-gemma3-eagle3): a head that
accepts ~1 token per step under the right flag as well as the wrong one. check names the wrong
flag on the EAGLE arm alone, 'drafts never accepted' on both head arms and the head itself on
the right-flag arm; page 1 makes the head the cause, not the flag (the right-flag arm lost as
much), and chapter 1's flag finding quotes both arms' measured acceptance. The old sample's
random head reads the same."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from diagnostic.bundle.store import Bundle
from diagnostic.logcheck.stage import check_paths
from diagnostic.report.build import report_context

SAMPLE = Path(__file__).resolve().parent.parent / "samples" / "sglang-h200-gemma3-eagle3"


def _runs_with(report, rule: str) -> set[str]:
    # a finding's run is its log: runs/<run>/logs/server.log
    return {Path(f.run or "").parents[1].name for f in report.findings if f.rule == rule}


def test_check_names_the_flag_on_the_eagle_arm_and_no_acceptance_on_both(tmp_path: Path) -> None:
    bundle = tmp_path / "eagle3"
    shutil.copytree(SAMPLE, bundle)  # check writes findings.json
    report = check_paths([bundle])
    assert _runs_with(report, "sglang-eagle-with-eagle3-drafter") == {
        f"eagle-flag-k3-r{r}" for r in range(3)
    }
    near_one = _runs_with(report, "acceptance-near-one")
    assert {n.rsplit("-r", 1)[0] for n in near_one} == {"eagle3-k3", "eagle-flag-k3"}
    head = _runs_with(report, "eagle3-head-accepts-nothing")
    assert head == {f"eagle3-k3-r{r}" for r in range(3)}


@pytest.mark.parametrize(
    ("sample", "right"),
    [("sglang-h200-gemma3-eagle3", "eagle3-k3"), ("sglang-h200-gemma3", "eagle3-head-k3")],
)
def test_page_one_blames_the_head_not_the_flag(sample: str, right: str) -> None:
    ctx = report_context(Bundle.open(SAMPLE.parent / sample))
    causes = [c.text for c in ctx.summary.root_causes]
    flag = [t for t in causes if "--speculative-algorithm EAGLE" in t]
    assert flag and all("not what made it slower" in t for t in flag), causes
    assert any(f"{right}, without this problem" in t for t in flag), flag
    # chapter 1 backs the denial with both arms' measured acceptance on every workload: the
    # fix (EAGLE3) was measured, and it accepts ~1 as the wrong flag does
    views = [v for v in ctx.findings if v.rule == "sglang-eagle-with-eagle3-drafter"]
    assert views and all(len(v.measured) == 2 for v in views), views
    for line in (m for v in views for m in v.measured):
        wrong, _, fixed = line.partition(": ")[2].partition("; ")
        assert re.search(r"eagle-flag-k3 accepts 1\.0\d tokens per step", wrong), line
        assert fixed.startswith(f"{right}, the same drafter under --speculative-algorithm EAGLE3,")
        assert re.search(r"accepts 1\.0\d tokens per step", fixed), line
    (head,) = [t for t in causes if t.startswith("EAGLE-3 head accepts nothing")]
    assert f"({right}): why {right} is" in head, head  # explains the loss, denied by no arm
    advice = [r.text for r in ctx.recommendations if r.text.startswith("Fix the head")]
    assert advice and all("may not help" not in t for t in advice), advice
