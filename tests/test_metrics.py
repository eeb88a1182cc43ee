"""engines/metrics.py: speculation counters from real /metrics texts and a real server."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from real_runs import REAL_RUNS as REAL

from diagnostic.engines.metrics import fetch_metrics, parse_spec_counters, spec_delta

VLLM = REAL / "h200-vllm-0.26"
LLAMACPP = REAL / "llamacpp-cpu"
ALL_TEXTS = sorted([*REAL.glob("h200-vllm-*/*/metrics_*.prom"), *LLAMACPP.glob("*metrics.txt")])


@pytest.mark.parametrize("path", ALL_TEXTS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_real_metrics_text_parses(path: Path) -> None:
    counters = parse_spec_counters(path.read_text())
    assert counters.engine in ("vllm", "llamacpp")
    assert counters.generation_tokens is not None


def test_vllm_ngram_delta_matches_the_server_log() -> None:
    before = parse_spec_counters((VLLM / "ngram3" / "metrics_before.prom").read_text())
    after = parse_spec_counters((VLLM / "ngram3" / "metrics_after.prom").read_text())
    assert len(after.accepted_per_pos) == 3  # k = 3
    delta = spec_delta(before, after)
    # The README of these runs (and the server log) report mean acceptance length 3.97 of 4.
    assert delta.mean_acceptance_length is not None
    assert round(delta.mean_acceptance_length, 2) == 3.97
    assert delta.acceptance_rate == pytest.approx(1.0) and not delta.reset


def test_vllm_without_speculation_has_no_counters() -> None:
    counters = parse_spec_counters((VLLM / "base" / "metrics_after.prom").read_text())
    assert counters.num_drafts is None and counters.accepted_per_pos == []
    assert spec_delta(counters, counters).mean_acceptance_length is None


def test_llamacpp_counters_add_up() -> None:
    counters = parse_spec_counters((LLAMACPP / "ls_ngram_k4_metrics.txt").read_text())
    assert (counters.num_drafts, counters.num_draft_tokens, counters.num_accepted_tokens) == (
        378,
        1506,
        912,
    )
    assert sum(counters.accepted_per_pos) == counters.num_accepted_tokens
    assert len(counters.accepted_per_pos) == 4


def test_sglang_gauges() -> None:
    text = (
        "# TYPE sglang:spec_accept_length gauge\n"
        'sglang:spec_accept_length{model_name="m"} 2.5\n'
        "# TYPE sglang:spec_accept_rate gauge\n"
        'sglang:spec_accept_rate{model_name="m"} 0.6\n'
    )
    counters = parse_spec_counters(text)
    assert (counters.engine, counters.accept_length, counters.accept_rate) == ("sglang", 2.5, 0.6)


def test_counters_sum_over_engines() -> None:
    text = (
        "# TYPE vllm:spec_decode_num_drafts counter\n"
        'vllm:spec_decode_num_drafts_total{engine="0"} 10\n'
        'vllm:spec_decode_num_drafts_total{engine="1"} 5\n'
    )
    assert parse_spec_counters(text).num_drafts == 15


def test_counter_reset_is_flagged() -> None:
    after = parse_spec_counters((LLAMACPP / "ls_ngram_k4_metrics.txt").read_text())
    zero = after.model_copy(update={"num_drafts": 1.0, "num_accepted_tokens": 0.0})
    assert spec_delta(after, zero).reset


def transport(status: int, text: str) -> httpx.MockTransport:
    return httpx.MockTransport(lambda request: httpx.Response(status, text=text))


def test_fetch_reports_missing_and_broken_metrics() -> None:
    with httpx.Client(base_url="http://x", transport=transport(404, "")) as client:
        snap = fetch_metrics(client)
    assert snap.text is None and snap.error and "--metrics" in snap.error
    with httpx.Client(base_url="http://x", transport=transport(200, "a b c d e\n")) as client:
        snap = fetch_metrics(client)
    # Not kept: the bundle's reader refuses what is no Prometheus text.
    assert snap.text is None and snap.counters is None and snap.error
    assert "not Prometheus text" in snap.error


@pytest.mark.engine
def test_real_server_counters_move_with_speculation(llama_server_ngram: str) -> None:
    with httpx.Client(base_url=llama_server_ngram, timeout=60) as client:
        before = fetch_metrics(client)
        # Code that repeats itself: n-gram drafts find matches (a b a b… yields none).
        prompt = "def add(a, b):\n    return a + b\n\ndef sub(a, b):\n    return a - b\n\n"
        body = {"prompt": prompt, "max_tokens": 16, "temperature": 0}
        client.post("/v1/completions", json=body).raise_for_status()
        after = fetch_metrics(client)
    assert before.counters and after.counters and after.text
    assert after.counters.engine == "llamacpp"
    delta = spec_delta(before.counters, after.counters)
    assert delta.num_drafts and delta.num_drafts > 0 and not delta.reset
    assert after.text.startswith("# HELP")  # kept verbatim
