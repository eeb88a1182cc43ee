"""Capture the measuring machine's environment: host, OS, CPU, Python, GPUs via nvidia-smi."""

from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from diagnostic import __version__

__all__ = ["capture_environment", "parse_nvidia_smi"]

_GPU_QUERY = "name,driver_version,memory.total,uuid"
_CUDA = re.compile(r"CUDA Version:\s*([0-9.]+)")
_LOCAL_HOSTS = {"127.0.0.1", "localhost", "::1", "0.0.0.0"}


def capture_environment(base_url: str | None = None) -> dict[str, Any]:
    """What this machine is. GPU facts describe the server only when it runs here too."""
    env: dict[str, Any] = {
        "tool_version": __version__,
        "host": platform.node(),
        "os": platform.platform(),
        "cpu": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "python": sys.version.split()[0],
        "captured_on": "the machine that ran diagnose",
    }
    if base_url is not None:
        env["server_is_local"] = (urlsplit(base_url).hostname or "") in _LOCAL_HOSTS
    env.update(_nvidia())
    return env


def _cpu_model() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def _nvidia() -> dict[str, Any]:
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return {"gpus": [], "nvidia_smi": "not found"}
    query = _run([smi, f"--query-gpu={_GPU_QUERY}", "--format=csv,noheader,nounits"])
    header = _run([smi])
    if query is None:
        return {"gpus": [], "nvidia_smi": "failed"}
    return parse_nvidia_smi(query, header or "")


def _run(argv: list[str]) -> str | None:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=15, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def parse_nvidia_smi(query_csv: str, header: str) -> dict[str, Any]:
    """GPUs from `nvidia-smi --query-gpu=name,driver_version,memory.total,uuid` CSV (no
    header, no units), and the CUDA version from plain `nvidia-smi` output."""
    gpus = []
    for line in query_csv.strip().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) >= 3:
            gpu: dict[str, Any] = {"name": parts[0], "driver": parts[1], "memory_mib": parts[2]}
            if len(parts) >= 4:
                gpu["uuid"] = parts[3]
            gpus.append(gpu)
    cuda = _CUDA.search(header)
    return {
        "gpus": gpus,
        "driver": gpus[0]["driver"] if gpus else None,
        "cuda": cuda.group(1) if cuda else None,
    }
