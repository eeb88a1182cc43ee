"""vLLM 0.32.0 on a CPU, as recorded by scripts/real-vllm (tests/data/real-vllm-cpu-0.32/):
what 0.32 prints and serves differently from 0.26 on a GPU, read offline."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from diagnostic.engines import parse_log
from diagnostic.engines.endpoints import identify
from diagnostic.engines.metrics import parse_spec_counters, spec_delta
from diagnostic.logcheck.stage import check_paths

DATA = Path(__file__).parent / "data" / "real-vllm-cpu-0.32"
MODEL = "/root/.cache/diagnose/models/gemma-3-270m-hf-bf16"


@pytest.mark.parametrize(("name", "k"), [("base", None), ("ngram3", 3)])
def test_the_log_names_engine_version_platform_and_speculation(name: str, k: int | None) -> None:
    facts = parse_log(DATA / f"{name}.log")
    assert (facts.engine, facts.version, facts.platform) == ("vllm", "0.32.0", "cpu")
    assert facts.model == MODEL
    assert facts.spec.enabled is (k is not None)
    assert facts.spec.num_draft_tokens == k
    assert facts.spec.method == ("ngram" if k else None)
    # The CPU has no CUDA graphs: NONE, and the reason says why (not "before capture").
    assert (facts.capture.configured, facts.capture.resolved) == ("NONE", "NONE")
    assert "CPU" in facts.capture.reason and "before CUDA-graph capture" not in facts.capture.reason


@pytest.mark.parametrize("name", ["base", "ngram3"])
def test_v2_wants_triton_on_every_cpu_run_not_because_of_speculation(name: str) -> None:
    facts = parse_log(DATA / f"{name}.log")
    fallback = facts.runner_fallback
    assert facts.model_runner == "V1" and fallback is not None
    assert fallback.unsupported == ["Triton"] and fallback.by_speculation is False
    assert "Model Runner V2 requires Triton" in fallback.evidence.text


@pytest.mark.parametrize("name", ["base", "ngram3"])
def test_an_advice_naming_a_flag_is_no_launch_command(name: str) -> None:
    """0.32 logs 'Restart vllm serve with --enable-scale-out to enable them.': read as a
    command it gave requested {'enable-scale-out': 'to'}."""
    facts = parse_log(DATA / f"{name}.log")
    assert "enable-scale-out" not in facts.requested
    assert facts.requested["enforce_eager"] is True and facts.requested["max_num_seqs"] == 4
    assert not any("Scale-out" in e.text for e in facts.spec_evidence)


def test_ngram_acceptance_lines_are_read() -> None:
    facts = parse_log(DATA / "ngram3.log")
    assert len(facts.acceptance) == 6
    first = facts.acceptance[0]
    assert first.mean_acceptance_length == pytest.approx(2.45)
    assert first.per_position == pytest.approx([0.636, 0.455, 0.364])


def test_check_pairs_the_two_runs_without_a_false_finding(tmp_path: Path) -> None:
    report = check_paths([DATA / "base.log", DATA / "ngram3.log"])
    assert {r.platform for r in report.runs} == {"cpu"}
    # Both runs fall back alike, no graph can be lost on a CPU, and the CPU platform turns
    # async scheduling off for the baseline too ("Async scheduling not supported with
    # ngram-based speculative decoding" is in the n-gram log only): nothing to report.
    assert report.findings == []


def test_metrics_with_created_gauges_give_the_workloads_acceptance() -> None:
    before = parse_spec_counters((DATA / "ngram3-code-before.prom").read_text())
    after = parse_spec_counters((DATA / "ngram3-code-after.prom").read_text())
    assert after.engine == "vllm" and after.num_drafts == 27.0  # not the _created timestamps
    delta = spec_delta(before, after)
    assert (delta.num_drafts, delta.num_draft_tokens, delta.num_accepted_tokens) == (17, 51, 8)
    assert delta.accepted_per_pos == [4.0, 2.0, 2.0]
    assert delta.mean_acceptance_length == pytest.approx(1 + 8 / 17)
    assert after.decode_requests == 5.0 and after.decode_time_s == pytest.approx(28.5948, 1e-4)


def test_endpoints_name_the_engine_and_version() -> None:
    answers = json.loads((DATA / "endpoints.json").read_text())
    found = identify(answers)
    assert (found.engine.name, found.engine.version, found.model) == ("vllm", "0.32.0", MODEL)


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["start", "--ngram", "x"], "--ngram takes a draft length 1-99, not 'x'"),
        (["start", "--port", "80a"], "bad port: 80a"),
        (["start", "--threads"], "unknown option: --threads (see --help)"),
        (["install", "now"], "install takes no options"),
        (["serve"], "unknown command: serve (see --help)"),
    ],
)
def test_real_vllm_refuses_bad_options_before_installing(args: list[str], said: str) -> None:
    script = Path(__file__).parents[1] / "scripts" / "real-vllm"
    done = subprocess.run([str(script), *args], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and f"real-vllm: error: {said}" in done.stderr
