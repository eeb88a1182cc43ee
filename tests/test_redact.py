"""Redaction: a corpus of secret shapes is masked; ordinary facts of a run are kept."""

import json
import string
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

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
        "URL": f"http://{MASK}@h",  # a URL keeps no userinfo, not even the user
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


# -- issue 34: shapes the redactor did not know, by class; prose left alone ----------------

SHAPES = [
    json.loads(line)
    for line in (Path(__file__).parent / "data" / "secrets" / "shapes.jsonl")
    .read_text()
    .splitlines()
]


def test_the_new_corpus_has_over_a_hundred_shapes() -> None:
    assert len({c["shape"] for c in SHAPES}) >= 100


@pytest.mark.parametrize("case", SHAPES, ids=[c["shape"] for c in SHAPES])
def test_every_new_shape_is_masked_whole_and_line_by_line(case: dict[str, Any]) -> None:
    from diagnostic.bundle.redact import LineRedactor, redact_file_text

    whole = redact_file_text(case["text"])
    redactor = LineRedactor()
    lined = "".join(redactor.line(line) for line in case["text"].splitlines(keepends=True))
    for secret in case["secrets"]:
        assert secret not in whole, f"{case['shape']}: {secret[:20]}… left in a file"
        assert secret not in lined, f"{case['shape']}: {secret[:20]}… left in a live log"
    assert MASK in whole


@pytest.mark.parametrize(
    "text",
    [
        "token: CUDA graphs",
        "The key: speculation pays when acceptance is high",
        "password: we never store it, the server said",
        "Secret: patience and small batches",
        "--api-key is required when the server runs with auth",
        "Authorization is checked by the proxy",
        "author: Jane Doe",
        "PWD=/home/user",
        "max_tokens=256 bos_token_id=2 eos_token: </s>",
        "kv_cache_key=abc123def456 sort_key: priority",
        "SSL_KEYFILE=/etc/ssl/private/server.key",
        "key = value",
        "api_key: str = None",
        "token_ids: [1, 2, 3]",
        "Accept length 2.91 at k=3, token throughput 1234.5 tok/s",
        "INFO 05-01 12:00:00 [loader.py:123] Loading weights took 3.21 seconds",
    ],
)
def test_ordinary_words_after_secret_names_are_kept(text: str) -> None:
    assert redact_text(text) == text


WORDS = st.sampled_from(
    "graphs speculation decoding the draft model accepts tokens quickly CUDA NCCL Triton "  # noqa: SIM905
    "kernel batch prefill decode latency throughput server engine".split()
)
NAMES = st.sampled_from(["token", "key", "Token", "KEY", "api_key", "auth", "secret", "password"])


@given(name=NAMES, first=WORDS, rest=st.lists(WORDS, min_size=1, max_size=6))
def test_generated_prose_never_shows_a_mask_for_ordinary_words(
    name: str, first: str, rest: list[str]
) -> None:
    text = f"{name}: {first} {' '.join(rest)}."
    assert MASK not in redact_text(text), text


@given(
    value=st.text(alphabet=string.ascii_letters + string.digits + "!#%*_-", min_size=8, max_size=30)
)
def test_a_password_assigned_is_masked_whatever_it_is(value: str) -> None:
    for template in ("DB_PASS={v} run", "MYSQL_PWD={v}", "--db-pass={v}", 'password = "{v}"'):
        text = template.format(v=value)
        assert value not in redact_text(text), text


def test_long_runs_are_redacted_in_linear_time() -> None:
    # A 200,000-letter word, a base64-looking blob and a name without a value: each a pattern
    # that scanned quadratically once (a 100,000-character finish_reason hung collect).
    for text in ("a" * 200_000, "A1/+" * 50_000, "x" * 100_000 + "=1", "token" * 40_000):
        assert len(redact_text(text)) >= 6


def test_a_secret_split_over_two_lines_of_a_live_log_is_masked_after_the_cut() -> None:
    from diagnostic.bundle.redact import LineRedactor

    key = "hf_" + "Zq9vXw7Lk3Pm2Nb8Rt5Yc1Ud4Fg6Hj0Ka"
    redactor = LineRedactor()
    lines = [redactor.line(f"token printed as {key[:10]}\n"), redactor.line(f"{key[10:]} done\n")]
    assert key[10:] not in "".join(lines)  # the start (10 characters) was already written
    assert lines[1].endswith(" done\n")


def test_real_engine_logs_pass_redaction_unchanged() -> None:
    """No false positive on the recorded logs (benchmarks/redaction.py measures all of them,
    the samples' and the prose too: 0 lines changed of about 190,000)."""
    from real_runs import REAL_RUNS

    from diagnostic.bundle.redact import redact_file_text

    logs = Path(__file__).parent / "data" / "logs"
    paths = [*sorted(logs.rglob("*.log")), *sorted(REAL_RUNS.rglob("*.log"))]
    assert len(paths) > 10
    for path in paths:
        text = path.read_text(encoding="utf-8", errors="replace")
        changed = [line for line in text.splitlines() if redact_file_text(line) != line]
        assert changed == [], f"{path}: {changed[:3]}"
