"""A live SGLang 0.5.17 as diagnose met it: its answers recorded on the H200 and the sample.

tests/data/sglang-live-0.5.17/ holds what one NGRAM server (3 drafts, Gemma 3 270M, real
weights) answered on 2026-12-03, recorded by scripts/gpu-sglang-sweep: /server_info before and
after the requests, /v1/models, /metrics before and after, a streamed /v1/completions with
usage, /generate with its meta_info, a chat completion (refused: a base model has no chat
template) and the server's log. samples/sglang-h200-gemma3/ is the sweep recorded after it.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from diagnostic.analyse.acceptance import acceptance_from_texts
from diagnostic.cli import main
from diagnostic.engines import parse_log
from diagnostic.engines.endpoints import identify
from diagnostic.engines.metrics import parse_spec_counters, spec_delta
from diagnostic.logcheck.stage import check_paths
from diagnostic.measure.client.options import ClientOptions
from diagnostic.measure.client.sse import new_stream

LIVE = Path(__file__).parent / "data" / "sglang-live-0.5.17"
SAMPLE = Path(__file__).resolve().parent.parent / "samples" / "sglang-h200-gemma3"


def _json(name: str) -> object:
    return json.loads((LIVE / name).read_text(encoding="utf-8"))


def test_fingerprint_from_the_live_server_info() -> None:
    found = identify(
        {"/server_info": _json("server_info.json"), "/v1/models": _json("models.json")}
    )
    assert (found.engine.name, found.engine.version) == ("sglang", "0.5.17")
    args = found.server_args
    assert args["speculative_algorithm"] == "NGRAM"
    assert args["speculative_num_draft_tokens"] == 4
    assert args["disable_cuda_graph"] is False


def test_streamed_completion_usage_counts_the_tokens() -> None:
    stream = new_stream(ClientOptions(base_url="http://x", max_tokens=48), t_send=0.0)
    for i, line in enumerate((LIVE / "completions-stream.txt").read_bytes().splitlines()):
        stream.feed(line + b"\n", now=0.01 * (i + 1))
    stream.close(now=1.0)
    assert stream.done
    assert stream.usage is not None and stream.usage["completion_tokens"] == 48
    assert len(stream.chunk_times) > 1


def test_metrics_counters_give_acceptance_sglang_would_give() -> None:
    """Between the two snapshots the server served a streamed completion (48 tokens), /generate
    (48) and a streamed /generate (32); /generate's own meta_info says 12 verify passes for its
    48 tokens and 36 accepted drafts (tokens − passes): the counters follow the same rule."""
    before = parse_spec_counters((LIVE / "metrics-before.txt").read_text(encoding="utf-8"))
    after = parse_spec_counters((LIVE / "metrics-after.txt").read_text(encoding="utf-8"))
    assert after.engine == "sglang" and after.draft_tokens_per_pass == 4
    delta = spec_delta(before, after)
    assert after.generation_tokens is not None and before.generation_tokens is not None
    tokens = after.generation_tokens - before.generation_tokens
    assert tokens == 48 + 48 + 32
    assert delta.num_drafts is not None and delta.num_drafts > 0
    assert delta.num_accepted_tokens == tokens - delta.num_drafts
    assert delta.num_draft_tokens == delta.num_drafts * 3
    meta = _json("generate.json")["meta_info"]  # type: ignore[index]
    assert meta["spec_num_correct_drafts"] == meta["completion_tokens"] - meta["spec_verify_ct"]
    assert meta["spec_num_proposed_drafts"] == meta["spec_verify_ct"] * 3


def test_the_live_log_reads_as_ngram_with_three_drafts_on_cuda() -> None:
    facts = parse_log(str(LIVE / "server.log"))
    assert facts.engine == "sglang" and facts.platform == "cuda"
    assert (facts.spec.enabled, facts.spec.method, facts.spec.num_draft_tokens) == (
        True,
        "NGRAM",
        4,
    )
    assert facts.capture.resolved == "CAPTURED"
    assert "target verify" in (facts.capture.reason or "")


@pytest.fixture(scope="module")
def sample_check(tmp_path_factory: pytest.TempPathFactory) -> object:
    bundle = tmp_path_factory.mktemp("sglang") / "bundle"
    shutil.copytree(SAMPLE, bundle)
    return check_paths([bundle], write=False)


def test_the_sample_check_names_the_wrong_flag_only_where_typed(sample_check: object) -> None:
    report = sample_check
    run_of = {r.path: r.run_id for r in report.runs}  # type: ignore[attr-defined]
    flagged = {
        run_of[finding.run]
        for finding in report.findings  # type: ignore[attr-defined]
        if finding.rule == "sglang-eagle-with-eagle3-drafter"
    }
    assert flagged == {f"eagle-flag-k3-r{i}" for i in range(3)}
    by_run = {r.run_id: r for r in report.runs}  # type: ignore[attr-defined]
    for i in range(3):
        wrong, right = by_run[f"eagle-flag-k3-r{i}"], by_run[f"eagle3-head-k3-r{i}"]
        # the head's path does not say EAGLE3: its architecture comes from the log
        assert wrong.drafter_architecture == right.drafter_architecture == "LlamaForCausalLMEagle3"
        assert (wrong.spec.method, right.spec.method) == ("EAGLE", "EAGLE3")
        assert by_run[f"base-r{i}"].spec.enabled is False
        assert by_run[f"ngram-k3-r{i}"].spec.method == "NGRAM"
    for run in report.runs:  # type: ignore[attr-defined]
        assert (run.engine, run.platform, run.capture.resolved) == ("sglang", "cuda", "CAPTURED")


def test_the_sample_acceptance_per_workload_excludes_warm_ups() -> None:
    """The snapshots around each workload's measured requests give its acceptance; their
    generation-token delta is exactly the measured requests' tokens from usage."""
    run = SAMPLE / "runs" / "ngram-k3-r0"
    records = [json.loads(line) for line in (run / "requests.jsonl").read_text().splitlines()]
    for workload in ("code", "prose"):
        after = (run / f"metrics_{workload}_after.prom").read_text(encoding="utf-8")
        before = (run / f"metrics_{workload}_before.prom").read_text(encoding="utf-8")
        counted = parse_spec_counters(after).generation_tokens
        base = parse_spec_counters(before).generation_tokens
        assert counted is not None and base is not None
        measured = sum(
            r["completion_tokens"] for r in records if r["workload"] == workload and not r["warmup"]
        )
        assert counted - base == measured
        acceptance = acceptance_from_texts(after, before)
        assert acceptance is not None and acceptance.mean_acceptance_length is not None
        assert 1.0 < acceptance.mean_acceptance_length <= 4.0


def test_the_sample_was_sealed_as_each_run_ended() -> None:
    """The first sample recorded with seals: verify proves every run unchanged."""
    result = CliRunner().invoke(main, ["verify", str(SAMPLE)])
    assert result.exit_code == 0, result.output
    assert "OK   seals     12 runs sealed as they ended" in result.output
    assert "OK   findings" in result.output
