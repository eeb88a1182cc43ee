"""Free text (issue 46): every shape of tests/data/secrets/shapes.jsonl is masked (as a line
of a log, as a string, and where a server prints it: a /metrics label, a 500 error body, a
server-info answer), and no ordinary line of a real engine's log changes
(tests/data/secrets/ordinary.txt)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from diagnostic.bundle.detector import detected
from diagnostic.bundle.normalise import read
from diagnostic.bundle.redact import MASK, redact_file_text, redact_json, redact_text

DATA = Path(__file__).parent / "data" / "secrets"
SHAPES = [json.loads(line) for line in (DATA / "shapes.jsonl").read_text().splitlines()]
ORDINARY = [
    line.split("\t", 1)[1]
    for line in (DATA / "ordinary.txt").read_text(encoding="utf-8").splitlines()
    if not line.startswith("#")
]


def test_the_corpora_are_large_enough() -> None:
    assert len(SHAPES) >= 150
    assert len(ORDINARY) >= 100


@pytest.mark.parametrize("case", SHAPES, ids=[c["shape"] for c in SHAPES])
def test_every_shape_is_masked_in_a_file_and_in_a_string(case: dict[str, object]) -> None:
    for out in (redact_file_text(str(case["text"])), redact_text(str(case["text"]))):
        assert not [s for s in case["secrets"] if s in out], out  # type: ignore[attr-defined]


@pytest.mark.parametrize("case", SHAPES[::7], ids=[c["shape"] for c in SHAPES[::7]])
def test_shapes_inside_a_json_answer_are_masked(case: dict[str, object]) -> None:
    """A server-info answer or an error body quoting the text: JSON-escaped inside a string."""
    answer = {"detail": {"message": str(case["text"]), "code": 500}}
    out = json.dumps(redact_json(answer))
    assert not [s for s in case["secrets"] if s in out]  # type: ignore[attr-defined]


@pytest.mark.parametrize("line", ORDINARY)
def test_ordinary_lines_of_real_engines_are_kept(line: str) -> None:
    assert redact_file_text(line) == line


def test_a_secret_found_in_the_reading_is_masked_where_it_is_written() -> None:
    text = "\x1b[33mAPI_KEY\x1b[0m=\x1b[1mZx9Kq2vB7mN4pL8wR3tY\x1b[0m done"
    reading = read(text)
    assert reading.text == "API_KEY=Zx9Kq2vB7mN4pL8wR3tY done"
    out = redact_text(text)
    assert "Zx9Kq2vB7mN4pL8wR3tY" not in out and out.endswith("\x1b[0m done")
    assert read("pаsswоrd＝x").text == "password=x"  # Cyrillic а о, fullwidth =
    assert read('a%3Db\\u003dc\\"').text == 'a=b=c"'


def test_detect_secrets_covers_its_kinds_and_leaves_quoted_words() -> None:
    assert detected("aws_access_key_id = AKIAIOSFODNN7EXAMPL3")
    assert detected('{"method":"ngram","num_speculative_tokens":3}') == []


def test_the_mask_is_kept_as_it_is() -> None:
    """A bundle redacted again stores the same text."""
    for case in SHAPES:
        once = redact_file_text(str(case["text"]))
        assert redact_file_text(once) == once, case["shape"]
        assert MASK in once


def test_a_python_import_path_is_kept_and_a_key_after_a_dotted_name_is_not() -> None:
    """vLLM's registry names classes as `package.module:ClassName` (a wild vllm-ascend log):
    a capitalised name made of words is a class, a random mix of cases and digits a key."""
    line = "overwritten by the new model class vllm_ascend.models.deepseek_v4_mtp:DeepSeekV4MTP."
    assert redact_file_text(line) == line
    for kept in ("vllm.model_executor.models.llama:LlamaForCausalLM", "a.b:Qwen3NextMTP"):
        assert redact_file_text(kept) == kept
    for key in ("Xk9vLp2QwErT7yZa", "AKIAIOSFODNN7EXAMPL3", "Zx9Kq2vB7mN4pL8wR3tY"):
        assert key not in redact_file_text(f"some.config:{key}")


def test_an_address_is_kept_and_a_long_hex_secret_is_not() -> None:
    """A ROCm fault prints its agent's handle as a C pointer (a wild SGLang MI355X log)."""
    line = "Memory access fault by GPU node-6 (Agent handle: 0x55d1c0a1b2c0) on address 0x7f1e2c."
    assert redact_file_text(line) == line
    token = "0x" + "9f3c2a7b1e4d8c6f" * 2
    assert token not in redact_file_text(f"handle: {token}")


def test_a_digest_after_its_name_is_kept() -> None:
    """The trainer's record prints the head's sha256 (a sample's recording/train.log): a hex
    run after a digest's key is no secret; after a secret's name, or alone, it still is."""
    digest = "e4716402d4bcf66403b77476ef9a5e5277fa82de1e1b3a40df14f40fd52b4f94"
    line = f'  178.7s {{"head_sha256": "{digest}", "head_bytes": 15571144}}'
    assert redact_file_text(line) == line
    assert digest not in redact_file_text(f'{{"api_secret": "{digest}"}}')
    assert digest not in redact_file_text(f'x = "{digest}"')
