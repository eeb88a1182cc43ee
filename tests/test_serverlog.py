"""measure/serverlog.py and collect without --log: the log a local server writes is found and
kept (real llama-server: started by scripts/real-server, or by hand with its output to a file);
none found is a bold warning at the start naming --log PATH."""

from __future__ import annotations

import os
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

import httpx
import pytest
from click.testing import CliRunner
from conftest import SCRIPT, StartServer, free_port

from diagnostic.bundle.store import Bundle, log_file
from diagnostic.cli import main
from diagnostic.measure.serverlog import server_logs
from diagnostic.schema.bundle import MAIN_SOURCE

ROOT = Path(__file__).parents[1]
TINY = ["--workloads", "code", "--requests", "1", "--warmup", "0", "--max-tokens", "4"]


def _hand_start(sink: int | IO[bytes], log: Path | None) -> Iterator[str]:
    """A real llama-server started by hand (not by scripts/real-server), its output to `sink`;
    its base URL once healthy."""
    paths = subprocess.run(
        [str(SCRIPT), "path"], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    found = dict(line.split("=", 1) for line in paths.splitlines() if "=" in line)
    port = free_port()
    argv = [found["LLAMA_SERVER"], "-m", found["MODEL"], "--host", "127.0.0.1"]
    argv += ["--port", str(port), "-t", "1", "-c", "1024", "-np", "1"]  # conftest.THREADS
    server = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=sink, stderr=sink)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 600
        while True:
            assert server.poll() is None, log.read_text()[-2000:] if log else "exited"
            assert time.monotonic() < deadline, "llama-server not healthy within 600 s"
            try:
                if httpx.get(f"{url}/health", timeout=5).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.25)
        yield url
    finally:
        server.terminate()
        server.wait(timeout=30)


@pytest.fixture(scope="module")
def hand_started(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """A real llama-server started by hand, stdout and stderr to a file: its URL and the file."""
    log = tmp_path_factory.mktemp("hand") / "llama.log"
    with open(log, "wb") as sink:
        for url in _hand_start(sink, log):
            yield url, log


@pytest.fixture
def unlogged() -> Iterator[str]:
    """A real llama-server started by hand with its output thrown away: no log to find."""
    yield from _hand_start(subprocess.DEVNULL, None)


@pytest.mark.engine
def test_scripts_real_server_log_is_found(
    real_server: StartServer, server_log: Callable[[str], Path]
) -> None:
    url = real_server()
    with server_logs(url) as found:
        assert found is not None
        assert found.paths == [server_log(url)] and "scripts/real-server" in found.how


@pytest.mark.engine
def test_the_listening_process_stdout_is_found(hand_started: tuple[str, Path]) -> None:
    url, log = hand_started
    with server_logs(url) as found:
        assert found is not None
        assert found.paths == [log]
        assert "llama-server" in found.how and "stdout/stderr of pid" in found.how


@pytest.mark.engine
def test_collect_without_log_keeps_the_one_found(
    tmp_path: Path, hand_started: tuple[str, Path]
) -> None:
    url, log = hand_started
    out = tmp_path / "b"
    result = CliRunner().invoke(main, ["collect", url, "-o", str(out), *TINY])
    assert result.exit_code == 0, result.output
    assert f"Server log: {log}" in result.output and "no server log" not in result.output
    run = Bundle.open(out).find_run("baseline", 0)
    assert run is not None and run.sources == {MAIN_SOURCE: log_file(MAIN_SOURCE)}
    kept = (out / "runs" / "baseline-r0" / log_file(MAIN_SOURCE)).read_text()
    assert "llama_server" in kept  # the engine's own start-up lines
    assert "stop processing" in kept  # and what it logged while measured


@pytest.mark.engine
def test_none_found_is_a_bold_warning_first_naming_the_flag(tmp_path: Path, unlogged: str) -> None:
    """Said once the server answered, before the plan and the bars."""
    argv = [sys.executable, "-m", "diagnostic", "collect", unlogged, "-o", str(tmp_path / "b")]
    env = {**os.environ, "FORCE_COLOR": "1", "COLUMNS": "300", "DIAGNOSE_CACHE": str(tmp_path)}
    done = subprocess.run([*argv, *TINY], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    warning = done.stderr.index("Warning: no server log is kept")
    assert done.stderr[warning - len("\x1b[1;33m") : warning] == "\x1b[1;33m"  # bold yellow
    assert "Add --log PATH (the server's log file)." in done.stderr
    assert warning < done.stderr.index("Planned:")


@pytest.mark.parametrize("listener", ["nothing", "http.server"])
def test_no_warning_before_the_server_answered(tmp_path: Path, listener: str) -> None:
    """A URL where nothing listens, or a web server that is no inference server (Python's
    http.server: HTML error pages): one error, no warning about logs, no bundle."""
    port = free_port()
    serve = [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"]
    child = None
    if listener == "http.server":
        child = subprocess.Popen(
            serve, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
    try:
        deadline = time.monotonic() + 60
        while child is not None and not _listening(port):
            assert time.monotonic() < deadline and child.poll() is None
            time.sleep(0.05)
        out = tmp_path / "b"
        argv = [sys.executable, "-m", "diagnostic", "collect", f"http://127.0.0.1:{port}"]
        env = {**os.environ, "COLUMNS": "300", "DIAGNOSE_CACHE": str(tmp_path)}
        done = subprocess.run(
            [*argv, "-o", str(out)], capture_output=True, text=True, env=env, timeout=120
        )
    finally:
        if child is not None:
            child.kill()
            child.wait()
    assert done.returncode == 2
    said = {"nothing": "cannot reach", "http.server": "does not answer as an OpenAI-compatible"}
    assert done.stderr.startswith("Error: ") and said[listener] in done.stderr, done.stderr
    assert "Warning" not in done.stderr and not out.exists()


def test_a_container_publishing_the_port_is_followed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docker (no daemon on the test machine: a stand-in on PATH answering as docker does)."""
    port = free_port()
    docker = tmp_path / "bin" / "docker"
    docker.parent.mkdir()
    docker.write_text(
        "#!/bin/sh\n"
        f'if [ "$1" = ps ] && [ "$3" = publish={port} ]; then echo vllm-a; exit 0; fi\n'
        'if [ "$1 $2 $3" = "logs -f vllm-a" ]; then\n'
        "  echo 'INFO vLLM API server version 0.12.0'; echo 'a stderr line' >&2; exec sleep 60\n"
        "fi\n"
        "exit 1\n"
    )
    docker.chmod(docker.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{docker.parent}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("DIAGNOSE_CACHE", str(tmp_path))
    with server_logs(f"http://localhost:{port}") as found:
        assert found is not None and found.how == "docker logs of container vllm-a"
        (path,) = found.paths
        deadline = time.monotonic() + 60
        while "a stderr line" not in path.read_text():
            assert time.monotonic() < deadline, path.read_text()
            time.sleep(0.05)
        assert "vLLM API server version 0.12.0" in path.read_text()
    assert not path.exists()  # the scratch file goes once the run has copied it
    with server_logs(f"http://localhost:{free_port()}") as other:
        assert other is None  # docker publishes nothing there, nothing listens


def test_a_remote_server_is_not_asked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DIAGNOSE_CACHE", str(tmp_path))
    with server_logs("http://192.0.2.1:8000") as found:  # TEST-NET-1: never this host
        assert found is None


def test_a_deleted_or_unnamed_output_is_not_taken_for_a_log(tmp_path: Path) -> None:
    """A listener writing to a deleted file (rotated away, or a TemporaryFile) or a pipe."""
    port = free_port()
    serve = f"import socket,time; s=socket.create_server(('127.0.0.1',{port})); time.sleep(60)"
    out = tmp_path / "gone.log"
    with open(out, "wb") as sink:
        child = subprocess.Popen([sys.executable, "-c", serve], stdout=sink, stderr=subprocess.PIPE)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while not _listening(port):
            assert time.monotonic() < deadline
            time.sleep(0.05)
        with server_logs(url) as found:
            assert found is not None and found.paths == [out]  # stdout; stderr is a pipe
        out.unlink()
        with server_logs(url) as found:
            assert found is None
    finally:
        child.kill()
        child.communicate()


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def test_a_stale_real_server_pid_file_is_not_believed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    port = free_port()
    run = tmp_path / "run"
    run.mkdir()
    (run / f"server-{port}.pid").write_text(f"{os.getpid()}\n")  # a pid, not a llama-server
    (run / f"server-{port}.log").write_text("an old server's log\n")
    monkeypatch.setenv("DIAGNOSE_CACHE", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path))  # and no docker to ask
    with server_logs(f"http://127.0.0.1:{port}") as found:
        assert found is None
