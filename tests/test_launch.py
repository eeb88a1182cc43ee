"""Launching servers: own process group, redacted log, health wait that fails fast, clean stop."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import ROOT, free_port

from diagnostic.errors import LaunchError
from diagnostic.measure.health import wait_command, wait_healthy
from diagnostic.measure.launch import (
    host_port,
    port_in_use,
    run_shell,
    start_server,
    stop_leftover,
    wait_port_free,
)

SECRET = "sk-abcdefghijklmnopqrstuvwxyz0123"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    state = (
        Path(f"/proc/{pid}/stat").read_text().split()[2] if Path(f"/proc/{pid}").exists() else "X"
    )
    return state not in ("Z", "X")


def test_a_command_that_exits_at_once_fails_fast_with_its_last_lines(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    server = start_server(
        f"echo loading; echo 'using --api-key {SECRET}'; echo 'fatal: no GPU' >&2; exit 3",
        env={},
        log_path=log,
    )
    with pytest.raises(LaunchError) as err:
        wait_healthy(server, f"http://127.0.0.1:{free_port()}", timeout_s=60)
    message = str(err.value)
    # the exit, not the 60 s timeout, ended the wait (a timeout says "did not become healthy")
    assert "exited with status 3 during start-up" in message
    assert "fatal: no GPU" in message and str(log) in message
    assert server.stop(grace_s=1) == 3
    text = log.read_text()
    assert "loading\n" in text and "fatal: no GPU" in text  # stderr goes to the same log
    assert SECRET not in text and SECRET not in message


def test_a_server_that_never_listens_times_out_with_the_last_check(tmp_path: Path) -> None:
    server = start_server("echo still loading; exec sleep 60", env={}, log_path=tmp_path / "s.log")
    with pytest.raises(LaunchError) as err:
        wait_healthy(server, f"http://127.0.0.1:{free_port()}", timeout_s=1.0)
    message = str(err.value)
    assert "did not become healthy within 1 s" in message
    assert "ConnectError" in message and "still loading" in message
    assert "health_timeout_s" in message
    assert server.stop(grace_s=5) == -15  # SIGTERM ended it, not the SIGKILL after the grace


def test_without_health_it_asks_models_then_needs_a_completion(tmp_path: Path) -> None:
    # A static file server: /health is 404, /v1/models is a file, POST is 501.
    root = tmp_path / "www"
    (root / "v1").mkdir(parents=True)
    (root / "v1" / "models").write_text(json.dumps({"data": [{"id": "static-model"}]}))
    port = free_port()
    server = start_server(
        f"exec {sys.executable} -m http.server {port} --bind 127.0.0.1 --directory {root}",
        env={},
        log_path=tmp_path / "s.log",
    )
    try:
        with pytest.raises(LaunchError) as err:
            wait_healthy(server, f"http://127.0.0.1:{port}", timeout_s=3.0)
        assert "POST /v1/completions -> 501" in str(err.value)
    finally:
        server.stop(grace_s=5)
    log = (tmp_path / "s.log").read_text()
    assert '"GET /health HTTP/1.1" 404' in log
    assert '"GET /v1/models HTTP/1.1" 200' in log


def test_env_reaches_the_command_and_shell_variables_expand(tmp_path: Path) -> None:
    log = tmp_path / "s.log"
    server = start_server(
        'echo "port=$MY_PORT home=${HOME:+set}"', env={"MY_PORT": "9"}, log_path=log
    )
    server.popen.wait(timeout=60)
    assert server.stop(grace_s=1) == 0
    assert log.read_text() == "port=9 home=set\n"


def test_stop_kills_the_whole_group_even_when_sigterm_is_ignored(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    server = start_server(
        f"trap '' TERM; sleep 60 & echo $! > {pids}; wait", env={}, log_path=tmp_path / "s.log"
    )
    deadline = time.monotonic() + 60
    while not (pids.is_file() and pids.read_text().strip()):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    child = int(pids.read_text())
    code = server.stop(grace_s=0.5)
    assert code == -9
    assert not _alive(child)


def test_stop_reaps_children_that_outlive_the_leader(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    server = start_server(
        f"sleep 60 & echo $! > {pids}; exit 0", env={}, log_path=tmp_path / "s.log"
    )
    server.popen.wait(timeout=60)
    child = int(pids.read_text())
    assert _alive(child)
    assert server.stop(grace_s=2) == 0
    assert not _alive(child)


def test_log_lines_are_flushed_as_they_come(tmp_path: Path) -> None:
    log = tmp_path / "s.log"
    server = start_server("echo first; exec sleep 30", env={}, log_path=log)
    try:
        deadline = time.monotonic() + 60
        while "first" not in log.read_text():
            assert time.monotonic() < deadline, "the line never reached the log"
            time.sleep(0.05)
    finally:
        server.stop(grace_s=2)


def test_port_helpers() -> None:
    assert host_port("http://127.0.0.1:8123/v1") == ("127.0.0.1", 8123)
    assert host_port("https://example.com") == ("example.com", 443)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        assert port_in_use("127.0.0.1", port)
        assert not wait_port_free("127.0.0.1", port, timeout_s=0.3)
    assert wait_port_free("127.0.0.1", port, timeout_s=2)


# -- the real engine ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def real_paths() -> dict[str, str]:
    """LLAMA_SERVER and MODEL from scripts/real-server path (waits for a build in progress)."""
    script = ROOT / "scripts" / "real-server"
    done = subprocess.run(
        [str(script), "path"], capture_output=True, text=True, timeout=3600, check=False
    )
    if done.returncode != 0:
        pytest.fail(
            f"`scripts/real-server path` failed: llama-server is not installed and could not be "
            f"built; run `scripts/real-server install` (CI does)\n{done.stderr[-2000:]}",
            pytrace=False,
        )
    pairs = dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)
    return {"LLAMA_SERVER": pairs["LLAMA_SERVER"], "MODEL": pairs["MODEL"]}


@pytest.mark.engine
def test_real_llama_server_starts_healthy_and_stops(
    tmp_path: Path, real_paths: dict[str, str]
) -> None:
    port = free_port()
    log = tmp_path / "server.log"
    server = start_server(
        f"$LLAMA_SERVER -m $MODEL -a gemma --host 127.0.0.1 --port {port} -t 1 -c 1024 -np 1",
        env=real_paths,
        log_path=log,
    )
    try:
        health = wait_healthy(server, f"http://127.0.0.1:{port}", timeout_s=120)
        assert 0 < health.startup_s < 120
        assert health.health_endpoint == "/health"
        assert health.model  # discovered from /v1/models
        assert port_in_use("127.0.0.1", port)
    finally:
        code = server.stop(grace_s=10)
    assert code is not None
    assert wait_port_free("127.0.0.1", port, timeout_s=10)
    text = log.read_text()
    assert "listening on" in text and "print_timing" in text  # the 1-token probe ran


@pytest.mark.engine
def test_real_llama_server_with_a_bad_flag_fails_fast(
    tmp_path: Path, real_paths: dict[str, str]
) -> None:
    server = start_server(
        f"$LLAMA_SERVER -m $MODEL --port {free_port()} --draft-max 4",  # removed in this build
        env=real_paths,
        log_path=tmp_path / "server.log",
    )
    with pytest.raises(LaunchError, match="exited with status"):
        wait_healthy(server, "http://127.0.0.1:1", timeout_s=60)
    server.stop(grace_s=5)


def test_a_leftover_server_is_stopped_only_when_it_carries_our_marker(tmp_path: Path) -> None:
    server = start_server("exec sleep 60", env={}, log_path=tmp_path / "s.log", marker="b:x-r0")
    try:
        time.sleep(0.2)  # let exec happen
        assert not stop_leftover(server.pid, "b:other-r0", grace_s=1)
        assert server.poll() is None, "a server with another marker must be left alone"
        assert not stop_leftover(os.getpid(), "b:x-r0", grace_s=1)  # not a marked group
        assert stop_leftover(server.pid, "b:x-r0", grace_s=5)
        server.popen.wait(timeout=60)
    finally:
        server.stop(grace_s=1)
    assert server.popen.returncode == -15


# -- plan commands: stop, health, logs -------------------------------------------------------


def test_a_plan_command_reports_its_status_output_and_redacted_stderr() -> None:
    ok = run_shell("echo node1 log; echo $NODE", env={"NODE": "gpu2"}, timeout_s=10)
    assert (ok.returncode, ok.stdout) == (0, b"node1 log\ngpu2\n")
    bad = run_shell(f"echo 'ssh: token {SECRET} refused' >&2; exit 255", env={}, timeout_s=10)
    assert bad.returncode == 255 and SECRET not in bad.stderr_tail
    assert bad.why().startswith("exit 255: ssh: token ")


def test_a_plan_command_that_overruns_is_killed_with_its_children(tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    result = run_shell(f"sleep 60 & echo $! > {pid_file}; wait", env={}, timeout_s=1)
    assert result.returncode is None and result.why() == "no end within 1 s"
    deadline = time.monotonic() + 60
    while _alive(int(pid_file.read_text())):
        assert time.monotonic() < deadline, "the command's child outlived it"
        time.sleep(0.05)


def test_a_health_command_waits_for_exit_0_and_fails_fast_when_the_launch_exits(
    tmp_path: Path,
) -> None:
    flag = tmp_path / "ready"
    server = start_server(f"sleep 1; touch {flag}; sleep 60", env={}, log_path=tmp_path / "a.log")
    health = wait_command(server, f"test -e {flag}", env={}, timeout_s=30, poll_s=0.1)
    assert 0.5 < health.startup_s < 20
    server.stop(grace_s=1)
    gone = start_server("echo starting; exit 4", env={}, log_path=tmp_path / "b.log")
    with pytest.raises(LaunchError, match="exited with status 4 during start-up"):
        wait_command(gone, "false", env={}, timeout_s=30, poll_s=0.1)
    gone.stop(grace_s=1)
    slow = start_server("sleep 60", env={}, log_path=tmp_path / "c.log")
    with pytest.raises(LaunchError, match=r"health command did not succeed within 1 s.*exit 1"):
        wait_command(slow, "false", env={}, timeout_s=1, poll_s=0.1)
    slow.stop(grace_s=1)


def test_the_server_log_masks_a_private_key_across_lines(tmp_path: Path) -> None:
    key = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7"
    command = (
        "echo '-----BEGIN PRIVATE KEY-----'; "
        f"echo {key}; echo '-----END PRIVATE KEY-----'; echo after"
    )
    server = start_server(command, env={}, log_path=tmp_path / "server.log")
    server.popen.wait(timeout=60)
    server.stop(grace_s=1)
    text = (tmp_path / "server.log").read_text()
    assert key not in text and "after" in text
