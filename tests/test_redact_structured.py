"""Redaction by construction (issue 46): a launch command keeps the values of the options its
engine documents as safe, an environment the values of allow-listed names, a URL its scheme,
host, port and path. The inputs are the launch commands the samples really ran and the
structured shapes of tests/data/secrets/structured.jsonl (benchmarks/redaction.py --write)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from diagnostic.bundle.allowlists import env_allowed, options
from diagnostic.bundle.redact import (
    MASK,
    redact_command,
    redact_env,
    redact_json,
    redact_url,
    redact_variables,
)

ROOT = Path(__file__).parents[1]
STRUCTURED = [
    json.loads(line)
    for line in (ROOT / "tests" / "data" / "secrets" / "structured.jsonl").read_text().splitlines()
]


def _sample_launches() -> list[str]:
    """Every launch command the samples' manifests recorded (real vLLM, SGLang, llama.cpp)."""
    found: set[str] = set()
    for manifest in sorted((ROOT / "samples").glob("*/manifest.json")):
        for arm in json.loads(manifest.read_text())["plan"]["arms"]:
            if arm.get("launch"):
                found.add(arm["launch"])
    return sorted(found)


def _redacted(case: dict[str, object]) -> str:
    text, path = str(case["text"]), case["path"]
    if path == "command":
        return redact_command(text)
    if path == "env":
        return json.dumps(redact_env(json.loads(text)))
    return redact_url(text)


def test_the_structured_corpus_is_large_enough() -> None:
    assert len(STRUCTURED) >= 30
    assert {c["path"] for c in STRUCTURED} == {"command", "env", "url"}


@pytest.mark.parametrize("case", STRUCTURED, ids=[str(c["shape"]) for c in STRUCTURED])
def test_structured_shapes_are_masked(case: dict[str, object]) -> None:
    out = _redacted(case)
    assert not [s for s in case["secrets"] if str(s) in out], out  # type: ignore[attr-defined]


@pytest.mark.parametrize("launch", _sample_launches())
def test_the_samples_launch_commands_are_kept_as_they_ran(launch: str) -> None:
    """Every option the samples passed is on its engine's list: nothing of them is lost."""
    assert redact_command(launch) == launch


@pytest.mark.parametrize(
    "command",
    [*_sample_launches(), *(str(c["text"]) for c in STRUCTURED if c["path"] == "command")],
)
def test_redaction_is_idempotent(command: str) -> None:
    """A bundle read and written again stores the same bytes (its seal hashes them)."""
    once = redact_command(command)
    assert redact_command(once) == once


def test_an_engine_reads_its_own_list() -> None:
    # --tp is SGLang's spelling: vLLM documents -tp and --tensor-parallel-size
    assert redact_command("vllm serve m --tp 2") == f"vllm serve m --tp {MASK}"
    sglang = "python3 -m sglang.launch_server --model-path m --tp 2"
    assert redact_command(sglang) == sglang
    assert "--tp_size 8" in redact_command("trtllm-serve /m --backend pytorch --tp_size 8")
    assert "-ngl 99" in redact_command("llama-server -m /m.gguf -ngl 99")
    assert "--tp_size" in options("trtllm") or "--tp-size" in options("trtllm")


def test_a_value_that_starts_with_a_dash_is_still_the_secret_options_value() -> None:
    out = redact_command("vllm serve m --api-key -Kq9xZ2vB7 --port 8000")
    assert "Kq9xZ2vB7" not in out and out.endswith("--port 8000")


def test_programs_that_run_no_engine_keep_no_option_value() -> None:
    out = redact_command("mysql -phunter2 -u root && sshpass -p s3cr3t ssh h && vllm serve m")
    assert "hunter2" not in out and "s3cr3t" not in out and out.endswith("vllm serve m")
    assert redact_command("wandb login abcdefgh12345678") == f"wandb login {MASK}"


def test_a_launch_over_ssh_is_read_as_the_engines() -> None:
    out = redact_command("ssh head 'vllm serve M --port 8000 --api-key k9Zq2' # tp16")
    assert out == f"ssh head 'vllm serve M --port 8000 --api-key {MASK}' # tp16"


def test_stop_and_health_commands_are_scanned_not_emptied() -> None:
    stop = "ssh head pkill -f 'vllm serve.*--port 8000'"
    assert redact_command(stop, launch=False) == stop
    health = "curl -sf -H 'Authorization: Bearer Zx9Kq2vB7mN4pL8w' http://127.0.0.1:8000/health"
    assert "Zx9Kq2vB7mN4pL8w" not in redact_command(health, launch=False)


def test_environment_values_are_kept_for_allow_listed_names_only() -> None:
    env = {
        "CUDA_VISIBLE_DEVICES": "0,1",
        "VLLM_USE_FLASHINFER_SAMPLER": "0",
        "NCCL_DEBUG": "INFO",
        "SGLANG_API_KEY": "k",
        "VLLM_API_KEY": "k",
        "MY_SETTING": "plain",
        "EMPTY": "",
    }
    assert redact_env(env) == {
        "CUDA_VISIBLE_DEVICES": "0,1",
        "VLLM_USE_FLASHINFER_SAMPLER": "0",
        "NCCL_DEBUG": "INFO",
        "SGLANG_API_KEY": MASK,
        "VLLM_API_KEY": MASK,
        "MY_SETTING": MASK,
        "EMPTY": "",
    }
    assert env_allowed("LLAMA_ARG_CTX_SIZE") and not env_allowed("LLAMA_ARG_API_KEY")


def test_shell_variables_keep_their_values_where_the_command_keeps_them() -> None:
    command = "$LLAMA_SERVER -m $MODEL --api-key $KEY"
    values = {"LLAMA_SERVER": "/bin/llama-server", "MODEL": "/m.gguf", "KEY": "plainword"}
    assert redact_variables(command, values) == {
        "LLAMA_SERVER": "/bin/llama-server",
        "MODEL": "/m.gguf",
        "KEY": MASK,
    }


def test_urls_keep_scheme_host_port_and_path() -> None:
    assert redact_url("http://u:p@10.0.0.7:8000/v1?key=abc&api-version=2024-02-01#frag") == (
        f"http://{MASK}@10.0.0.7:8000/v1?key={MASK}&api-version=2024-02-01"
    )
    assert redact_url("http://127.0.0.1:8000/v1") == "http://127.0.0.1:8000/v1"


def test_json_is_redacted_by_its_keys() -> None:
    """The one gate of manifest.json and run.json: commands, envs, variables, URLs by key."""
    run = {
        "base_url": "http://svc:tok@h:8000/v1",
        "launch": {
            "command": "vllm serve m --license plainword --port 8000",
            "env": {"FOO": "plainword", "CUDA_VISIBLE_DEVICES": "0"},
            "variables": {"M": "x"},
        },
        "arms": [{"launch": "vllm serve m --webhook plainword", "stop": "pkill -f vllm"}],
    }
    out = json.dumps(redact_json(run))
    assert "plainword" not in out and "tok" not in out
    assert redact_json(json.loads(out)) == json.loads(out)


def test_the_structured_corpus_is_what_the_benchmark_generates() -> None:
    """tests/data/secrets/structured.jsonl is `benchmarks/redaction.py --write`'s, seeded."""
    import importlib.util
    import sys

    spec = importlib.util.spec_from_file_location("redaction", ROOT / "benchmarks" / "redaction.py")
    assert spec is not None and spec.loader is not None
    redaction = sys.modules.get("redaction") or importlib.util.module_from_spec(spec)
    if "redaction" not in sys.modules:
        sys.modules["redaction"] = redaction
        spec.loader.exec_module(redaction)
    assert redaction.generate_structured() == STRUCTURED  # regenerate with --write


def test_a_signature_block_is_public_and_kept_byte_for_byte() -> None:
    """deliverable.json's signature (a public key, its fingerprint, an ed25519 signature) is
    public by construction: the attachment's redaction keeps it, and masks the rest as ever."""
    import json

    from diagnostic.bundle.redact import redact_attachment

    block = {"algorithm": "ed25519", "public_key": "ssh-ed25519 AAAAC3Nza", "key_id": "SHA256:x",
             "signature": "c2lnbmF0dXJl"}  # fmt: skip
    text = json.dumps({"root": "ab" * 32, "signature": block, "note": "password=hunter2x"})
    out = json.loads(redact_attachment(text))
    assert out["signature"] == block and "hunter2x" not in out["note"]
    plain = json.dumps({"root": "ab" * 32, "signature": block})
    assert redact_attachment(plain) == plain  # nothing to mask: unchanged, byte for byte


@pytest.mark.parametrize(
    "command",
    [
        "llama-server -m /m/g.gguf --port 8080 > /tmp/server.log 2>&1 & echo $! > /tmp/server.pid",
        "ssh -F /tmp/ssh_config node1 'nohup llama-server -m m.gguf --port 8000 >log 2>&1 &'",
        "vllm serve /models/m --port 8000 2>>err.log </dev/null &>all.log | tee out.log",
    ],
)
def test_redirections_and_the_shells_own_parameters_are_no_values(command: str) -> None:
    """`2>&1`, `>> FILE`, `&>FILE` and `$!` are the shell's, not an option's value (a sweep's
    own launch templates lost them to the mask)."""
    assert redact_command(command) == command
    assert redact_command(command, launch=False) == command


def test_a_secret_in_a_redirections_file_is_still_scanned() -> None:
    secret = "ghp_" + "a1B2c3D4e5F6g7H8i9J0" * 2
    assert secret not in redact_command(f"llama-server -m m.gguf > /tmp/{secret}.log 2>&1")


@pytest.mark.parametrize(
    ("launch", "stored"),
    [
        # ssh's options read as its getopt reads them: the node and its options stay visible
        ("ssh -tt gpu1 vllm serve m --port 8000", "ssh -tt gpu1 vllm serve m --port 8000"),
        ("ssh -J bastion -p 2222 user@gpu2 vllm serve m", None),
        ("timeout 30 ssh -vp 22 gpu1 llama-server -m m.gguf", None),
        ("ssh -o StrictHostKeyChecking=no -o ConnectTimeout=10 gpu1 vllm serve m", None),
        ("ssh gpu1 bash -lc 'vllm serve m --port 8000'", None),
        # what ssh carries that is no connection setting, and sshpass's password, are masked
        (
            "ssh -o SetEnv=HF_TOKEN=hf_Zx9Kq2vB7mN4pL8wR3tY gpu1 vllm serve m",
            "ssh -o SetEnv=<redacted> gpu1 vllm serve m",
        ),
        (
            "sshpass -p hunter2-Zx9Kq ssh -tt gpu1 vllm serve m",
            "sshpass -p <redacted> ssh -tt gpu1 vllm serve m",
        ),
        (
            "ssh gpu1 bash -lc 'vllm serve m --api-key sk-Zx9Kq2vB7mN4pL8wR3tY'",
            "ssh gpu1 bash -lc 'vllm serve m --api-key <redacted>'",
        ),
    ],
)
def test_an_ssh_launch_keeps_its_node_and_options_and_masks_what_ssh_carries(
    launch: str, stored: str | None
) -> None:
    assert redact_command(launch) == (stored or launch)
