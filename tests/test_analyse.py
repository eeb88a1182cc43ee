"""diagnostic.analyse: the real H200 runs as a bundle, and synthetic bundles of known truth."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from analyse_bundles import (
    H200,
    build_h200_bundle,
    synthetic_bundle,
    synthetic_record,
    vllm_metrics,
)

from diagnostic.analyse import theory
from diagnostic.analyse.core import analyse
from diagnostic.bundle.store import Bundle
from diagnostic.schema.analysis import Analysis, ArmResult, Comparison
from diagnostic.schema.bundle import ArmSpec, RunInfo
from diagnostic.schema.requests import decode_tps


@pytest.fixture(scope="module")
def h200(tmp_path_factory: pytest.TempPathFactory) -> Analysis:
    path = tmp_path_factory.mktemp("h200") / "bundle"
    build_h200_bundle(path)
    return analyse(Bundle.open(path))


def _arm(a: Analysis, name: str) -> ArmResult:
    return next(x for x in a.arms if x.id == name)


def _cmp(a: Analysis, arm: str, workload: str = "all", level: int = 1) -> Comparison:
    return next(
        c
        for c in a.comparisons
        if c.arm == arm and c.workload == workload and c.concurrency == level
    )


# -- the real H200 runs (one restart per configuration) -------------------------------------
@pytest.mark.parametrize(
    ("arm", "low", "high"),  # README: median decode speed per configuration
    [("base", 560, 620), ("eager", 95, 110), ("ngram3", 1050, 1200), ("ngram3-eager", 300, 350)],
)
def test_h200_restart_medians_match_the_recorded_readme(
    h200: Analysis, arm: str, low: float, high: float
) -> None:
    (summary,) = next(w for w in _arm(h200, arm).workloads if w.workload == "code").restarts
    assert summary.median is not None and low <= summary.median <= high
    assert summary.n_requests == 15 and summary.median_ci_low is not None


def test_h200_one_restart_is_labelled_within_process(h200: Analysis) -> None:
    for c in h200.comparisons:
        assert c.within_process_only and c.interval_method == "within-process"
        assert c.label == "within-process only; restart variance not measured"
        assert c.n_restarts_arm == c.n_restarts_baseline == 1
    assert _arm(h200, "base").decode_tps.n_restarts == 1
    assert any("within-process" in n for n in h200.notes)


def test_h200_one_restart_per_arm_gets_no_verdict(h200: Analysis) -> None:
    # docs/statistics.md: one restart on a side — the interval is of one process, no verdict.
    for c in h200.comparisons:
        assert c.withheld and c.verdict == "WITHHELD" and c.more_restarts_needed == 3
    assert 1.7 < (_cmp(h200, "ngram3").ratio or 0) < 2.1
    assert (_cmp(h200, "eager").ratio or 1) < 0.25
    assert h200.family_size == 0  # nothing shares the error rate: nothing is decided


def test_h200_within_process_comparisons_are_outside_the_family(h200: Analysis) -> None:
    code = [c for c in h200.comparisons if c.workload == "code"]
    assert {c.family_size for c in code} == {1} and {c.ci_level for c in code} == {0.95}
    assert all(c.p_adjusted is None for c in code)


def test_h200_acceptance_from_metrics(h200: Analysis) -> None:
    ngram = _arm(h200, "ngram3")
    assert ngram.acceptance_length is not None
    assert ngram.acceptance_length.estimate == pytest.approx(1 + 6460 / 2176)
    (run,) = ngram.runs
    assert run.acceptance is not None and len(run.acceptance.per_position) == 3
    assert run.engine == "vllm" and run.engine_version == "0.26.0"
    assert _arm(h200, "base").acceptance_length is None


def test_h200_exclusions_count_the_warmups(h200: Analysis) -> None:
    assert h200.exclusions.by_reason == {"warmup": 20}
    assert h200.exclusions.total == 20


def test_h200_margin_default_is_labelled_and_nothing_checks_the_design(h200: Analysis) -> None:
    assert h200.noise_band.delta == 0.02 and "margin" in h200.noise_band.source
    assert h200.noise_band.aa_check is None


def test_h200_sweep_has_k3_and_no_fit_from_one_k(h200: Analysis) -> None:
    assert h200.sweep is not None and h200.sweep.ks == [0, 3]
    # No WIN (one restart each), but k = 3 leans faster: more restarts, not "no speculation".
    assert h200.sweep.best_k is None
    head = next(s for s in h200.sweep.workloads if s.workload == "all")
    assert [p.arm for p in head.points] == ["base", "ngram3"]  # eager variant is another group
    assert head.theory is not None and head.theory.a is None
    assert head.theory.alpha_hat == pytest.approx(6460 / (6460 + 2176 - 2108))


def test_h200_equivalence_identical_greedy_text(h200: Analysis) -> None:
    ngram = next(e for e in h200.equivalence if e.arm == "ngram3")
    assert ngram.n_prompts == 2 and ngram.rate == 1.0


def test_h200_first_chunk_counted_as_one_token_is_said(h200: Analysis) -> None:
    assert "first chunk counts as 1 token" in h200.methods.decode_tps
    assert any("counted as 1 token" in n for n in h200.notes)


def test_h200_json_satisfies_the_design_contract(h200: Analysis) -> None:
    data = json.loads(h200.model_dump_json())
    arm = data["arms"][0]
    assert {"id", "workloads", "decode_tps", "acceptance_length"} <= arm.keys()
    assert {"estimate", "ci_low", "ci_high", "n_requests", "n_restarts"} <= arm["decode_tps"].keys()
    for c in data["comparisons"]:
        assert {"arm", "baseline", "workload", "ratio", "ci_low", "ci_high", "verdict"} <= c.keys()
        assert c["verdict"] in {"WIN", "LOSS", "EQUIVALENT", "INCONCLUSIVE", "WITHHELD"}
    assert "best_k" in data["sweep"] and data["sweep"]["workloads"][0]["points"]
    assert data["equivalence"][0]["rate"] == 1.0
    assert Analysis.model_validate(data) == h200


# -- synthetic bundles ----------------------------------------------------------------------
def test_decode_tps_uses_the_first_chunks_tokens_when_reported() -> None:
    rec = synthetic_record("a", 0, 0, 100.0, chunk_tokens=[4] + [4] * 63)
    assert decode_tps(rec) == pytest.approx(100.0)
    times = rec.chunk_times_s
    assert decode_tps(rec) == pytest.approx((256 - 4) / (times[-1] - times[0]))


def test_blocked_restarts_with_an_aa_arm(tmp_path: Path) -> None:
    base = [
        [600.0 + j for j in range(6)],
        [650.0 + j for j in range(6)],
        [580.0 + j for j in range(6)],
    ]
    tps = {
        "base": base,
        "base-aa": [[v * f for v in r] for r, f in zip(base, (1.01, 0.99, 1.003), strict=True)],
        "spec": [[v * 1.4 for v in r] for r in base],
    }
    specs = [
        ArmSpec(name="base", speculative=False),
        ArmSpec(name="base-aa", speculative=False, aa_of="base"),
        ArmSpec(name="spec", speculative=True),
    ]
    a = analyse(synthetic_bundle(tmp_path / "b", tps, specs=specs, order="blocks"))
    spec = _cmp(a, "spec", "code")
    assert spec.paired and spec.interval_method == "paired-log-block-ratios"
    assert spec.ratio == pytest.approx(1.4) and spec.verdict == "WIN"
    assert spec.family_size == 1  # the A/A arm checks the design, it is not in the family
    aa = _cmp(a, "base-aa", "code")
    assert aa.kind == "aa" and aa.matched and a.noise_band.aa_check is True
    assert aa.ci_low is not None and aa.ci_high is not None and aa.ci_low <= 1 <= aa.ci_high
    assert (a.noise_band.aa_ci_low, a.noise_band.aa_ci_high) == (aa.ci_low, aa.ci_high)
    assert a.noise_band.delta == 0.02  # the plan's margin, never estimated from the A/A arm
    assert spec.stopping is None and a.adaptive is None and a.design == "fixed"
    planning = next(w for w in _arm(a, "base").workloads if w.workload == "code").planning
    assert planning is not None and planning.recommended_restarts is not None
    assert (planning.t2_sq or 0) > 0


def test_sweep_recovers_the_step_cost_line_and_best_k(tmp_path: Path) -> None:
    alpha, a_true, b_true, tps0 = 0.7, 1.1, 0.05, 600.0
    ks = [1, 2, 3, 5, 7]
    arms = {"base": [[tps0] * 5, [tps0 * 1.01] * 5, [tps0 * 0.99] * 5]}
    metrics = {}
    for k in ks:
        speed = tps0 * theory.predicted_speedup(alpha, k, a_true, b_true)
        arms[f"k{k}"] = [[speed] * 5, [speed * 1.01] * 5, [speed * 0.99] * 5]
        per_pos = [1000 * alpha ** (i + 1) for i in range(k)]  # i.i.d. acceptance α
        metrics[f"k{k}"] = vllm_metrics(1000, per_pos)
    specs = [ArmSpec(name="base", speculative=False)] + [
        ArmSpec(name=f"k{k}", speculative=True, params={"k": k}) for k in ks
    ]
    result = analyse(synthetic_bundle(tmp_path / "b", arms, specs=specs, metrics=metrics))
    assert result.sweep is not None and result.sweep.ks == [0, *ks]
    (sw,) = result.sweep.workloads
    fit = sw.theory
    assert fit is not None and fit.alpha_hat == pytest.approx(alpha, abs=1e-9)
    assert fit.a == pytest.approx(a_true, abs=0.01) and fit.b == pytest.approx(b_true, abs=0.002)
    assert fit.predicted_best_k == theory.best_k(alpha, a_true, b_true, 14)
    wins = [p for p in sw.points if p.verdict == "WIN"]
    top = max(p.ci_low or 0 for p in wins)  # best k among WINs: the highest lower bound …
    assert sw.best_k == min(
        p.k for p in wins if (p.ci_high or 0) >= top
    )  # … the smallest k near it
    assert "without CUDA graphs" not in fit.explanation  # a = 1.1 is a small fixed cost


def test_exclusions_are_counted_by_reason(tmp_path: Path) -> None:
    bundle = synthetic_bundle(tmp_path / "b", {"base": [[600.0] * 4], "spec": [[900.0] * 12]})
    bundle.append_request(synthetic_record("spec", 0, 100, 900.0, error="ReadTimeout"))
    bundle.append_request(synthetic_record("spec", 0, 101, 900.0, tokens=200))
    bundle.append_request(synthetic_record("spec", 0, 102, 900.0, chunk_tokens=[256]))
    bundle.write_run(RunInfo(arm="spec", restart=1, status="failed"))
    bundle.append_request(synthetic_record("spec", 1, 0, 100.0))
    a = analyse(bundle)
    assert a.exclusions.by_reason == {
        "completion_tokens != max_tokens": 1,
        "error": 1,
        "no decode interval (< 2 chunks)": 1,
        "run failed": 1,
        "warmup": 2,
    }
    assert _arm(a, "spec").decode_tps.n_requests == 12
    assert a.failed_requests == 1 and [r.run for r in a.left_out_runs] == ["spec-r1"]


def test_a_run_with_over_10_percent_failed_is_left_out_and_named(tmp_path: Path) -> None:
    bundle = synthetic_bundle(
        tmp_path / "b", {"base": [[600.0] * 8, [610.0] * 8], "spec": [[900.0] * 8, [905.0] * 8]}
    )
    bundle.append_request(synthetic_record("spec", 1, 20, 900.0, error="ReadTimeout"))
    a = analyse(bundle)  # 1 failed of 9 measured requests: 11% > 10%
    assert [(r.run, r.reason) for r in a.left_out_runs] == [
        ("spec-r1", "over 10% of the run's requests failed")
    ]
    assert _arm(a, "spec").decode_tps.n_restarts == 1 and a.failed_requests == 1
    assert any("spec-r1 is left out" in n for n in a.notes)


def test_equivalence_reports_the_first_divergent_character(tmp_path: Path) -> None:
    bundle = synthetic_bundle(tmp_path / "b", {"base": [[600.0] * 3], "spec": [[900.0] * 3]})
    bundle.append_request(synthetic_record("spec", 0, 51, 900.0, text="def f():\n    return 2\n"))
    a = analyse(bundle)
    (eq,) = a.equivalence
    prompt = next(p for p in eq.prompts if p.prompt_id == "code-0")
    assert not prompt.identical and prompt.first_divergent_char == len("def f():\n    return ")
    assert eq.n_identical == eq.n_prompts - 1


def test_every_concurrency_level_is_analysed(tmp_path: Path) -> None:
    bundle = synthetic_bundle(tmp_path / "b", {"base": [[600.0] * 3], "spec": [[900.0] * 3]})
    for arm, tps in (("base", 300.0), ("spec", 330.0)):
        for j in range(3):
            bundle.append_request(synthetic_record(arm, 0, 100 + j, tps + j, concurrency=4))
    a = analyse(bundle)
    assert a.concurrency_levels == [1, 4]
    assert _cmp(a, "spec", "code", 4).ratio == pytest.approx(331 / 301, rel=0.01)
    assert _arm(a, "spec").decode_tps.estimate == pytest.approx(900.0)  # lowest level


def test_drift_and_outliers_are_flagged_not_removed(tmp_path: Path) -> None:
    values = [400.0, 410.0, 405.0] + [600.0 + (j % 3) for j in range(12)] + [2000.0]
    a = analyse(synthetic_bundle(tmp_path / "b", {"base": [values], "spec": [values]}))
    (summary,) = next(w for w in _arm(a, "base").workloads if w.workload == "code").restarts
    assert summary.drift is not None and summary.drift.flagged
    high = [o.decode_tps for o in summary.outliers if o.side == "high"]
    assert high == [pytest.approx(2000.0)]
    assert {o.seq for o in summary.outliers if o.side == "low"} == {1, 2, 3}
    assert summary.n_requests == len(values)


def test_empty_bundle_gives_an_empty_analysis(tmp_path: Path) -> None:
    from diagnostic.schema.bundle import Manifest

    bundle = Bundle.create(tmp_path / "b", Manifest(tool_version="test"))
    a = analyse(bundle)
    assert a.arms == [] and a.comparisons == [] and a.sweep is None
    assert any("No measured request" in n for n in a.notes)


def test_h200_folders_exist() -> None:
    assert (H200 / "base" / "requests.jsonl").is_file()


def test_the_margin_is_the_plan_s_and_arm_intervals_stay_positive(
    tmp_path: Path,
) -> None:
    # The GPU validation sweep: 2 restarts per arm give the A/A interval df = 1 (t = 12.7);
    # taken literally it set δ = 139% and called a 3× speedup noise.
    base = [[350.0 + j for j in range(6)], [520.0 + j for j in range(6)]]
    tps = {
        "base": base,
        "base-aa": [[v * f for v in r] for r, f in zip(base, (1.1, 0.95), strict=True)],
        "eager": [[45.0 + j for j in range(6)], [90.0 + j for j in range(6)]],
    }
    specs = [
        ArmSpec(name="base", speculative=False),
        ArmSpec(name="base-aa", speculative=False, aa_of="base"),
        ArmSpec(name="eager", speculative=False),
    ]
    a = analyse(synthetic_bundle(tmp_path / "b", tps, specs=specs, order="blocks"))
    assert a.noise_band.delta == 0.02 and a.noise_band.aa_check is True  # df = 1: wide, holds 1
    assert _cmp(a, "eager", "code").kind == "config"  # not speculative: a table row only
    eager = next(w for w in _arm(a, "eager").workloads if w.workload == "code").decode_tps
    # Geometric mean with the interval on log restart means: positive by construction.
    assert eager.ci_low is not None and 0 < eager.ci_low < 45 and (eager.ci_high or 0) > 90


def test_acceptance_is_per_workload_from_per_request_draft_counts(tmp_path: Path) -> None:
    """llama.cpp returns draft_n / draft_n_accepted per request: code and prose get their
    own τ and α̂, warm-ups left out (issue 18, item 4)."""
    specs = [ArmSpec(name="base", speculative=False)] + [
        ArmSpec(name=f"k{k}", speculative=True, params={"k": k}) for k in (2, 4)
    ]
    arms = {name: [[600.0] * 4, [610.0] * 4] for name in ("base", "k2", "k4")}
    bundle = synthetic_bundle(tmp_path / "b", arms, specs=specs, workloads=("code", "prose"))
    accepted = {"code": 128, "prose": 64}  # of 256 tokens: τ = 256/128 = 2.0, 256/192 ≈ 1.33
    for path in (bundle.path / "runs").glob("k*-r*/requests.jsonl"):
        lines = []
        for line in path.read_text().splitlines():
            rec = json.loads(line)
            acc = 999 if rec["warmup"] else accepted[rec["workload"]]  # warm-ups must not count
            rec["server_timings"] = {"draft_n": 200, "draft_n_accepted": acc}
            lines.append(json.dumps(rec))
        path.write_text("\n".join(lines) + "\n")
    a = analyse(Bundle.open(bundle.path))
    k2 = _arm(a, "k2")
    tau = {w.workload: w.acceptance_length for w in k2.workloads}
    assert tau["code"] is not None and tau["code"].estimate == pytest.approx(2.0)
    assert tau["prose"] is not None and tau["prose"].estimate == pytest.approx(256 / 192)
    assert a.sweep is not None
    fits = {s.workload: s.theory for s in a.sweep.workloads}
    code, prose = fits["code"], fits["prose"]
    assert code is not None and prose is not None
    assert code.alpha_hat == pytest.approx(
        (theory.alpha_from_tau(2.0, 2) + theory.alpha_from_tau(2.0, 4)) / 2
    )
    assert prose.alpha_hat is not None and prose.alpha_hat < code.alpha_hat
    assert "per-request draft counts" in code.alpha_source


def test_a_request_retried_by_resume_counts_by_its_last_attempt(tmp_path: Path) -> None:
    bundle = synthetic_bundle(
        tmp_path / "b", {"base": [[600.0] * 4, [610.0] * 4], "spec": [[900.0] * 4, [905.0] * 4]}
    )
    failed = synthetic_record("spec", 1, 7, 900.0, error="connection refused")
    retried = synthetic_record("spec", 1, 7, 907.0).model_copy(update={"attempt": 2})
    bundle.append_request(failed)
    bundle.append_request(retried)
    a = analyse(Bundle.open(bundle.path))
    assert a.left_out_runs == [] and a.failed_requests == 1  # the failure stays counted
    assert a.exclusions.by_reason["retried: a later attempt counts"] == 1
    spec = next(w for w in _arm(a, "spec").workloads if w.workload == "code")
    assert spec.decode_tps.n_requests == 9  # 4 + 4 measured, and the retry once


def _sweep_bundle(path: Path, alpha: float, noise: float = 0.01, a_true: float = 1.1) -> Analysis:
    b_true, tps0, ks = 0.05, 600.0, [1, 2, 3]
    wobble = (1.0, 1.0 + noise, 1.0 - noise)
    arms = {"base": [[tps0 * f] * 5 for f in wobble]}
    metrics = {}
    for k in ks:
        speed = tps0 * theory.predicted_speedup(alpha, k, a_true, b_true)
        arms[f"k{k}"] = [[speed * f] * 5 for f in reversed(wobble)]
        metrics[f"k{k}"] = vllm_metrics(1000, [1000 * alpha ** (i + 1) for i in range(k)])
    specs = [ArmSpec(name="base", speculative=False)] + [
        ArmSpec(name=f"k{k}", speculative=True, params={"k": k}) for k in ks
    ]
    return analyse(synthetic_bundle(path, arms, specs=specs, metrics=metrics))


def test_theory_fit_has_bootstrap_intervals_and_marks_extrapolation(tmp_path: Path) -> None:
    (sw,) = _sweep_bundle(tmp_path / "b", alpha=0.8).sweep.workloads  # type: ignore[union-attr]
    fit = sw.theory
    assert fit is not None and fit.a is not None and fit.b is not None
    assert (
        fit.a_ci is not None and fit.a_ci[0] <= fit.a <= fit.a_ci[1] and fit.a_ci[0] < fit.a_ci[1]
    )
    assert fit.b_ci is not None and fit.b_ci[0] <= fit.b <= fit.b_ci[1]
    assert fit.alpha_ci is not None and fit.alpha_ci[0] <= fit.alpha_hat <= fit.alpha_ci[1]  # type: ignore[operator]
    assert fit.best_k_range is not None and fit.best_k_range[0] <= fit.best_k_range[1]
    # α = 0.8 with b = 0.05 predicts a best k beyond the measured 1..3: said, not hidden.
    assert fit.predicted_best_k is not None and fit.predicted_best_k > 3 and fit.extrapolated
    assert not fit.degenerate


def test_a_step_cost_whose_interval_holds_the_null_is_not_stated_as_a_fact() -> None:
    """a = 1 is no fixed cost of turning speculation on, b = 0 a free draft token: an
    interval that holds them says so, and no fixed-cost diagnosis follows from a point
    estimate alone."""
    from diagnostic.analyse.ksweep import _explain

    sure = _explain(1.8, 0.3, True, [1.4, 2.2], [0.2, 0.5])
    assert sure.startswith("Turning speculation on costs a = 1.80× a plain decode step")
    assert "each draft token adds b = 0.300" in sure and "CUDA graphs" in sure
    unsure = _explain(1.4, 0.01, True, [0.9, 1.9], [-0.02, 0.04])
    assert "may cost nothing before the first draft token" in unsure
    assert "interval 0.90–1.90 includes 1" in unsure
    assert "what a draft token adds is not established" in unsure
    assert "-0.020–0.040 includes 0" in unsure and "CUDA graphs" not in unsure
    assert "adds b = 0.010 of a step (the draft" not in unsure


def test_degenerate_acceptance_predicts_no_best_k(tmp_path: Path) -> None:
    (sw,) = _sweep_bundle(tmp_path / "b", alpha=0.99).sweep.workloads  # type: ignore[union-attr]
    fit = sw.theory
    assert fit is not None and fit.alpha_hat is not None and fit.alpha_hat > 0.95
    assert fit.degenerate and fit.predicted_best_k is None and fit.predicted == []
    assert "degenerate" in fit.explanation


def test_cpu_runs_get_no_cuda_graph_advice_from_the_theory(tmp_path: Path) -> None:
    """A large fixed cost on a CPU run is not a missing CUDA graph (issue 23, item 4)."""

    def explanation(environment: dict[str, object] | None) -> str:
        a = _sweep_bundle(tmp_path / str(bool(environment)), alpha=0.7, a_true=1.6)
        bundle = Bundle.open(Path(a.bundle))
        if environment is not None:
            for run in bundle.runs():
                bundle.write_run(run.model_copy(update={"environment": environment}))
        sweep = analyse(Bundle.open(Path(a.bundle))).sweep
        assert sweep is not None and sweep.workloads[0].theory is not None
        return sweep.workloads[0].theory.explanation

    assert "CUDA graphs lost" in explanation(None)  # hardware unknown: the GPU trap
    cpu = explanation({"gpus": [], "cpu": "AMD EPYC"})
    assert "CUDA" not in cpu and "On a CPU" in cpu
