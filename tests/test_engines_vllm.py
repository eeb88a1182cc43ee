"""diagnostic.engines.vllm: real vLLM 0.26 logs (golden) and written cases for V0, V1 and V2."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from diagnostic.engines import parse_log, vllm
from tests.engine_logs import assert_facts, fixture_cases, real_cases

CFG = (
    "(EngineCore pid=1) INFO 01-01 00:00:00 [core.py:1] Initializing a V1 LLM engine (v0.11.0) "
    "with config: model='m', speculative_config={spec}, tensor_parallel_size=1, "
    'enforce_eager=False, compilation_config={{"cudagraph_mode":{mode}}}'
)
FINISHED = (
    "(EngineCore pid=1) INFO 01-01 00:00:09 [gpu_model_runner.py:9] "
    "Graph capturing finished in 3 secs, took 0.40 GiB"
)
READY = (
    "(APIServer pid=2) INFO 01-01 00:00:10 [api_server.py:1] Starting vLLM server on http://h:8000"
)


@pytest.mark.parametrize(("log", "expected"), real_cases("h200-vllm"))
def test_real_logs_golden(log: Path, expected: dict[str, Any]) -> None:
    assert_facts(parse_log(log), expected)


@pytest.mark.parametrize(("log", "expected"), fixture_cases("vllm-"))
def test_written_cases(log: Path, expected: dict[str, Any]) -> None:
    assert_facts(parse_log(log), expected)


def test_config_line_alone_is_not_the_resolved_mode() -> None:
    """FULL_AND_PIECEWISE in the config, bars only PIECEWISE: what happened wins."""
    facts = parse_log(
        [
            CFG.format(spec="None", mode="[2,1]"),
            "(EngineCore pid=1) \rCapturing CUDA graphs (mixed prefill-decode, PIECEWISE): "
            "100%|██████████| 51/51 [00:01<00:00, 40.00it/s]",
            FINISHED,
        ]
    )
    assert facts.capture.configured == "FULL_AND_PIECEWISE"
    assert facts.capture.resolved == "PIECEWISE"


@pytest.mark.parametrize(
    ("mode", "name"),
    [
        ("0", "NONE"),
        ("1", "PIECEWISE"),
        ("2", "FULL"),
        ("[2,0]", "FULL_DECODE_ONLY"),
        ("null", None),
    ],
)
def test_configured_mode_json_numbers(mode: str, name: str | None) -> None:
    facts = parse_log([CFG.format(spec="None", mode=mode)])
    assert facts.capture.configured == name


def test_v2_single_full_bar_takes_the_configured_full_mode() -> None:
    lines = [
        CFG.format(spec="None", mode="2"),
        "(EngineCore pid=1) \rCapturing CUDA graphs (FULL): 100%|██████████| 51/51 [00:01<00:00]",
        FINISHED,
    ]
    assert parse_log(lines).capture.resolved == "FULL"


def test_override_to_none_without_capture_is_none() -> None:
    facts = parse_log(
        [
            CFG.format(spec="None", mode="[2,1]"),
            "(EngineCore pid=1) WARNING 01-01 00:00:01 [vllm.py:9] Overriding cudagraph_mode "
            "from FULL_AND_PIECEWISE to NONE for pooling models",
            READY,
        ]
    )
    assert facts.capture.resolved == "NONE"
    assert [e.line for e in facts.fallbacks] == [2]


def test_started_engine_without_capture_lines_is_none() -> None:
    facts = parse_log([CFG.format(spec="None", mode="[2,1]"), READY])
    assert facts.capture.resolved == "NONE"
    assert "started engine" in facts.capture.reason


def test_bars_without_finish_in_a_dead_log_are_unknown() -> None:
    facts = parse_log(
        [
            CFG.format(spec="None", mode="[2,1]"),
            "(EngineCore pid=1) \rCapturing CUDA graphs (PIECEWISE):  20%|██        | 10/51",
        ]
    )
    assert facts.capture.resolved == "UNKNOWN"
    assert "the log ends before it finished" in facts.capture.reason
    assert "more bars could have followed" in facts.capture.reason


def test_two_processes_written_into_one_line_are_split() -> None:
    """A tqdm bar without newline, then another process's record on the same line."""
    facts = parse_log(
        [
            CFG.format(spec="None", mode="[2,1]"),
            "(Worker_TP0 pid=5) \rCapturing CUDA graphs (mixed prefill-decode, PIECEWISE): 100%|█| "
            "51/51(Worker_TP1 pid=6) INFO 01-01 00:00:09 [gpu_model_runner.py:9] Graph capturing "
            "finished in 3 secs, took 0.40 GiB",
            "(Worker_TP0 pid=5) \rCapturing CUDA graphs (decode, FULL): 100%|█| 35/35",
            FINISHED.replace("EngineCore pid=1", "Worker_TP0 pid=5"),
        ]
    )
    assert facts.workers == ["Worker_TP0 pid=5", "Worker_TP1 pid=6"]
    assert facts.capture.per_worker == {
        "Worker_TP0 pid=5": "FULL_AND_PIECEWISE",
        "Worker_TP1 pid=6": "FULL_AND_PIECEWISE",
    }
    assert facts.capture.resolved == "FULL_AND_PIECEWISE"


def test_old_metrics_format_mean_recomputed_with_bonus_token() -> None:
    """0.8.5 printed the rate first and a mean without the bonus; 1 + k * A / D fixes it."""
    facts = parse_log(
        [
            CFG.format(
                spec="SpeculativeConfig(method='eagle', model='d', num_spec_tokens=2)", mode="1"
            ),
            "(APIServer pid=2) INFO 01-01 00:01:00 [metrics.py:9] SpecDecoding metrics: Draft "
            "acceptance rate: 50.0%, Mean acceptance length: 1.00, Accepted: 500 tokens, Drafted: "
            "1000 tokens, Per-position acceptance rate: 0.600, 0.400",
        ]
    )
    sample = facts.acceptance[0]
    assert sample.mean_acceptance_length == pytest.approx(2.0)
    assert sample.accept_rate == pytest.approx(0.5)


def test_wrapped_settings_line_helpers() -> None:
    assert vllm.wants_more("INFO x with config: model='m', speculative_config=SpeculativeConfig(")
    assert not vllm.wants_more("INFO x with config: model='m', speculative_config=None")
    assert vllm.continues("DeepSeek-V3', num_spec_tokens=1)")
    assert not vllm.continues("(EngineCore pid=3) INFO 01-01 00:00:00 [a.py:1] next record")


def test_evidence_of_a_long_config_line_shows_the_mode() -> None:
    facts = parse_log(
        [CFG.format(spec="None", mode="[2,1]").replace("model='m'", "x=" + "a" * 900)]
    )
    assert "cudagraph_mode" in facts.capture.evidence[0].text
    assert len(facts.capture.evidence[0].text) < 400


def test_engine_line_without_its_config_marker_does_not_crash() -> None:
    # Found by hypothesis: a mutated engine line whose "with config:" lost its colon.
    line = (
        "(EngineCore_DP0 pid=630) INFO 11-02 10:00:05 [core.py:93] Initializing a V1 LLM "
        "engine (v0.13.0) with config model='deepseek-ai/DeepSeek-V3', speculative_config="
    )
    facts = parse_log([line])
    assert facts.engine == "vllm"


@pytest.mark.parametrize(
    ("error", "method"),
    [
        ("ValueError: Model Runner V2 does not yet support: ngram", "ngram"),
        ("ValueError: Model Runner V2 does not yet support: speculative method 'mtp'", "mtp"),
    ],
)
def test_a_forced_v2_error_names_the_speculation_it_refused(error: str, method: str) -> None:
    """Run forced onto Model Runner V2: the error carries the fact, and it is no fallback."""
    facts = parse_log([error], engine="vllm")
    assert (facts.spec.enabled, facts.spec.method) == (True, method)
    assert facts.runner_fallback is None


@pytest.mark.parametrize(
    ("written", "version"), [("qwen3_next_mtp", None), ("deepseek_mtp", "0.9.2")]
)
def test_model_specific_mtp_names_are_reported_as_the_engine_resolves_them(
    written: str, version: str | None
) -> None:
    """Issue 47: vLLM 0.10 and later run every `*_mtp` method as `mtp`; 0.9 kept the name."""
    config = f'{{"method": "{written}", "num_speculative_tokens": 2}}'
    lines = [f"vllm serve m --speculative-config '{config}'"]
    if version:
        lines.insert(0, f"INFO 01-01 00:00:00 [api_server.py:1] vLLM API server version {version}")
    facts = parse_log(lines)
    assert facts.spec.method == ("mtp" if version is None else written)


def test_ascend_platform_line_sets_the_graph_mode() -> None:
    """vllm-ascend runs a requested FULL as FULL_DECODE_ONLY and says so; nothing else needed."""
    facts = parse_log(
        [
            "INFO 01-26 02:10:50 [utils.py:261] non-default args: {'model': 'm', "
            "'compilation_config': {'cudagraph_mode': 'FULL'}}",
            "INFO 01-26 02:10:54 [platform.py:279] FULL_DECODE_ONLY compilation enabled on NPU. "
            "use_inductor not supported - using only ACL Graph mode",
        ]
    )
    assert (facts.platform, facts.capture.resolved) == ("npu", "FULL_DECODE_ONLY")


def test_graph_capturing_finished_alone_is_captured() -> None:
    line = (
        "(EngineCore_DP0 pid=9) INFO 02-10 11:40:02 [gpu_model_runner.py:4410] "
        "Graph capturing finished in 14 secs, took 0.61 GiB"
    )
    capture = parse_log([line]).capture
    assert capture.resolved == "CAPTURED"
    assert "names no mode" in capture.reason


def test_offline_api_speculative_config() -> None:
    facts = parse_log(
        [
            ">>> from vllm import LLM",
            '>>> llm = LLM(model="m", '
            'speculative_config={"method": "ngram", "num_speculative_tokens": 5})',
        ]
    )
    assert (facts.engine, facts.spec.method, facts.spec.num_draft_tokens) == ("vllm", "ngram", 5)


def test_a_lone_capture_finished_line_without_a_process_is_vllm() -> None:
    line = "INFO 08-21 10:00:00 [model_runner.py:1535] Graph capturing finished in 12 secs"
    facts = parse_log([line])
    assert (facts.engine, facts.capture.resolved) == ("vllm", "CAPTURED")


def test_graph_capturing_finished_without_any_prefix_is_recognised() -> None:
    """Issue 47: the bare line alone was 'nothing recognised' (exit 2)."""
    facts = parse_log(["Graph capturing finished in 5 secs, took 0.2 GiB"])
    assert (facts.engine, facts.capture.resolved) == ("vllm", "CAPTURED")


def test_sixth_round_spec_notices_prose_version_and_placeholder_json() -> None:
    """SpeculativeConfig's notices name the method; a version in words is the last resort; a
    placeholder in the JSON leaves the rest readable (issue 47's sixth round)."""
    alias = parse_log(
        [
            "WARNING 05-21 21:33:22 [speculative.py:355] method `deepseek_mtp` is deprecated and "
            "replaced with mtp."
        ]
    )
    assert (alias.spec.enabled, alias.spec.method) == (True, "mtp")
    layer = parse_log(
        [
            "(APIServer pid=1) WARNING 07-22 08:43:50 [speculative.py:709] Enabling "
            "num_speculative_tokens > 1 will run multiple times of forward on same MTP layer,which "
            "may result in lower acceptance rate"
        ]
    )
    assert (layer.spec.enabled, layer.spec.method, layer.spec.num_draft_tokens) == (
        True,
        "mtp",
        None,
    )
    prose = parse_log(
        [
            "I am on the vllm v0.11.0 docker image.",
            "vllm serve m --speculative-config "
            """'{"method": "eagle3", "model": "d", "num_speculative_tokens": 3}'""",
        ]
    )
    assert prose.version == "0.11.0"
    since = parse_log(
        [
            "(Worker_TP0 pid=1) INFO 06-21 23:53:39 [gpu_worker.py:523] CUDA graph memory "
            "profiling is enabled (default since v0.21.0).",
            "memory profiling differs since vLLM 0.21.0",
        ]
    )
    assert since.version is None
    changed = parse_log(["Fixed in vLLM 0.12.0, upgrading to vLLM 0.12.1 now; vs. vLLM 0.9.2"])
    assert changed.version is None
    placeholder = parse_log(
        [
            "`--tensor-parallel-size 8 --speculative-config "
            """'{"method":"mtp","num_speculative_tokens":K}'`."""
        ]
    )
    assert (placeholder.spec.enabled, placeholder.spec.method) == (True, "mtp")
    assert placeholder.spec.num_draft_tokens is None


def test_an_issue_body_pasted_as_html_and_commands_with_different_k() -> None:
    """Rendered HTML: the commands are in its code elements (entities unescaped); two pasted
    alternatives with different draft lengths leave k unknown."""
    facts = parse_log(
        [
            '<p>Common arguments:</p><pre><code class="language-bash">vllm serve /model \\',
            "  --max-num-seqs 64",
            '</code></pre><p>MTP1:</p><pre><code class="language-bash">--speculative-config '
            """'{"method":"mtp","num_speculative_tokens":1}'""",
            '</code></pre><p>MTP2:</p><pre><code class="language-bash">--speculative-config '
            """'{"method":"mtp","num_speculative_tokens":2}'""",
            "</code></pre><p>It fails at depth &gt;= 2.</p>",
        ]
    )
    assert (facts.spec.enabled, facts.spec.method, facts.spec.num_draft_tokens) == (
        True,
        "mtp",
        None,
    )
    assert any("different draft lengths (1, 2)" in n for n in facts.notes)
