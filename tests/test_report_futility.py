"""The report on an adaptive bundle with a futility target and a pooled A/A reference: the
CPU sample re-recorded in its manifest as `Design(kind="adaptive", looks=[3, 6],
target=0.10, pool_aa=True)` with 6 restarts planned, so its 3 blocks end at an interim look
(as in test_timekeeper). Futile comparisons say why they stopped instead of asking for
restarts; the unmodified sample reads as before."""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

from diagnostic.analyse.core import analyse
from diagnostic.analyse.text import methods
from diagnostic.bundle.store import Bundle
from diagnostic.report import ReportContext, render_html
from diagnostic.report import select as sel
from diagnostic.report.build import report_context
from diagnostic.schema.analysis import Analysis, Comparison
from diagnostic.schema.bundle import Design

SAMPLE = Path(__file__).parents[1] / "samples" / "llamacpp-cpu-gemma3"
DESIGN = Design(kind="adaptive", looks=[3, 6], target=0.10, pool_aa=True)
SETTLE = "would decide it with probability"
FUTILITY_WORDS = ("futil", "one-sided", "pooled", "reference:", "baseline-aa, two starts")


@dataclass(frozen=True)
class Report:
    analysis: Analysis
    ctx: ReportContext

    def rows(self) -> dict[str, str]:
        return {r.key: r.value for r in self.ctx.methodology.plan}

    def futile(self) -> list[Comparison]:
        return [c for c in self.analysis.comparisons if c.stopping and c.stopping.futile]


def _report(bundle: Bundle) -> Report:
    a = analyse(bundle)
    return Report(a, report_context(bundle, analysis=a))


def _stopped(c: Comparison) -> str:
    """The futility note as the brief words it, from the comparison's own numbers."""
    assert c.stopping and c.stopping.futility_p is not None
    p = c.stopping.futility_p
    shown = "< 0.001" if p < 0.001 else f"= {p:.3f}"
    look = c.stopping.look_number
    return f"stopped at look {look} for futility: +10% unlikely (one-sided p {shown})"


@pytest.fixture(scope="module")
def futile(tmp_path_factory: pytest.TempPathFactory) -> Report:
    path = tmp_path_factory.mktemp("futile") / "b"
    shutil.copytree(SAMPLE, path)
    bundle = Bundle.open(path)
    plan = bundle.manifest.plan.model_copy(update={"design": DESIGN, "restarts": 6})
    bundle.write_manifest(bundle.manifest.model_copy(update={"plan": plan}))
    return _report(Bundle.open(path))


@pytest.fixture(scope="module")
def plain() -> Report:
    return _report(Bundle.open(SAMPLE))


def test_the_methodology_names_the_futility_rule_and_the_pooled_reference(
    futile: Report,
) -> None:
    design = futile.rows()["Design"]
    assert design.startswith("adaptive (group-sequential): looks after blocks 3, 6")
    assert "all decided (WIN, LOSS or EQUIVALENT) or futile got no more restarts" in design
    assert (
        "an undecided comparison stopped at an interim look when a one-sided t test rejected a "
        "speedup of +10%, the plan's target, at 2.5%: a futility stop, verdict INCONCLUSIVE"
    ) in design
    assert design.endswith(
        "each block's reference: the mean of baseline and baseline-aa, two starts of the same "
        "configuration"
    )
    # The pooled reference: 3 baseline restarts, with baseline-aa's 3; each arm ran 3.
    spec = [c for c in futile.analysis.comparisons if c.kind == "spec"]
    assert {(c.n_restarts_baseline, c.pooled_with) for c in spec} == {(3, "baseline-aa")}
    assert futile.rows()["Restarts per arm (run)"] == "3 for every arm"


def test_a_futile_verdict_line_says_why_it_stopped_and_asks_for_no_restarts(
    futile: Report,
) -> None:
    a, seen = futile.analysis, set()
    for line in futile.ctx.summary.verdicts:
        c = sel.lead_comparison(a, line.workload)
        assert c is not None and c.verdict == line.verdict
        if c.verdict != "INCONCLUSIVE":  # prose's ngram-k2: a LOSS on its own variance
            continue
        if c.stopping and c.stopping.futile:
            assert _stopped(c) in line.sentence and SETTLE not in line.sentence
        else:
            assert SETTLE in line.sentence and "futility" not in line.sentence
        # One decision path: the deciding interval is the verdict's only interval (the odds
        # after it are labelled a confidence distribution).
        verdict = line.sentence.split(" Odds from its confidence distribution")[0]
        assert verdict.count("–") == 1
        seen.add(bool(c.stopping and c.stopping.futile))
    assert True in seen  # code's lead, n-gram k=1, is futile at look 1


def test_futile_arm_rows_say_why_and_the_others_keep_their_restart_count(
    futile: Report,
) -> None:
    by = {(c.arm, c.workload): c for c in futile.analysis.comparisons}
    rows = [
        (t.title.split(": ")[-1], r, t.footnote) for t in futile.ctx.before_after for r in t.rows
    ]
    futile_rows = 0
    for workload, row, footnote in rows:
        c = by.get((row.arm, workload))
        # a note shared by rows is a footnote
        note = footnote.removeprefix("† ") if row.note == "†" else row.note
        if c is not None and c.stopping and c.stopping.futile:
            assert note.endswith(_stopped(c)), note  # after any sensitivity line
            futile_rows += 1
        else:
            assert "futility" not in note
    assert futile_rows == len([c for c in futile.futile() if c.workload != "all"])
    assert any(SETTLE in r.note for _, r, _ in rows)  # prose's open k=3 gets its extension


def test_recommendations_plan_no_restarts_for_futile_comparisons(futile: Report) -> None:
    recs = futile.ctx.recommendations
    futile_pages = {
        (c.arm, c.workload) for c in futile.futile() if c.workload in sel.workloads(futile.analysis)
    }
    stop = [r for r in recs if r.text.startswith("Plan no more restarts for ngram-k1 on code")]
    assert len(stop) == 1
    assert stop[0].text.endswith(
        "the sweep stopped them for futility, a speedup of +10% (the plan's target) is unlikely."
    )
    for arm in {arm for arm, _ in futile_pages}:
        ws = [w for w in sel.workloads(futile.analysis) if (arm, w) in futile_pages]
        assert f"{arm} on {' and '.join(ws)}" in stop[0].text
    # No recommendation asks for restarts to settle a futile comparison.
    repeat = [r for r in recs if r.text.startswith("Extend the undecided")]
    open_arms = {
        c.arm
        for c in futile.analysis.comparisons
        if c.kind == "spec"
        and c.verdict == "INCONCLUSIVE"
        and c.more_restarts_needed
        and not (c.stopping and c.stopping.futile)
        and c.workload in sel.workloads(futile.analysis)
    }
    assert open_arms == {"ngram-k3"}
    assert [r.text.split(";")[0] for r in repeat] == [
        "Extend the undecided comparisons of ngram-k3 together"
    ]
    assert "on prose" in repeat[0].evidence and "on code" not in repeat[0].evidence
    assert "Serve code without speculation: n-gram at k=1 is unlikely to pay." in [
        r.text for r in recs
    ]


def test_the_ratio_method_text_names_the_rules_only_when_the_design_records_them() -> None:
    plain = methods(False).ratio_interval
    assert methods(False, Design()).ratio_interval == plain
    pooled = methods(False, DESIGN).ratio_interval
    assert pooled.startswith(plain)
    assert "the mean of the baseline's and its A/A repeat's log restart means" in pooled
    assert "rejects a speedup of +10%, the plan's target, at 2.5% stops for futility" in pooled
    only_target = methods(False, Design(kind="adaptive", looks=[3], target=0.2)).ratio_interval
    assert "+20%" in only_target and "A/A repeat" not in only_target


def test_the_unmodified_sample_says_nothing_of_futility(plain: Report) -> None:
    assert not plain.futile()
    assert plain.rows()["Design"].startswith("fixed: every planned restart")
    assert plain.analysis.methods.ratio_interval == methods(False).ratio_interval
    html = render_html(plain.ctx)
    for word in FUTILITY_WORDS:
        assert word not in html


def test_the_rendered_page_carries_the_futility_note(futile: Report) -> None:
    html = render_html(futile.ctx)
    c = sel.lead_comparison(futile.analysis, "code")
    assert c is not None
    assert _stopped(c) in html
    assert "+10%, the plan&#39;s target, at 2.5%" in html  # autoescaped, not by hand


def test_the_analysis_carries_the_method_text_of_its_design(futile: Report) -> None:
    """analyse() passes the manifest's design to the method text (core.py)."""
    assert futile.analysis.methods.ratio_interval == methods(False, DESIGN).ratio_interval


def test_every_ratio_is_the_printed_tok_s_over_the_reference_its_table_states() -> None:
    """Issue 29 item 4: samples/llamacpp-cpu-adaptive pools the baseline with its A/A repeat.
    Each before-and-after table states the pooled reference's tok/s once (on the baseline's
    row; a row whose reference differs, like the arm stopped at look 1, states its own), and
    every printed ratio is the row's printed tok/s over that reference, to print rounding."""
    r = _report(Bundle.open(SAMPLE.parent / "llamacpp-cpu-adaptive"))
    reference = re.compile(r"vs ([\d,.]+) tok/s, baseline and baseline-aa pooled")
    checked, own_references = 0, 0
    for table in r.ctx.before_after:
        rows = [(row, table.footnote.removeprefix("† ") if row.note == "†" else row.note)
                for row in table.rows]  # fmt: skip
        shared = reference.search(rows[0][1])
        assert rows[0][0].verdict == "BASELINE" and shared, rows[0]
        for row, note in rows[1:]:
            if row.arm == "baseline-aa":  # the A/A check is against the baseline alone
                assert "vs baseline alone" in note
                continue
            own = reference.search(note)
            own_references += own is not None
            ref = float((own or shared).group(1).replace(",", ""))
            tps, ratio = float(row.decode_tps.replace(",", "")), float(row.ratio.rstrip("×"))
            assert tps / ref == pytest.approx(ratio, abs=0.006), (row, note)
            checked += 1
    assert checked == 10  # 5 speculative arms × 2 workloads
    assert own_references == 2  # the self-drafter, stopped at look 1, on its first 4 blocks
