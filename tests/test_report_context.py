"""ReportContext: numbers match the Analysis, sentences say what was measured, gaps say so."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from analyse_bundles import build_h200_bundle
from pydantic import BaseModel
from report_bundles import check_report, sweep_bundle

from diagnostic.analyse.core import analyse
from diagnostic.bundle.seal import bundle_root
from diagnostic.bundle.store import Bundle
from diagnostic.checklist.lists import load_checklist, update_state
from diagnostic.report import fmt
from diagnostic.report import select as sel
from diagnostic.report.context import ReportContext, build_context
from diagnostic.report.inputs import Inputs
from diagnostic.schema.analysis import WITHIN_PROCESS_LABEL, Analysis
from diagnostic.schema.bundle import Engagement

# Fields that may legitimately be empty: intervals not computed, optional notes.
MAY_BE_EMPTY = {"decode_ci", "ratio_ci", "note", "footnote", "reason", "title", "where", "line"}
# page 1: said only when they apply
MAY_BE_EMPTY |= {"missing", "degenerate", "unmeasured", "telemetry_line", "warning", "why"}


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> tuple[Bundle, Analysis]:
    bundle = sweep_bundle(tmp_path_factory.mktemp("ctx") / "sweep", ks=(1, 3, 8))
    bundle.write_json("findings.json", check_report(bundle))
    return bundle, analyse(bundle)


@pytest.fixture(scope="module")
def sweep_ctx(sweep: tuple[Bundle, Analysis]) -> ReportContext:
    bundle, analysis = sweep
    return build_context(Inputs(analysis=analysis, bundle=bundle, check=check_report(bundle)))


@pytest.fixture(scope="module")
def h200(tmp_path_factory: pytest.TempPathFactory) -> tuple[Bundle, Analysis]:
    bundle = build_h200_bundle(tmp_path_factory.mktemp("ctx") / "h200")
    return bundle, analyse(bundle)


def _strings(model: Any, path: str = "") -> list[tuple[str, str]]:
    """Every string in a ReportContext with its dotted field path."""
    if isinstance(model, BaseModel):
        return [s for name in type(model).model_fields
                for s in _strings(getattr(model, name), f"{path}.{name}")]  # fmt: skip
    if isinstance(model, list):
        return [s for i, item in enumerate(model) for s in _strings(item, f"{path}[{i}]")]
    return [(path, model)] if isinstance(model, str) else []


def test_before_after_numbers_are_the_analysis_numbers(h200: tuple[Bundle, Analysis]) -> None:
    bundle, analysis = h200
    ctx = build_context(Inputs(analysis=analysis, bundle=bundle))
    code = next(t for t in ctx.before_after if t.title == "Workload: code")
    for row in code.rows:
        arm = sel.arm_by_id(analysis, row.arm)
        assert arm is not None
        est = sel.arm_workload(arm, "code", 1)
        assert est is not None
        e = est.decode_tps
        assert row.decode_tps == fmt.tps(e.estimate)
        assert row.decode_ci == f"{fmt.tps(e.ci_low)}–{fmt.tps(e.ci_high)}"
        assert row.n == f"{e.n_requests // e.n_restarts} × {e.n_restarts}"
        c = sel.comparison(analysis, row.arm, "code", 1)
        if arm.is_baseline:
            assert (row.ratio, row.verdict) == ("—", "BASELINE")
        else:
            assert c is not None
            verdict = "WITHHELD" if c.withheld else c.verdict
            assert (row.ratio, row.verdict) == (fmt.ratio(c.ratio), verdict)
    # One restart per arm: every interval is flagged, once, as within-process only.
    assert code.footnote == f"† {WITHIN_PROCESS_LABEL}"
    assert any(WITHIN_PROCESS_LABEL in c for c in ctx.summary.caveats)


def test_real_bundle_cover_and_missing_facts(h200: tuple[Bundle, Analysis]) -> None:
    bundle, analysis = h200
    ctx = build_context(
        Inputs(analysis=analysis, bundle=bundle, engagement=Engagement(client="ACME"))
    )
    assert ctx.cover.client == "ACME"
    assert ctx.cover.engine == "vllm 0.26.0"
    assert ctx.cover.model == "model"  # the real /v1/models root, by its name (no path)
    # Unknown facts are left off the cover, never printed as "not recorded"/"not measured".
    assert ctx.cover.hardware is None  # the converted runs carry no environment
    assert ctx.cover.consultant is None and ctx.cover.site is None
    assert ctx.capture_note.startswith("No server log was checked")


def test_headline_and_verdicts_follow_the_sweep(sweep: tuple[Bundle, Analysis],
                                                sweep_ctx: ReportContext) -> None:  # fmt: skip
    _, analysis = sweep
    best = sel.best_comparison(analysis, "code")
    assert best is not None and best.verdict == "WIN"
    interval = fmt.span(best.ci_low, best.ci_high, "ratio")
    phrase = f"{fmt.ratio(best.ratio)} faster on code [{interval}]"
    headline = ctx_headline(sweep_ctx)
    assert headline.startswith(f"Speculation with n-gram at k={best.k} is {phrase}")
    # the interval that decided, its level said once for the sentence
    assert headline.endswith("(simultaneous 95% CI over 6 comparisons).")
    code_line = next(v for v in sweep_ctx.summary.verdicts if v.workload == "code")
    assert code_line.verdict == "WIN" and f"n-gram at k={best.k}" in code_line.sentence
    assert fmt.decided_ci(best) in code_line.sentence
    profiles = {p.workload: p.profile for p in sweep_ctx.summary.profiles}
    assert profiles["code"] == f"n-gram at k={best.k}"


def ctx_headline(ctx: ReportContext) -> str:
    """The headline sentence (a helper so failures print it)."""
    return ctx.summary.headline


def test_root_cause_and_recommendations_come_from_check(sweep_ctx: ReportContext) -> None:
    # The downgrade is on ngram-k8, which won on code and lost nowhere: it explains nothing
    # on page 1 (samples' MLA test covers one that does), chapter 1 and the advice keep it.
    assert sweep_ctx.summary.root_causes == []
    assert "does not explain the answer" in sweep_ctx.summary.root_cause_note
    assert sweep_ctx.summary.actions[0].startswith("Patch or configure capture")
    first = sweep_ctx.recommendations[0]
    assert first.text.startswith("Patch or configure capture")
    assert "capture-downgraded-under-spec" in first.evidence
    serve = [r.text for r in sweep_ctx.recommendations if r.text.startswith("Serve")]
    # workloads with the same advice share one line
    assert any(t.startswith("Serve code") and " with n-gram" in t for t in serve)
    assert len(serve) == len(set(serve))
    assert [f.severity for f in sweep_ctx.findings] == ["error"]


def test_capture_runs_are_grouped_per_arm(sweep: tuple[Bundle, Analysis],
                                          sweep_ctx: ReportContext) -> None:  # fmt: skip
    bundle, _ = sweep
    arms = [a.name for a in bundle.manifest.plan.arms]
    assert len(sweep_ctx.capture_runs) == len(arms)  # 3 restarts of each arm resolved alike
    spec = [r for r in sweep_ctx.capture_runs if r.spec != "off"]
    assert {(r.resolved, r.resolved_class) for r in spec} == {("PIECEWISE", "bad")}
    assert sweep_ctx.spec_pairs is not None
    assert {row[-2] for row in sweep_ctx.spec_pairs.rows} == {"CHANGED"}
    assert {row[-1] for row in sweep_ctx.spec_pairs.rows} == {"3"}
    assert sweep_ctx.spec_table is not None
    resolved = next(r for r in sweep_ctx.spec_table.rows if r[0] == "Capture resolved")
    assert resolved[1:] == ["FULL_AND_PIECEWISE", "PIECEWISE"]


def test_sweep_section_matches_the_analysis(sweep: tuple[Bundle, Analysis],
                                            sweep_ctx: ReportContext) -> None:  # fmt: skip
    _, analysis = sweep
    assert analysis.sweep is not None and sweep_ctx.sweep is not None
    assert [t.title for t in sweep_ctx.sweep.tables] == ["Workload: code", "Workload: prose"]
    code = next(s for s in analysis.sweep.workloads if s.workload == "code")
    table = sweep_ctx.sweep.tables[0]
    assert [r.k for r in table.rows] == [str(p.k) for p in code.points]
    assert [r.ratio for r in table.rows[1:]] == [fmt.ratio(p.ratio) for p in code.points[1:]]
    assert table.best_k.startswith(f"Best k on code: {code.best_k}")
    assert sweep_ctx.sweep.chart is not None and sweep_ctx.sweep.acceptance_chart is not None


def test_no_field_is_blank_none_or_nan(sweep_ctx: ReportContext) -> None:
    for path, value in _strings(sweep_ctx):
        if path.rsplit(".", 1)[-1] not in MAY_BE_EMPTY:
            assert value.strip(), f"{path} is blank"
        assert value not in ("None", "nan", "null"), f"{path} = {value!r}"


def test_missing_measurements_read_not_measured(h200: tuple[Bundle, Analysis]) -> None:
    bundle, analysis = h200
    broken = analysis.model_copy(deep=True)
    arm = next(a for a in broken.arms if a.id == "ngram3")
    for aw in arm.workloads:
        aw.decode_tps.estimate = aw.decode_tps.ci_low = aw.decode_tps.ci_high = None
        aw.ttft_median_s = None
        for r in aw.restarts:
            r.tokens_per_chunk = None
    arm.acceptance_length = None
    ctx = build_context(Inputs(analysis=broken, bundle=bundle))
    row = next(r for t in ctx.before_after if t.title == "Workload: code"
               for r in t.rows if r.arm == "ngram3")  # fmt: skip
    assert (row.decode_tps, row.decode_ci) == ("not measured", "")
    assert row.ttft == row.tokens_per_chunk == row.acceptance == "not measured"


def test_failures_and_divergent_output_are_reported(tmp_path: Path) -> None:
    bundle = sweep_bundle(tmp_path / "b", ks=(1, 3), restarts=2, requests=4, hostile=True)
    ctx = build_context(Inputs(analysis=analyse(bundle), bundle=bundle))
    assert "2 request(s) failed" in ctx.failures.summary
    (row,) = ctx.failures.rows
    assert row.where == "ngram-k3 / restart 0" and row.reason.startswith("HTTP 500")
    eq = {r.arm: r for r in ctx.equivalence.rows}
    assert eq["ngram-k1"].rate == "100%" and eq["ngram-k3"].rate != "100%"
    diff = ctx.equivalence.divergent[0]
    assert "ngram-k3" in diff.arms and "<script>" in diff.arm  # raw here; escaped by the template


def _root(bundle: Bundle) -> str:
    return bundle_root(bundle).digest


def test_the_root_hash_covers_manifest_and_runs_only(tmp_path: Path) -> None:
    bundle = sweep_bundle(tmp_path / "b", ks=(1,), restarts=2, requests=2)
    first = _root(bundle)
    assert first == _root(Bundle.open(bundle.path)) and len(first) == 64
    bundle.write_json("findings.json", check_report(bundle))  # derived: not part of the hash
    assert _root(bundle) == first
    log = bundle.run_file("base", 0, "requests.jsonl")
    log.write_bytes(log.read_bytes().replace(b'"prompt_tokens":40', b'"prompt_tokens":41', 1))
    assert _root(bundle) != first
    rows = {
        e.key: e.value
        for e in build_context(Inputs(analysis=analyse(bundle), bundle=bundle)).environment
    }
    assert rows["Bundle root hash (sha256)"] == _root(bundle)
    assert rows["Seals"] == "recorded before sealing: integrity not provable, consistency checked"


def test_checklist_state_appears_when_recorded(tmp_path: Path) -> None:
    bundle = sweep_bundle(tmp_path / "b", ks=(1,), restarts=2, requests=2)
    analysis = analyse(bundle)
    assert build_context(Inputs(analysis=analysis, bundle=bundle)).checklist == []
    update_state(bundle, load_checklist("onsite"), notes=[("os-access", "VPN from 9:00")])
    rows = build_context(Inputs(analysis=analysis, bundle=bundle)).checklist
    assert any("VPN from 9:00" in r.evidence for r in rows)
    assert {r.status for r in rows} <= {"done", "not done", "not applicable"}


def test_ratio_intervals_beyond_100_print_as_100_plus() -> None:
    # Two restarts at a family's level: a t quantile on one df makes the upper end 10^30.
    assert fmt.span(0.0012, 2.7e30, "ratio") == "0.00–100+"
    assert fmt.ci(1.5, 2.5, fmt="ratio") == "[95% CI 1.50–2.50]"
    assert fmt.span(600.0, 1234.0) == "600.0–1,234"


def test_a_restart_measured_afresh_is_said_in_failures(tmp_path: Path) -> None:
    """A sweep restart that did not end ok is re-measured on a new process (issue 24 item 12);
    the report says which."""
    from diagnostic.report.chapters.equivalence import failures

    src = Path(__file__).parents[1] / "samples" / "vllm-h200-mla"
    bundle = Bundle.open(src)
    runs = [r.model_copy(update={"attempts": 2}) if r.arm == "fa-base" and r.restart == 1 else r
            for r in bundle.runs()]  # fmt: skip
    view = failures(bundle, runs)
    row = next(r for r in view.rows if r.where == "fa-base / restart 1")
    assert row.count == "2 starts" and "re-measured on a new server process" in row.reason
    assert view.summary.startswith("All 12 server runs completed")


def test_an_undecided_lead_that_leans_slower_is_no_gain_forgone() -> None:
    """The SGLang sample's leads are undecided: n-gram leans slower on code (0.94×) and
    faster on prose (1.22×). Not serving the first avoids its estimated loss; not serving
    the second forgoes its estimated gain."""
    from diagnostic.report.build import report_context

    sample = Path(__file__).resolve().parents[1] / "samples" / "sglang-h200-gemma3"
    lines = {v.workload: v.sentence for v in report_context(Bundle.open(sample)).summary.verdicts}
    assert "not serving it avoids the estimated -6%" in lines["code"]
    assert "forgoes" not in lines["code"]
    assert "not serving it forgoes the estimated +22%" in lines["prose"]
