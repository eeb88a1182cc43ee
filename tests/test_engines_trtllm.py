"""diagnostic.engines.trtllm: TensorRT-LLM logs, options files and commands (the labelled
shapes are scored in tests/test_check_wild.py; here the rules of reading them)."""

from __future__ import annotations

from diagnostic.engines import detect_engine, parse_log

BANNER = "[TensorRT-LLM] TensorRT LLM version: 1.2.0rc1"
PREFIX = "[10/23/2025-05:41:18] [TRT-LLM] [I] "


def test_warmups_give_k_and_capture() -> None:
    """Generation-only warmups run per batch size with draft_len = 0 (target) and the max draft
    length: speculation on with k = the largest, graphs captured."""
    facts = parse_log(
        [
            BANNER,
            PREFIX + "Using LLM with PyTorch backend",
            PREFIX + "Creating CUDA graph instances for 2 batch sizes.",
            PREFIX + "Run generation-only CUDA graph warmup for batch size=2, draft_len=0",
            PREFIX + "Run generation-only CUDA graph warmup for batch size=2, draft_len=4",
            "INFO:     Application startup complete.",
        ]
    )
    assert (facts.engine, facts.version, facts.platform) == ("trtllm", "1.2.0rc1", "cuda")
    assert (facts.spec.enabled, facts.spec.num_draft_tokens) == (True, 4)
    assert facts.spec.method is None and "speculation method" in " ".join(facts.unread)
    assert (facts.capture.resolved, facts.model_runner) == ("CAPTURED", "pytorch")


def test_started_server_without_warmups_runs_without_graphs() -> None:
    facts = parse_log(
        [BANNER, PREFIX + "max_seq_len=8224", "INFO:     Application startup complete."]
    )
    assert facts.capture.resolved == "NONE"
    assert "without a CUDA-graph warmup" in facts.capture.reason


def test_options_configure_but_do_not_resolve() -> None:
    """An options file says what was configured; only `cuda_graph_config: null` disables."""
    on = parse_log(["cuda_graph_config:", "  enable_padding: true", "decoding_type: MTP"])
    assert (on.capture.configured, on.capture.resolved) == ("CAPTURED", "UNKNOWN")
    off = parse_log(["cuda_graph_config: null", "speculative_config:", "  decoding_type: Eagle3"])
    assert (off.capture.configured, off.capture.resolved) == ("NONE", "NONE")


def test_mtp_k_from_next_n_layers_unless_max_draft_len() -> None:
    facts = parse_log(
        ["speculative_config:", "  decoding_type: MTP", "  num_nextn_predict_layers: 1"]
    )
    assert (facts.spec.method, facts.spec.num_draft_tokens) == ("MTP", 1)
    both = parse_log(
        ["decoding_type: MTP", "num_nextn_predict_layers: 1", "max_draft_len: 3"], engine="trtllm"
    )
    assert both.spec.num_draft_tokens == 3


def test_command_with_an_unseen_options_file_leaves_speculation_unknown() -> None:
    unseen = parse_log(["trtllm-serve Qwen/Qwen3-8B --extra_llm_api_options extra.yaml"])
    assert unseen.spec.enabled is None
    plain = parse_log(["trtllm-serve Qwen/Qwen3-8B --backend pytorch --port 8000"])
    assert plain.spec.enabled is False and plain.model == "Qwen/Qwen3-8B"


def test_inline_options_that_do_not_parse_are_named() -> None:
    facts = parse_log(["trtllm-serve m --extra_llm_api_options='{\"speculative_config\": {'"])
    assert facts.engine == "trtllm"
    assert facts.not_understood and "not understood" in facts.notes[-1]


def test_detected_by_its_own_lines() -> None:
    assert detect_engine(b"[TensorRT-LLM] TensorRT-LLM version: 0.17.0.post1\n") == "trtllm"
    assert detect_engine(b"speculative_config:\n  decoding_type: Eagle\n") == "trtllm"


def test_an_options_file_shown_whole_says_speculation_is_off() -> None:
    """`--extra_llm_api_options FILE` with the file's keys in the text (cat): nothing hidden."""
    command = "$ trtllm-serve Qwen/Qwen3-8B --extra_llm_api_options opts.yml"
    shown = ["$ cat opts.yml", "max_batch_size: 1", "kv_cache_config:", "  x: 0.8", command]
    assert parse_log(shown).spec.enabled is False
    assert parse_log([command]).spec.enabled is None  # the file is not in the text
    other = ["config.pbtxt:", "max_batch_size: 64", command]  # keys of another file
    assert parse_log(other).spec.enabled is None
