"""diagnostic.analyse.engine_timing: the client's decode throughput against the engine's clock."""

from __future__ import annotations

from pathlib import Path

import pytest

from diagnostic.analyse.engine_timing import LLAMACPP_SOURCE, VLLM_SOURCE, engine_timing
from diagnostic.bundle.store import Bundle
from diagnostic.engines.metrics import parse_spec_counters
from tests.real_runs import REAL_RUNS

SAMPLES = Path(__file__).resolve().parent.parent / "samples"


def _run(bundle: str, arm: str, restart: int = 0) -> tuple[Bundle, list, str, str]:
    b = Bundle.open(SAMPLES / bundle)
    records = b.read_requests(arm, restart).records
    after = b.run_file(arm, restart, "metrics_after.prom").read_text()
    before = b.run_file(arm, restart, "metrics_before.prom").read_text()
    return b, records, after, before


def test_vllm_decode_time_histogram_is_parsed_from_a_real_scrape() -> None:
    text = (REAL_RUNS / "h200-vllm-0.26" / "base" / "metrics_after.prom").read_text()
    c = parse_spec_counters(text)
    assert c.decode_time_s == pytest.approx(14.75361150600014)
    assert c.decode_requests == 34 and c.generation_tokens == 8704


@pytest.mark.parametrize("arm", ["base", "eager", "ngram-k3", "ngram-k7"])
def test_client_agrees_with_vllms_own_decode_time_on_the_h200(arm: str) -> None:
    _, records, after, before = _run("vllm-h200-validation", arm)
    t = engine_timing(records, after, before)
    assert t is not None and t.source == VLLM_SOURCE
    assert t.engine_requests == t.client_requests == 32  # warm-ups included: both sides
    assert t.engine_tokens == t.client_tokens == 32 * 128
    assert t.ratio == pytest.approx(1.0, abs=0.005)


def test_client_agrees_with_llamacpp_timings() -> None:
    b = Bundle.open(SAMPLES / "llamacpp-cpu-gemma3")
    run = b.runs()[0]
    records = b.read_requests(run.arm, run.restart).records
    t = engine_timing(records, None, None)
    assert t is not None and t.source == LLAMACPP_SOURCE
    # llama.cpp's own predicted_per_second is (predicted_n − 1) / predicted_ms.
    r = next(r for r in records if r.server_timings)
    timings = r.server_timings or {}
    own = (timings["predicted_n"] - 1) / timings["predicted_ms"] * 1000
    assert own == pytest.approx(timings["predicted_per_second"])
    assert t.ratio == pytest.approx(1.0, abs=0.005)


def test_no_engine_timing_without_figures_or_across_a_restart() -> None:
    _, records, after, before = _run("vllm-h200-validation", "base")
    assert engine_timing(records, None, None) is None  # vLLM without /metrics
    assert engine_timing(records, before, after) is None  # counters went down: a restart
    assert engine_timing(records, "not prometheus {", None) is None
    assert engine_timing([], after, before) is None
    assert engine_timing(records[:-1], after, before) is None  # not the same requests
    failed = [r.model_copy(update={"error": "HTTP 500"}) for r in records]
    assert engine_timing(failed, after, before) is None
