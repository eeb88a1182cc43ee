"""The recorded sample bundles (samples/): check and analyse them as the README says."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from diagnostic.analyse.core import analyse
from diagnostic.bundle.store import Bundle
from diagnostic.logcheck.stage import check_paths
from diagnostic.report import select
from diagnostic.report.chapters.equivalence import equivalence, failures

SAMPLES = Path(__file__).resolve().parent.parent / "samples"
VALIDATION = SAMPLES / "vllm-h200-validation"


@pytest.fixture(scope="module")
def validation(tmp_path_factory: pytest.TempPathFactory) -> Path:
    copy = tmp_path_factory.mktemp("samples") / "validation"
    shutil.copytree(VALIDATION, copy)  # check writes findings.json into the bundle
    return copy


def test_validation_capture_modes_are_what_the_logs_show(validation: Path) -> None:
    # By eye: bars "(PIECEWISE)"/"(FULL)" without speculation, "(mixed prefill-decode,
    # PIECEWISE)"/"(decode, FULL)" with n-gram, "Enforce eager set" and no bars when eager.
    report = check_paths([validation])
    resolved = {r.label: r.capture.resolved for r in report.runs}
    assert len(resolved) == 16
    for label, mode in resolved.items():
        assert mode == ("NONE" if "eager" in label else "FULL_AND_PIECEWISE"), label

    def runs(rule: str) -> list[str]:
        return sorted(Path(f.run or "").parent.name for f in report.findings if f.rule == rule)

    ngram = sorted(label for label in resolved if label.startswith("ngram"))
    assert runs("model-runner-fallback") == ngram  # Model Runner V2 → V1 on every n-gram run
    assert {f.rule for f in report.findings if f.severity == "error"} == {"capture-none-under-spec"}
    assert runs("capture-none-under-spec") == ["ngram-k3-eager-r0", "ngram-k3-eager-r1"]


def test_validation_recommends_only_comparisons_with_a_verdict(validation: Path) -> None:
    a = analyse(Bundle.open(validation))
    k7 = next(c for c in a.comparisons if c.arm == "ngram-k7" and c.workload == "code")
    assert k7.n_restarts_arm == 1 and k7.withheld and k7.verdict == "WITHHELD"
    assert a.noise_band.delta == 0.02 and a.noise_band.aa_check is True
    # Two restarts per arm are below the floor of 3: no verdict anywhere, nothing recommended.
    assert all(c.withheld for c in a.comparisons if c.kind == "spec")
    assert select.best_comparison(a, "code") is None is select.best_comparison(a, "prose")
    # Page 1 speaks of a comparison over two restarts, not the one-process k = 7.
    lead = select.lead_comparison(a, "code")
    assert lead is not None and lead.withheld and lead.n_restarts_arm == 2
    eager_k3 = next(c for c in a.comparisons if c.arm == "ngram-k3-eager")
    assert eager_k3.baseline == "eager" and eager_k3.matched  # its own graph-less baseline
    eager = next(arm for arm in a.arms if arm.id == "eager")
    assert all(w.decode_tps.ci_low is None or w.decode_tps.ci_low >= 0 for w in eager.workloads)


def test_validation_report_shows_the_client_against_vllms_clock(validation: Path) -> None:
    view = equivalence(analyse(Bundle.open(validation)))
    assert [row.arm for row in view.timing][:2] == ["base", "base-aa"]
    assert len(view.timing) == 8 and all(row.tokens == "equal" for row in view.timing)
    assert "request_decode_time_seconds" in view.timing_note


def test_llamacpp_k1_arm_that_never_drafts_is_an_error(tmp_path: Path) -> None:
    # llama-server does not print its command: the bundle's run.json says speculation was
    # asked for, and the log shows 32 answers without a single draft acceptance line.
    copy = tmp_path / "cpu"
    shutil.copytree(SAMPLES / "llamacpp-cpu-gemma3", copy)
    report = check_paths([copy])
    never = sorted(
        Path(f.run or "").parent.name for f in report.findings if f.rule == "spec-never-drafted"
    )
    assert never == ["ngram-k1-r0", "ngram-k1-r1", "ngram-k1-r2"]
    k2 = next(r for r in report.runs if r.label == "ngram-k2-r0")
    assert k2.spec.num_draft_tokens == 2 and k2.requests_decoded == 32
    finding = next(f for f in report.findings if f.rule == "spec-never-drafted")
    assert finding.evidence[0].line == 0 and "run.json" in finding.evidence[0].text
    assert "--spec-ngram-simple-size-m 1" in finding.evidence[0].text


def test_validation_run_cut_by_the_budget_is_a_failure_that_says_so(validation: Path) -> None:
    bundle = Bundle.open(validation)
    view = failures(bundle, bundle.runs())
    (row,) = view.rows
    assert row.where == "ngram-k7 / restart 1" and row.reason.startswith("never finished")
    assert view.summary.startswith("1 of 16 server runs did not finish cleanly")


def test_gemma3_real_weights_show_what_random_weights_cannot(tmp_path: Path) -> None:
    # samples/vllm-h200-gemma3/README.md: acceptance is real (not ~k+1), differs by workload,
    # the theory fit is not degenerate, and speculation changes some greedy texts.
    bundle = tmp_path / "gemma3"
    shutil.copytree(SAMPLES / "vllm-h200-gemma3", bundle)  # check writes findings.json
    a = analyse(Bundle.open(bundle))
    assert all(c.n_restarts_arm == c.n_restarts_baseline == 3 for c in a.comparisons)
    fits = {w.workload: w for w in a.sweep.workloads}
    code, prose = fits["code"], fits["prose"]
    for w in (code, prose):
        fit = w.theory
        assert fit is not None and not fit.degenerate and not fit.extrapolated
        assert 0.5 < fit.alpha_hat < 0.95
        assert fit.alpha_ci[0] < fit.alpha_hat < fit.alpha_ci[1]
        for point in w.points[1:]:
            assert point.acceptance_length is not None
            assert 1.0 < point.acceptance_length < point.k + 0.9  # drafts are rejected too
    assert code.theory.alpha_ci[1] < prose.theory.alpha_ci[0]  # prose accepts more
    rates = {e.arm: e.n_identical for e in a.equivalence}
    assert rates == {"ngram-k1": 17, "ngram-k3": 12, "ngram-k5": 17}
    assert all(p.baseline_consistent for e in a.equivalence for p in e.prompts)
    report = check_paths([bundle])
    fallback = {
        Path(f.run or "").parent.name for f in report.findings if f.rule == "model-runner-fallback"
    }
    assert fallback == {f"ngram-k{k}-r{r}" for k in (1, 3, 5) for r in range(3)}


def test_the_adaptive_sample_stopped_the_decided_arm_and_rotated_its_prompts() -> None:
    """samples/llamacpp-cpu-adaptive/README.md: looks after 4 and 8 blocks, the A/A repeat
    pooled, +10% target; selfdraft-k4 a LOSS at look 1 with 4 restarts, the others 8; m* = 6,
    7, then 5 requests from block 3, the blocks rotating through the 23 code prompts; WIN for
    ngram-k2 on prose at look 2; the A/A check passes; it took under half the planned time."""
    bundle = Bundle.open(SAMPLES / "llamacpp-cpu-adaptive")
    design, t = bundle.manifest.plan.design, bundle.manifest.time_plan
    assert (design.kind, design.looks, design.pool_aa, design.target) == (
        "adaptive",
        [4, 8],
        True,
        0.10,
    )
    assert t is not None and t.stopped == {"selfdraft-k4": "stopped at look 1 (LOSS)"}
    assert t.restarts["selfdraft-k4"] == 4
    assert all(n == 8 for arm, n in t.restarts.items() if arm != "selfdraft-k4")
    assert t.took_s is not None and t.took_s < t.estimated_s / 2
    code = {}
    for block in range(8):  # the baseline's restart r ran in block r
        records = bundle.read_requests("baseline", block).records
        measured = [r for r in records if not r.warmup and r.workload == "code"]
        code[block] = [r.prompt_id for r in measured]
    assert [len(code[b]) for b in range(8)] == [15, 15, 6, 7, 5, 5, 5, 5]
    assert code[1][0] != code[0][0]  # block 1 starts at prompt 15 of 23
    assert len({p for ids in code.values() for p in ids}) == 23  # every code prompt measured
    a = analyse(bundle)
    by = {(c.arm, c.workload): c for c in a.comparisons if c.kind == "spec"}
    k2 = by["ngram-k2", "prose"]
    assert k2.verdict == "WIN" and k2.stopping and k2.stopping.look_number == 2
    on_code = by["ngram-k2", "code"]
    assert on_code.verdict == "WIN" and on_code.ci_low > 1.03  # type: ignore[operator]  (1.032)
    assert a.sweep is not None
    assert {w.workload: w.best_k for w in a.sweep.workloads} == {
        "code": 2,
        "prose": 2,
        "all": None,  # derived: no verdict, so no best k
    }
    assert k2.pooled_with == "baseline-aa" and k2.ci_label.startswith("Pocock-adjusted 95% CI")
    draft = by["selfdraft-k4", "code"]
    assert draft.verdict == "LOSS" and draft.n_restarts_arm == 4
    assert draft.stopping and draft.stopping.look_number == 1
    assert a.noise_band.aa_check is True


def test_the_cpu_vllm_sample_is_sealed_and_its_logs_say_cpu(tmp_path: Path) -> None:
    """samples/vllm-cpu-0.32/README.md: vLLM 0.32.0 on 2 CPU cores, no speculation and n-gram
    k = 3, 3 restarts each, every run sealed; check reads engine, version, platform and k from
    the runs' own logs and finds nothing; acceptance per workload from /metrics around it."""
    bundle = tmp_path / "vllm-cpu"
    shutil.copytree(SAMPLES / "vllm-cpu-0.32", bundle)  # check writes findings.json
    b = Bundle.open(bundle)
    runs = b.runs()
    assert sorted((r.arm, r.restart, r.status) for r in runs) == [
        (arm, r, "ok") for arm in ("base", "ngram-k3") for r in range(3)
    ]
    assert all(r.seal is not None for r in runs)
    for run in runs:
        for rec in b.read_requests(run.arm, run.restart).records:
            assert rec.error is None and rec.token_source == "usage"
            assert rec.completion_tokens == b.manifest.plan.max_tokens
    report = check_paths([bundle])
    assert len(report.runs) == 6 and report.findings == []
    for run in report.runs:
        assert (run.engine, run.version, run.platform) == ("vllm", "0.32.0", "cpu")
        assert run.capture.resolved == "NONE"
        spec = (run.spec.enabled, run.spec.method, run.spec.num_draft_tokens)
        assert spec == (
            (True, "ngram", 3) if run.label.startswith("ngram") else (False, None, None)
        )
    a = analyse(b)
    arm = next(x for x in a.arms if x.id == "ngram-k3")
    for w in arm.workloads:
        if w.workload == "all":
            continue
        assert {r.acceptance_source for r in w.restarts} == {"metrics around the workload"}
        assert all(1.0 < (r.acceptance_length or 0) < 4.0 for r in w.restarts)
    # Drafts accepted (2.25 and 2.51 tokens per step), yet slower on code (0.40×), matched
    # to the baseline by the launches; on its own variance (2 df at 3 restarts) neither
    # workload is decided (issue 45: a LOSS only while the variance was moderated).
    by = {c.workload: c for c in a.comparisons if c.kind == "spec"}
    assert all(c.baseline == "base" and c.matched for c in by.values())
    assert (by["code"].verdict, by["prose"].verdict) == ("INCONCLUSIVE", "INCONCLUSIVE")
    assert by["code"].ratio < 0.5 and by["code"].lean == "slower"
    assert (a.equivalence[0].n_prompts, a.equivalence[0].n_identical) == (24, 19)
