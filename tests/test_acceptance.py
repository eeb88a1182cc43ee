"""diagnostic.analyse.acceptance on real /metrics snapshots and server logs."""

from __future__ import annotations

from pathlib import Path

import pytest
from analyse_bundles import H200, REAL_RUNS

from diagnostic.analyse.acceptance import acceptance_from_texts, log_acceptance_length
from diagnostic.engines.metrics import parse_spec_counters

LLAMACPP = REAL_RUNS / "llamacpp-cpu"


def _read(path: Path) -> str:
    return path.read_text()


def test_vllm_ngram3_deltas_match_the_counters() -> None:
    run = H200 / "ngram3"
    acc = acceptance_from_texts(
        _read(run / "metrics_after.prom"), _read(run / "metrics_before.prom"), None
    )
    assert acc is not None and acc.source == "metrics" and acc.engine_prefix == "vllm"
    # metrics_before holds zeros, metrics_after 2176 drafts, 6460 accepted of 6460 drafted.
    assert (acc.drafts, acc.accepted_tokens, acc.draft_tokens) == (2176, 6460, 6460)
    assert acc.mean_acceptance_length == pytest.approx(1 + 6460 / 2176)
    assert acc.acceptance_rate == 1.0
    assert [p.cumulative for p in acc.per_position] == pytest.approx([1.0, 1.0, 2108 / 2176])
    assert acc.alpha_hat == pytest.approx(6460 / (6460 + 2176 - 2108))


def test_vllm_log_agrees_with_the_counters() -> None:
    run = H200 / "ngram3"
    from_log = log_acceptance_length(_read(run / "server.log"))
    assert from_log == pytest.approx(3.97, abs=0.01)  # README: mean acceptance length 3.97


def test_baseline_without_speculation_has_no_acceptance() -> None:
    run = H200 / "base"
    acc = acceptance_from_texts(
        _read(run / "metrics_after.prom"),
        _read(run / "metrics_before.prom"),
        _read(run / "server.log"),
    )
    assert acc is None


def test_llamacpp_counters_with_prefix() -> None:
    text = _read(LLAMACPP / "ls_ngram_k4_metrics.txt")
    counters = parse_spec_counters(text)
    assert counters.engine == "llamacpp"
    c = counters
    assert (c.num_drafts, c.num_draft_tokens, c.num_accepted_tokens) == (378, 1506, 912)
    assert counters.accepted_per_pos == [258, 246, 222, 186]
    acc = acceptance_from_texts(text, None, _read(LLAMACPP / "server_ngram_k4.log"))
    assert acc is not None
    assert acc.mean_acceptance_length == pytest.approx(1 + 912 / 378)
    # The per-position counters add up to the accepted total: 1 + Σ a_i is the same length.
    assert 1 + sum(p.cumulative for p in acc.per_position) == pytest.approx(
        acc.mean_acceptance_length
    )
    assert acc.log_mean_acceptance_length is not None


def test_llamacpp_without_speculation_reports_zero_drafts() -> None:
    acc = acceptance_from_texts(_read(LLAMACPP / "ls_k0_metrics.txt"), None, None)
    assert acc is not None and acc.drafts == 0 and acc.mean_acceptance_length is None


def test_counter_reset_uses_the_after_snapshot() -> None:
    after = "vllm:spec_decode_num_drafts_total 10\nvllm:spec_decode_num_accepted_tokens_total 20\n"
    before = "vllm:spec_decode_num_drafts_total 50\nvllm:spec_decode_num_accepted_tokens_total 90\n"
    acc = acceptance_from_texts(after, before, None)
    assert acc is not None and acc.mean_acceptance_length == pytest.approx(3.0)


def test_sglang_gauge() -> None:
    text = '# TYPE sglang:spec_accept_length gauge\nsglang:spec_accept_length{model_name="m"} 2.9\n'
    acc = acceptance_from_texts(text, None, None)
    assert acc is not None and acc.engine_prefix == "sglang" and acc.mean_acceptance_length == 2.9


def test_sglang_log_accept_len() -> None:
    log = (
        "[2025-05-02 16:13:35 TP0] Decode batch. #running-req: 1, #token: 300, token usage: 0.01, "
        "accept len: 2.50, accept rate: 0.50, cuda graph: True, gen throughput (token/s): 200\n"
        "[2025-05-02 16:13:36 TP0] Decode batch. #running-req: 1, #token: 340, token usage: 0.01, "
        "accept len: 3.50, accept rate: 0.80, cuda graph: True, gen throughput (token/s): 250\n"
    )
    assert log_acceptance_length(log) == pytest.approx(3.0)
