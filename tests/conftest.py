"""Session fixtures: real llama-server processes (scripts/real-server) on free ports."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).parents[1]
SCRIPT = ROOT / "scripts" / "real-server"
NGRAM_FLAGS = (
    "--spec-type",
    "ngram-simple",
    "--spec-ngram-simple-size-n",
    "2",
    "--spec-ngram-simple-size-m",
    "3",
)

StartServer = Callable[..., str]
# One thread per server: llama.cpp's threads wait for each other at every step, so on a
# machine whose cores are busy two threads decoded at 1-17 tok/s against 23-29 with one (66
# against 50 on an idle machine; two busy loops on 2 cores, docs/development.md), and the
# real-engine tests took hours instead of minutes. Plans in the tests use `-t 1` likewise.
THREADS = {**os.environ, "DIAGNOSE_THREADS": "1"}
_LOGS: dict[str, Path] = {}  # base URL -> the log scripts/real-server writes for it


def run_diagnose(
    *args: str, timeout: float = 1800, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`python -m diagnostic ARGS` in the repository, its output captured; `timeout` is a hang
    guard, not a speed test."""
    return subprocess.run(
        [sys.executable, "-m", "diagnostic", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env=env,
    )


def collect_until(args: list[str], records: Path, lines: int) -> subprocess.Popen[bytes]:
    """`diagnose collect ARGS` in a child process, returned once `records` (a run's
    requests.jsonl) holds `lines` records: for tests that kill collect mid-run."""
    child = subprocess.Popen(
        [sys.executable, "-m", "diagnostic", "collect", *args],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 900  # a hang guard: a loaded CPU serves slowly
    while not (records.is_file() and records.read_text().count("\n") >= lines):
        assert child.poll() is None, "collect ended before it could be killed"
        assert time.monotonic() < deadline, "no records within 900 s"
        time.sleep(0.02)
    return child


def free_port() -> int:
    """A TCP port nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _server_binary() -> Path:
    """Where scripts/real-server caches llama-server (found without installing anything)."""
    version = re.search(r"^VERSION=(\S+)$", SCRIPT.read_text(), re.M)
    assert version, f"{SCRIPT}: no VERSION= line"
    cache = Path(os.environ.get("DIAGNOSE_CACHE", Path.home() / ".cache" / "diagnose"))
    return cache / f"llama.cpp-{version.group(1)}" / "bin" / "llama-server"


@pytest.fixture(scope="session")
def real_server() -> Iterator[StartServer]:
    """Start a real llama-server with extra flags (one per distinct flag set); stop at the end.

    Fails, never skips, when llama-server is not installed: CI installs it (scripts/test).
    """
    binary = _server_binary()
    if not binary.is_file():
        pytest.fail(
            f"llama-server is not installed ({binary} missing): run `scripts/real-server install`"
            " (~10 min, once); the engine tests need the real server",
            pytrace=False,
        )
    running: dict[tuple[str, ...], tuple[int, str]] = {}

    def start(*flags: str) -> str:
        if flags not in running:
            for _ in range(3):  # a port found free can be taken before the server binds it
                port = free_port()
                argv = [str(SCRIPT), "start", "--port", str(port), "--", *flags]
                done = subprocess.run(
                    argv, capture_output=True, text=True, timeout=300, check=False, env=THREADS
                )
                if "already in use" not in done.stderr:
                    break
            if done.returncode != 0:
                pytest.fail(f"{' '.join(argv)} failed:\n{done.stderr[-2000:]}", pytrace=False)
            url = done.stdout.strip().splitlines()[-1]
            running[flags] = (port, url)
            logged = re.search(r"log: (\S+)", done.stderr)  # "server pid N, log: PATH"
            default = _server_binary().parents[2] / "run" / f"server-{port}.log"
            _LOGS[url] = Path(logged.group(1)) if logged else default
        return running[flags][1]

    yield start
    for port, _ in running.values():
        subprocess.run(
            [str(SCRIPT), "stop", "--port", str(port)], capture_output=True, timeout=60, check=False
        )


@pytest.fixture(scope="session")
def llama_server(real_server: StartServer) -> str:
    """Base URL of a real llama-server without speculation."""
    return real_server()


@pytest.fixture(scope="session")
def llama_server_ngram(real_server: StartServer) -> str:
    """Base URL of a real llama-server with n-gram speculation (k=3)."""
    return real_server(*NGRAM_FLAGS)


@pytest.fixture
def dead_url() -> str:
    """A local base URL where nothing listens."""
    return f"http://127.0.0.1:{free_port()}"


@pytest.fixture(scope="session")
def server_log() -> Callable[[str], Path]:
    """The log file scripts/real-server writes for the server at a base URL."""
    return _LOGS.__getitem__


@pytest.fixture(scope="module")
def real_env() -> Iterator[None]:
    """$LLAMA_SERVER and $MODEL for the launch templates (waits for a build in progress)."""
    done = subprocess.run(
        [str(ROOT / "scripts" / "real-server"), "path"],
        capture_output=True,
        text=True,
        timeout=3600,
        check=False,
    )
    if done.returncode != 0:
        pytest.fail(
            "`scripts/real-server path` failed: llama-server is not installed and could not be "
            f"built; run `scripts/real-server install` (CI does)\n{done.stderr[-2000:]}",
            pytrace=False,
        )
    saved = {k: os.environ.get(k) for k in ("LLAMA_SERVER", "MODEL")}
    for line in done.stdout.splitlines():
        key, _, value = line.partition("=")
        if key in saved:
            os.environ[key] = value
    yield
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


@pytest.fixture(scope="session")
def ssh_nodes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """Real sshd processes on 127.0.0.1 standing for node1, node2 (through a bastion) and the
    bastion, with a throw-away ssh_config (tests/sshd.py); all stopped at the end."""
    from sshd import ssh_cluster

    yield from ssh_cluster(tmp_path_factory.mktemp("ssh"))
