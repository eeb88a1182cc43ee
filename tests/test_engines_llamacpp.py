"""diagnostic.engines.llamacpp: real llama-server CPU logs (golden) and written CUDA cases."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from diagnostic.engines import parse_log
from tests.engine_logs import assert_facts, fixture_cases, real_cases


@pytest.mark.parametrize(("log", "expected"), real_cases("llamacpp"))
def test_real_logs_golden(log: Path, expected: dict[str, Any]) -> None:
    assert_facts(parse_log(log), expected)


@pytest.mark.parametrize(("log", "expected"), fixture_cases("llamacpp-"))
def test_written_cases(log: Path, expected: dict[str, Any]) -> None:
    assert_facts(parse_log(log), expected)


def test_cpu_log_says_there_are_no_cuda_graphs(tmp_path: Path) -> None:
    """The verbose CPU log lists only a CPU device: NONE, and the reason says why."""
    facts = parse_log(real_cases("llamacpp-cpu__server_verbose")[0].values[0])
    assert facts.platform == "cpu"
    assert facts.capture.resolved == "NONE"
    assert "no CUDA graphs: the model runs on the CPU" in facts.capture.reason


def test_default_verbosity_cpu_log_is_unknown_and_says_graphs_reused_is_not_cuda() -> None:
    facts = parse_log(real_cases("llamacpp-cpu__server_k0")[0].values[0])
    assert facts.capture.resolved == "UNKNOWN"
    assert "graphs reused" in facts.capture.reason


def test_2026_per_position_line_belongs_to_its_request() -> None:
    facts = parse_log(
        [
            "0.00.001.000 I srv  llama_server: initializing ...",
            "0.01.848.529 I slot print_timing: id  0 | task 0 | draft acceptance = 0.50000 "
            "(    2 accepted /     4 generated), mean len =  2.00",
            "0.01.848.530 I slot print_timing: id  0 | task 0 |      acc per pos = (0.750, 0.250)",
            "0.01.848.531 I slot print_timing: id  0 | task 7 |      acc per pos = (0.100, 0.100)",
        ]
    )
    sample = facts.acceptance[0]
    assert (sample.mean_acceptance_length, sample.per_position) == (2.0, [0.75, 0.25])
    assert facts.spec.num_draft_tokens == 2
