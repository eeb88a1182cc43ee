"""The trained-head SGLang sample (issue 50, samples/sglang-h200-gemma3-eagle3): a head that
accepts ~1 token per step under the right flag as well as the wrong one. check names the wrong
flag on the EAGLE arm alone and 'drafts never accepted' on both head arms; page 1 does not
make the flag the cause, since the right-flag arm lost as much."""

from __future__ import annotations

import shutil
from pathlib import Path

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


def test_page_one_does_not_blame_the_flag_when_the_right_flag_loses_as_much() -> None:
    ctx = report_context(Bundle.open(SAMPLE))
    causes = [c.text for c in ctx.summary.root_causes]
    flag = [t for t in causes if "--speculative-algorithm EAGLE" in t]
    assert flag and all("not what made it slower" in t for t in flag), causes
    assert any("eagle3-k3, without this problem" in t for t in flag), flag
