"""The arm-free covariate adjustment (issue 45): the pooled within-arm slope, the balance check
that withholds it when the arm moves the covariate, raw beside adjusted estimates in the
analysis, and bundles without a covariate analysed as before. Fixed data only: no verdict
here depends on a random draw."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from analyse_bundles import synthetic_bundle

from diagnostic.analyse.context import build_context
from diagnostic.analyse.core import analyse
from diagnostic.analyse.covariate import (
    BALANCE_ALPHA,
    adjust_by_covariate,
    arm_shifts,
    balance_test,
    pooled_fit,
    run_covariate,
    telemetry_covariate,
)
from diagnostic.analyse.verify import upgrade_analysis
from diagnostic.bundle.store import Bundle
from diagnostic.schema.analysis import ANALYSIS_SCHEMA_VERSION, Analysis
from diagnostic.schema.bundle import ArmSpec
from diagnostic.schema.telemetry import QuietWindow

SAMPLES = Path(__file__).parents[1] / "samples"
NOISE = SAMPLES / "vllm-h200-gemma3-noise"

# Steal (cores) in each block's quiet windows, and each run's own small departure from it.
STEAL = [0.05, 0.60, 0.20, 0.90, 0.35, 0.10]
OWN = {
    "base": [0.00, 0.02, -0.01, 0.01, 0.00, -0.02],
    "base-aa": [0.01, -0.02, 0.00, 0.02, -0.01, 0.00],
}
OWN["spec"] = [-0.01, 0.00, 0.02, -0.02, 0.01, 0.01]
NOISE_LEFT = [0.010, -0.008, 0.004, -0.012, 0.006, 0.0]  # what steal does not explain
RATIO = {"base": 1.0, "base-aa": 1.0, "spec": 1.08}
SLOPE = -0.4  # log tok/s per core stolen


def test_the_slope_is_pooled_from_within_arm_deviations() -> None:
    # two arms at very different levels, the same slope within each: their levels never enter
    a = [(1.0 + 0.5 * x, x) for x in (0.0, 1.0, 2.0)]
    b = [(9.0 + 0.5 * x + e, x) for x, e in ((0.0, 0.1), (1.0, -0.2), (3.0, 0.1))]
    fit = pooled_fit([a, b])
    assert fit is not None and fit.points == 6
    assert fit.slope == pytest.approx(0.5, abs=0.05) and fit.sd_adjusted < fit.sd_raw
    exact = pooled_fit([a, [(y + 3, x) for y, x in a]])
    assert exact is not None and exact.slope == pytest.approx(0.5) and exact.sd_adjusted == 0
    assert pooled_fit([[(1.0, 0.3), (2.0, 0.3)], [(1.0, 0.2)]]) is None  # x never varies


def test_no_restart_is_shifted_by_a_slope_fitted_on_itself() -> None:
    points = {
        "base": {b: (-0.3 * x, x) for b, x in enumerate((0.1, 0.9, 0.4, 0.7))},
        "spec": {b: (0.5 - 0.3 * x, x) for b, x in enumerate((0.3, 0.2, 0.8, 0.5))},
    }
    folds = {arm: {b: b for b in p} for arm, p in points.items()}  # restart b ran in block b
    found = arm_shifts(points, folds)
    assert found is not None
    fit, shifts = found
    # block 2's runs move: block 2's shifts stay (fitted without them), every other one moves
    moved = {arm: {**p, 2: (p[2][0] + 0.4, p[2][1])} for arm, p in points.items()}
    again = arm_shifts(moved, folds)
    assert again is not None
    for arm in points:
        assert again[1][arm][2] == pytest.approx(shifts[arm][2])
        assert all(again[1][arm][b] != pytest.approx(shifts[arm][b]) for b in (0, 1, 3))
    assert fit.slope == pytest.approx(-0.3)  # the fit reported is the one over every run


def test_the_balance_test_pairs_on_blocks_and_says_when_it_cannot() -> None:
    moved = {b: 0.1 * b + 0.5 + 0.01 * (b % 2) for b in range(6)}
    diff, p, n = balance_test(moved, {b: 0.1 * b for b in range(6)}, paired=True)
    assert diff == pytest.approx(0.505) and p is not None and p < 1e-4 and n == 6
    assert balance_test({0: 1.0}, {0: 0.0}, paired=True)[1] is None  # one pair: no test
    _, p, n = balance_test({0: 1.0, 1: 2.0}, {0: 1.5, 1: 1.4, 2: 1.6}, paired=False)
    assert p is not None and n == 5


def _bundle(path: Path, *, moved: float = 0.0) -> Bundle:
    """Six blocks of base, its A/A repeat and a speculative arm whose restart means follow
    the steal of their quiet window; `moved` adds steal to the speculative arm's windows."""
    tps = {
        arm: [
            [100 * RATIO[arm] * math.exp(SLOPE * (STEAL[b] + OWN[arm][b]) + NOISE_LEFT[b])] * 3
            for b in range(len(STEAL))
        ]
        for arm in RATIO
    }
    specs = [
        ArmSpec(name="base", speculative=False),
        ArmSpec(name="base-aa", speculative=False, aa_of="base"),
        ArmSpec(name="spec", speculative=True),
    ]
    return _with_quiet_windows(synthetic_bundle(path, tps, specs=specs, order="blocks"), moved)


def _with_quiet_windows(bundle: Bundle, moved: float = 0.0) -> Bundle:
    """Each run given a quiet window whose steal is its block's plus its arm's own (plus
    `moved` on the speculative arm)."""
    for run in bundle.runs():
        steal = STEAL[run.restart] + OWN[run.arm][run.restart]
        steal += moved if run.arm == "spec" else 0.0
        window = QuietWindow(
            seconds=4.0,
            cores=16,
            steal_cores=steal,
            steal_since_boot_s=100.0,
            spin_share=1.0,
            tick_s=0.005,
            ticks=400,
            tick_late_ms=0.1,
        )
        bundle.write_run(run.model_copy(update={"quiet": window}))
    return Bundle.open(bundle.path)


def test_a_balanced_arm_free_covariate_adjusts_the_comparisons(tmp_path: Path) -> None:
    analysis = analyse(_bundle(tmp_path / "b"))
    cov = analysis.covariate
    assert cov is not None and cov.covariate == "quiet.steal_cores" and cov.arm_free
    assert cov.applied and cov.balanced and cov.why.startswith("no arm moves")
    [slope] = cov.slopes
    assert slope.slope == pytest.approx(SLOPE, abs=0.05) and slope.sd_adjusted < slope.sd_raw / 3
    # both estimates kept; the comparisons decided are the adjusted ones, and narrower
    spec = next(c for c in analysis.comparisons if c.arm == "spec")
    est = next(e for e in cov.estimates if e.arm == "spec")
    assert (spec.ratio, spec.ci_low, spec.verdict) == (
        est.adjusted_ratio,
        est.adjusted_low,
        est.adjusted_verdict,
    )
    assert est.adjusted_high - est.adjusted_low < (est.raw_high - est.raw_low) / 3  # type: ignore[operator]
    assert est.adjusted_ratio == pytest.approx(RATIO["spec"], rel=0.02)
    assert any("adjusted by VM steal" in n for n in analysis.notes)  # said as a limitation
    # it round-trips through analysis.json, estimates and all
    again = Analysis.model_validate_json(analysis.model_dump_json())
    assert again.covariate == cov


def test_a_covariate_the_arm_moves_is_caught_and_the_raw_verdicts_stand(tmp_path: Path) -> None:
    analysis = analyse(_bundle(tmp_path / "b", moved=0.5))
    cov = analysis.covariate
    assert cov is not None and not cov.applied and not cov.balanced
    spec = next(b for b in cov.balance if b.arm == "spec")
    assert spec.method == "paired-blocks" and spec.difference == pytest.approx(0.5, abs=0.05)
    assert spec.p_value is not None and spec.p_value < BALANCE_ALPHA / len(cov.balance)
    assert "the raw verdicts stand" in cov.why and cov.why.startswith("spec moves")
    comparison = next(c for c in analysis.comparisons if c.arm == "spec")
    est = next(e for e in cov.estimates if e.arm == "spec")
    assert (comparison.ratio, comparison.verdict) == (est.raw_ratio, est.raw_verdict)


def test_a_bundle_without_quiet_windows_is_analysed_as_before(tmp_path: Path) -> None:
    bundle = Bundle.open(NOISE)
    assert run_covariate(bundle.runs()) is None
    analysis = analyse(bundle)
    assert analysis.covariate is None and "covariate" not in analysis.model_dump(mode="json")
    assert analysis.schema_version == ANALYSIS_SCHEMA_VERSION
    # a v4 analysis.json (no covariate) reads as the current version, nothing else changed
    old = json.loads(analysis.model_dump_json()) | {"schema_version": 4}
    assert upgrade_analysis(old) == json.loads(analysis.model_dump_json())


def test_the_noise_samples_run_steal_is_a_study_never_a_verdict() -> None:
    bundle = Bundle.open(NOISE)
    ctx = build_context(bundle)
    cov = telemetry_covariate(bundle, ctx.loaded.runs, "steal_pct")
    assert cov is not None and not cov.arm_free
    plan = bundle.manifest.plan
    used, found = adjust_by_covariate(ctx, delta=plan.margin, design=plan.design, covariate=cov)
    assert used is ctx and found is not None and not found.applied  # raw means decide
    assert "may be moved by the arm" in found.why
    # the recorded runs: steal during the run goes with most of the spread of restart means
    assert all(s.sd_adjusted < s.sd_raw for s in found.slopes)


def test_the_method_chapter_states_the_adjustment_and_both_estimates(tmp_path: Path) -> None:
    from diagnostic.report import render_html
    from diagnostic.report.build import report_context

    ctx = report_context(_bundle(tmp_path / "b"))
    method = ctx.methodology
    keys = [kv.key for kv in method.covariate]
    assert keys == [
        "Rule",
        "Covariate",
        "Slope and spread",
        "Balance check",
        "Used for the verdicts",
    ]
    assert method.covariate[-1].value.startswith("yes: no arm moves")
    spec = next(r for r in method.covariate_rows if r.comparison.startswith("spec vs base, code"))
    assert spec.used == "adjusted" and spec.raw != spec.adjusted
    html = render_html(ctx)
    assert "<h3>Covariate adjustment</h3>" in html and spec.adjusted in html
    moved = report_context(_bundle(tmp_path / "m", moved=0.5)).methodology
    assert moved.covariate[-1].value.startswith("no: spec moves")
    assert {r.used for r in moved.covariate_rows} == {"raw"}
    # a bundle without quiet windows has no such section
    assert not report_context(Bundle.open(NOISE)).methodology.covariate


def test_the_simulation_runs_small(capsys: pytest.CaptureFixture[str]) -> None:
    from test_benchmarks_smoke import load_benchmark

    simulation = load_benchmark("covariate_simulation")
    simulation.main(["--sims", "3", "--arms", "1", "--blocks", "3", "--reliability", "1"])
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| 2 | 3 |")]
    assert len(rows) == 2 + 2 * 3  # arm-free at two ratios; three moves at two ratios
    simulation.main(["--bundle", str(NOISE), "--column", "steal_pct"])
    assert "| code | 10 |" in capsys.readouterr().out


def test_a_covariate_that_explains_nothing_is_not_used(tmp_path: Path) -> None:
    # restart means that do not move at all: no adjustment can narrow anything
    tps = {arm: [[100 * RATIO[arm]] * 3 for _ in STEAL] for arm in ("base", "spec")}
    cov = analyse(
        _with_quiet_windows(synthetic_bundle(tmp_path / "b", tps, order="blocks"))
    ).covariate
    assert cov is not None and cov.balanced and not cov.applied
    assert "explains none of the spread" in cov.why


def test_a_covariate_of_one_tick_or_none_fits_no_slope() -> None:
    """The trained-head H200 sweep: every quiet window read 0 or one tick of steal (0.0025
    cores, float noise apart). Two levels fit noise: no slope, the raw verdicts stand, and the
    analysis says why (a slope of 1/1e-9 had sent the adjusted restart means past e^700)."""
    tick = 0.0025
    arms = [[(6.2, 0.0), (6.3, tick * (1 + 1e-4)), (6.25, tick)], [(6.0, 0.0), (5.9, tick)]]
    assert pooled_fit(arms) is None
    a = analyse(Bundle.open(Path(__file__).parents[1] / "samples" / "sglang-h200-gemma3-eagle3"))
    assert a.covariate is not None and a.covariate.covariate == "quiet.steal_cores"
    assert not a.covariate.applied and not a.covariate.slopes
    assert "nothing to adjust by" in a.covariate.why
