"""Redaction: a corpus of secret shapes is masked; ordinary facts of a run are kept."""

import json
from pathlib import Path

import pytest

from diagnostic.bundle.redact import MASK, is_secret_name, redact_json, redact_mapping, redact_text

CORPUS = [
    json.loads(line)
    for line in (Path(__file__).parent / "data" / "secrets" / "corpus.jsonl")
    .read_text()
    .splitlines()
]


def test_corpus_is_large_enough() -> None:
    assert len(CORPUS) >= 20


@pytest.mark.parametrize("case", CORPUS, ids=[c["shape"] for c in CORPUS])
def test_secret_shapes_are_masked(case: dict[str, str]) -> None:
    out = redact_text(case["text"])
    assert case["secret"] not in out
    assert MASK in out


@pytest.mark.parametrize(
    "text",
    [
        "INFO non-default args: {'model': '/root/model', 'max_num_seqs': 8, 'seed': 0}",
        "speculative_config=SpeculativeConfig(method='ngram', num_spec_tokens=3)",
        '--speculative-config {"method":"ngram","num_speculative_tokens":3}',
        "python3 -m vllm.entrypoints.openai.api_server --model m --port 8000 --max-tokens 256",
        "TOKENIZERS_PARALLELISM=false CUDA_VISIBLE_DEVICES=0",
        "http://127.0.0.1:8000/v1/completions",
        "Decode batch, #running-req: 1, #token: 300, accept len: 2.91, cuda graph: True",
        "llama-server -m models/gemma.gguf --spec-draft-n-max 4 -c 4096",
    ],
)
def test_ordinary_facts_are_kept(text: str) -> None:
    assert redact_text(text) == text


def test_secret_names() -> None:
    for name in ("HF_TOKEN", "OPENAI_API_KEY", "DB_PASSWORD", "MY_SECRET", "api-key", "passwd"):
        assert is_secret_name(name)
    for name in (
        "max_tokens",
        "num_speculative_tokens",
        "TOKENIZERS_PARALLELISM",
        "token_source",
        "bos_token",
        "next_token",
        "PATH",
        "port",
    ):
        assert not is_secret_name(name)


def test_environment_values_masked_by_name() -> None:
    env = {"HF_TOKEN": "x", "MY_KEY": "y", "CUDA_VISIBLE_DEVICES": "0", "URL": "http://u:p@h"}
    assert redact_mapping(env) == {
        "HF_TOKEN": MASK,
        "MY_KEY": MASK,
        "CUDA_VISIBLE_DEVICES": "0",
        "URL": f"http://u:{MASK}@h",
    }


def test_json_values_masked_by_key_and_shape() -> None:
    value = {
        "api_key": "k",
        "args": ["--api-key", "v"],
        "nested": {"token": "t", "n": 3},
        "note": "hf_abcdefghijklmnopqrstuvwxyz",
        "empty_token": None,
    }
    out = redact_json(value)
    assert out["api_key"] == MASK and out["nested"] == {"token": MASK, "n": 3}
    assert "hf_" not in out["note"] and out["empty_token"] is None
