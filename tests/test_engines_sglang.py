"""diagnostic.engines.sglang: written cases for SGLang 0.4–0.5 logs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from diagnostic.engines import parse_log, sglang
from tests.engine_logs import assert_facts, fixture_cases

ARGS = (
    "[2025-01-01 00:00:00] server_args=ServerArgs(model_path='m', tp_size=1, "
    "speculative_algorithm={alg}, speculative_draft_model_path=None, "
    "speculative_num_draft_tokens=None, disable_cuda_graph=False, device='cuda')"
)


@pytest.mark.parametrize(("log", "expected"), fixture_cases("sglang-"))
def test_written_cases(log: Path, expected: dict[str, Any]) -> None:
    assert_facts(parse_log(log), expected)


def test_spec_off_when_algorithm_is_none() -> None:
    facts = parse_log(
        [ARGS.format(alg="None"), "[2025-01-01 00:00:09] The server is fired up and ready to roll!"]
    )
    assert facts.engine == "sglang"
    assert facts.spec.enabled is False
    assert facts.capture.resolved == "NONE"
    assert "without any 'Capture cuda graph' line" in facts.capture.reason


def test_capture_begun_where_the_text_ends_is_captured() -> None:
    """Graphs were on and capture under way; nothing in the text says it failed."""
    facts = parse_log(
        [
            ARGS.format(alg="'EAGLE3'"),
            "[2025-01-01 00:00:05 TP0] Capture cuda graph begin. This can take up to minutes.",
        ]
    )
    assert facts.capture.resolved == "CAPTURED"
    assert facts.capture.per_worker == {"TP0": "CAPTURED"}
    assert "no failure" in facts.capture.reason


def test_capture_begun_then_failed_is_unknown() -> None:
    facts = parse_log(
        [
            ARGS.format(alg="'EAGLE3'"),
            "[2025-01-01 00:00:05 TP0] Capture cuda graph begin. This can take up to minutes.",
            "RuntimeError: Capture cuda graph failed: CUDA error: out of memory",
        ]
    )
    assert facts.capture.resolved == "UNKNOWN"
    assert "failed" in facts.capture.reason


def test_nightly_spelling_of_capture_end() -> None:
    facts = parse_log(
        [
            ARGS.format(alg="None"),
            "[2025-01-01 00:00:05 TP0] Capture target decode CUDA graph end. "
            "elapsed=16.40 s. mem usage=2.00 GB",
        ]
    )
    assert facts.capture.resolved == "CAPTURED"
    timing = facts.capture_timings[0]
    assert (timing.kind, timing.seconds, timing.memory_gib) == ("target-decode", 16.4, 2.0)


def test_decode_batch_without_capture_lines_still_shows_graphs() -> None:
    """A log that starts after start-up: the decode batches say graphs were used."""
    facts = parse_log(
        [
            "[2025-01-01 00:10:00 TP0] Decode batch. #running-req: 1, #token: 9, "
            "token usage: 0.00, cuda graph: True, gen throughput (token/s): 50.00, #queue-req: 0",
        ]
    )
    assert facts.engine == "sglang"
    assert facts.capture.resolved == "CAPTURED"


def test_wrapped_server_args_helpers() -> None:
    assert sglang.wants_more("[2025-01-01 00:00:00] server_args=ServerArgs(model_path='m', tp")
    assert sglang.continues("_size=1, dtype='auto')")
    assert not sglang.continues("[2025-01-01 00:00:01 TP0] next")


# SGLang 0.5.17's server_args line (shape of the H200 sample's logs, samples/sglang-h200-gemma3):
# the per-phase graph settings beside the deprecated disable_cuda_graph.
ARGS_0517 = (
    "[2026-12-03 06:17:45] server_args=ServerArgs(model_path='/m', tp_size=1, device='cuda', "
    "speculative_algorithm=None, cuda_graph_config=CudaGraphConfig(decode=PhaseConfig("
    "backend='{decode}', max_bs=8, bs=[1, 2, 4, 8]), prefill=PhaseConfig(backend='breakable', "
    "max_bs=8192)), cuda_graph_backend_decode={flag}, disable_decode_cuda_graph=False, "
    "disable_cuda_graph=False)"
)
READY = "[2026-12-03 06:18:30] The server is fired up and ready to roll!"


@pytest.mark.parametrize(
    ("decode", "flag", "configured"),
    [
        ("full", "None", "CAPTURED"),
        ("disabled", "None", "NONE"),  # --cuda-graph-config '{"decode": {"backend": "disabled"}}'
        ("full", "'disabled'", "NONE"),  # --cuda-graph-backend-decode disabled, before folding
    ],
)
def test_0517_decode_backend_is_the_configured_capture(
    decode: str, flag: str, configured: str
) -> None:
    facts = parse_log([ARGS_0517.format(decode=decode, flag=flag), READY])
    assert facts.capture.configured == configured
    if configured == "NONE":
        assert facts.capture.resolved == "NONE"


@pytest.mark.parametrize(
    "flags",
    ["--disable-cuda-graph", "--disable-decode-cuda-graph", "--cuda-graph-backend-decode=disabled"],
)
def test_graphs_off_flags_of_a_launch_command(flags: str) -> None:
    facts = parse_log(
        [f"python -m sglang.launch_server --model-path /m --speculative-algorithm NGRAM {flags}"]
    )
    assert facts.capture.configured == "NONE"
    assert facts.spec.method == "NGRAM"


def test_a_lone_named_capture_begin_is_sglang_and_captured() -> None:
    """Issue 47: 0.5.x names the graph; the line alone is SGLang, capture under way."""
    line = (
        "[2026-01-01 00:00:05 TP0] Capture target decode cuda graph begin. "
        "This can take up to several minutes. avail mem=20.1 GB"
    )
    facts = parse_log([line])
    assert (facts.engine, facts.capture.resolved) == ("sglang", "CAPTURED")


def test_pip_list_rows_give_versions() -> None:
    assert parse_log(["Package  Version", "sglang   0.5.4.post1"], engine="sglang").version == (
        "0.5.4.post1"
    )
    vllm = parse_log(["Package    Version", "vllm       0.21.0", "vllm serve m"])
    assert (vllm.engine, vllm.version) == ("vllm", "0.21.0")


def test_a_traceback_after_capture_began_is_a_failed_capture() -> None:
    """Capture begun, then an exception before any end: graphs were on and capture failed."""
    begun = [
        "[2025-01-13 12:42:06 TP0] Capture cuda graph begin. This can take up to several minutes.",
    ]
    failed = [*begun, "[2025-01-13 12:42:09 TP0] Traceback (most recent call last):"]
    assert parse_log(begun).capture.resolved == "CAPTURED"
    assert parse_log(failed).capture.resolved == "UNKNOWN"


def test_the_image_before_the_program_when_docker_run_was_cut() -> None:
    facts = parse_log(
        [
            "lmsysorg/sglang:v0.5.15-cu130 python3 -m sglang.launch_server --model-path m "
            "--speculative-algorithm EAGLE --speculative-num-draft-tokens 4"
        ]
    )
    assert (facts.version, facts.spec.method, facts.spec.num_draft_tokens) == ("0.5.15", "EAGLE", 4)
