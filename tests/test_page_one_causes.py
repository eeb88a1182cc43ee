"""Page 1 names a cause only when the measured arms agree with it (issue 44): on the SGLang
sample the EAGLE3 head served with the EAGLE flag loses, but so does the same head with the
right EAGLE3 flag (a random head accepts nothing either way), so the flag is said not to be
what made it slower, and its advice says the measured arm lost as much."""

from __future__ import annotations

from pathlib import Path

from diagnostic.bundle.store import Bundle
from diagnostic.report.build import report_context

SAMPLES = Path(__file__).resolve().parent.parent / "samples"


def test_a_cause_the_measured_arms_deny_is_not_named_as_the_cause() -> None:
    ctx = report_context(Bundle.open(SAMPLES / "sglang-h200-gemma3"))
    causes = [c.text for c in ctx.summary.root_causes]
    flag = [t for t in causes if "--speculative-algorithm EAGLE" in t]
    assert flag and all("not what made it slower" in t for t in flag), causes
    assert any("eagle3-head-k3, without this problem" in t for t in flag), flag
    # drafts never accepted: shared by both EAGLE arms, and by no arm that did better
    assert any(t.startswith("Drafts are (almost) never accepted") for t in causes), causes
    advice = [r.text for r in ctx.recommendations if "EAGLE3" in r.text and "Restart" in r.text]
    assert advice and all("though it may not help" in t for t in advice), advice


def test_a_cause_the_measured_arms_support_is_named() -> None:
    """The remedy sample: the capture downgrade is on the as-found arm alone, and the arm that
    keeps its graphs wins: the cause stands, quoted with its log line."""
    ctx = report_context(Bundle.open(SAMPLES / "vllm-h200-mla-remedy"))
    (cause,) = [c for c in ctx.summary.root_causes if "capture downgraded" in c.text]
    assert "not what made it slower" not in cause.text
    assert cause.quote is not None and "PIECEWISE" in cause.quote.text


def test_each_cause_is_said_once_and_never_both_explaining_and_denied() -> None:
    """The trained-head sample: the same finding on several runs is one line, and a problem
    that explains one arm's loss is not also listed as 'not what made it slower' for another;
    the advice the measured arms support comes before the advice they deny."""
    ctx = report_context(Bundle.open(SAMPLES / "sglang-h200-gemma3-eagle3"))
    causes = [c.text for c in ctx.summary.root_causes]
    assert len(causes) == len(set(causes)), causes
    titles = {t.split(" (")[0] for t in causes if "not what made it slower" not in t}
    denied = [t for t in causes if "not what made it slower" in t]
    assert titles and not [t for t in denied if t.split(" (")[0] in titles], causes
    texts = [r.text for r in ctx.recommendations]
    head = next(n for n, t in enumerate(texts) if t.startswith("Fix the head before the flag"))
    assert all(n > head for n, t in enumerate(texts) if "though it may not help" in t), texts
