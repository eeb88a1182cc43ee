"""Remote commands as consultants write them, against real sshd nodes (tests/sshd.py): ssh's
options before and after the host, `-tt`, `user@host -p`, quotes of every kind, here-documents,
`bash -lc`, hops and containers; and the faults of a node that never says its banner and of a
command that floods its stderr. No engine: `sweep --dry-run`'s node checks and the plan
command runner."""

from __future__ import annotations

import socket
import stat
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import free_port
from sshd import Cluster, toml_value

from diagnostic.measure.launch import run_shell
from diagnostic.measure.plan.spec import load_plan
from diagnostic.measure.sweep.nodes import check_nodes

SECRET = "s3cr3t-of-the-site-0042"


@pytest.fixture
def mute_node() -> Iterator[int]:
    """A port that accepts TCP connections and never says a word (no SSH banner): a node
    whose sshd hangs, or a firewall that swallows the session."""
    server = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                held.append(server.accept()[0])
            except OSError:
                return

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    server.close()
    for conn in held:
        conn.close()
    thread.join(timeout=5)


def _toml(value: str) -> str:
    """A TOML string of one line (a here-document's newlines escaped)."""
    return toml_value(value).replace("\n", "\\n")


def _folder(cluster: Cluster, node: str) -> Path:
    path = cluster.root / "nodes" / "forms" / node
    path.mkdir(parents=True, exist_ok=True)
    return path


def test_dry_run_reads_each_node_of_commands_written_as_consultants_write_them(
    ssh_nodes: Cluster, tmp_path: Path, mute_node: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SITE_SSH_CONFIG", str(ssh_nodes.config))
    cfg, node1 = ssh_nodes.config, ssh_nodes.nodes["node1"]
    one, two = _folder(ssh_nodes, "node1"), _folder(ssh_nodes, "node2")
    engine = one / "engine"
    engine.write_text("#!/bin/sh\nexec sleep 1\n")
    engine.chmod(engine.stat().st_mode | stat.S_IXUSR)
    (one / "logs").mkdir(exist_ok=True)
    (one / "logs" / "server.log").write_text("")
    (two / "my logs").mkdir(exist_ok=True)
    (two / "my logs" / "server.log").write_text("")
    # node1 by its address, user and port, the options after the host as ssh allows
    by_address = (
        f"timeout 30 ssh -F {cfg} -i {ssh_nodes.root / 'id_ed25519'} root@127.0.0.1 "
        f"-p {node1.port} -o UserKnownHostsFile={ssh_nodes.known_hosts} -o HostKeyAlias=node1"
    )
    launch = (
        f"HF_TOKEN={SECRET} ssh -F {cfg} -tt node1 \"bash -lc 'cd {one} && HF_TOKEN={SECRET} "
        f"nohup ./engine --port {{port}} >> logs/server.log 2>&1 < /dev/null & echo \\$! "
        "> server.pid'\""
    )
    logs = {
        "node1": f"{by_address} -- tail -n 100 {one}/logs/server.log",
        # the site's config named by a variable of the consultant's shell
        "node2": "ssh -F $SITE_SSH_CONFIG node2 bash -s <<'EOF'\n"
        f"tail -n 100 '{two}/my logs/server.log'\nEOF",
        # through node1 (a hop): the pid file is node2's, never looked for on node1
        "hop": f"ssh -F {cfg} -o SetEnv=API_KEY={SECRET} node1 ssh node2 cat /only/on/node2.pid",
        # the container's files are the container's: only its program is looked for
        "box": f"ssh -F {cfg} -o ServerAliveInterval=5 node1 docker exec c cat /in/the/box.log",
        # an ssh that starts in a pod: named, not checked from here
        "pod": "kubectl exec pod -- ssh gpu9 cat /var/log/vllm.log",
    }
    stop = f"ssh -F {cfg} node1 -- $'kill $(cat {one}/server.pid)'"
    telemetry = {
        "mute": f"ssh -F {cfg} -o ConnectTimeout=2 -p {mute_node} root@127.0.0.1 nvidia-smi -L"
    }
    plan = tmp_path / "forms.toml"
    plan.write_text(
        "\n".join(
            [
                "[plan]",
                f"port = {free_port()}",
                "restarts = 1",
                f"stop = {toml_value(stop)}",
                "logs = { " + ", ".join(f"{k} = {_toml(v)}" for k, v in logs.items()) + " }",
                "telemetry = { "
                + ", ".join(f"{k} = {toml_value(v)}" for k, v in telemetry.items())
                + " }",
                "",
                "[[arms]]",
                'name = "baseline"',
                f"launch = {toml_value(launch)}",
                "",
            ]
        )
    )
    checks = check_nodes(load_plan(plan))
    assert [c.node for c in checks] == [
        "node1",  # the launch's -tt
        "node1",  # the stop's options
        "root@127.0.0.1",
        "node2",
        "node1",  # SetEnv
        "node1",  # ServerAliveInterval
        "root@127.0.0.1",  # the mute one
        "gpu9",
    ], checks
    launch_check, stop_check, address, second, hop, box, mute, pod = checks
    assert pod.ok and pod.via == "kubectl" and not pod.reached and pod.command == "ssh gpu9"
    # -tt gives the check a terminal; `bash -lc '…'` is read inside, relative paths after cd
    assert launch_check.ok, launch_check
    assert launch_check.found == [
        "bash",
        str(one),
        str(engine),
        f"{one}/logs",
        "/dev/null",
        "echo",
    ]
    # $'…' read as bash reads it; the pid file comes with the launch
    assert stop_check.ok and stop_check.found == ["kill", "cat"]
    assert address.ok and address.found == ["tail", f"{one}/logs/server.log"]
    assert second.ok and second.found == ["tail", f"{two}/my logs/server.log"]
    assert hop.ok and hop.found == ["ssh"]
    assert box.reached and box.found + box.missing == ["docker"]
    assert not mute.reached
    assert mute.problem is not None
    assert mute.problem.startswith("no answer within 2 s (ConnectTimeout) (ssh: ")
    assert mute.problem.endswith(f"port {mute_node} timed out)")  # the banner never came
    assert all(SECRET not in c.command and SECRET not in (c.problem or "") for c in checks)
    assert "SetEnv=API_KEY=<redacted>" in hop.command


def test_a_plan_command_to_a_mute_node_ends_at_its_timeout(
    ssh_nodes: Cluster, mute_node: int
) -> None:
    # no ConnectTimeout anywhere: command_timeout_s is the bound
    command = f"ssh -o BatchMode=yes -p {mute_node} root@127.0.0.1 cat /var/log/vllm.log"
    result = run_shell(command, env={}, timeout_s=3)
    assert result.returncode is None
    assert result.why().startswith("no end within 3 s")


def test_a_remote_command_that_floods_its_stderr_is_said_in_a_few_lines(
    ssh_nodes: Cluster,
) -> None:
    flood = "yes an error that repeats | head -c 20000000 >&2; printf the-last-words >&2; exit 3"
    result = run_shell(f"{ssh_nodes.ssh('node1')} '{flood}'", env={}, timeout_s=120)
    assert result.returncode == 3
    assert result.stderr_tail.startswith("an error that repeats | ")
    assert result.stderr_tail.endswith("the-last-words")
    assert len(result.stderr_tail) <= 2000


def test_a_password_is_never_asked_for_in_a_window(ssh_nodes: Cluster, tmp_path: Path) -> None:
    # a laptop's desktop: DISPLAY set and an askpass program that waits for someone to type;
    # `nokey` wants a password (its key is not accepted, BatchMode off)
    asked = tmp_path / "asked"
    askpass = tmp_path / "askpass"
    askpass.write_text(f"#!/bin/sh\ntouch {asked}\nsleep 60\necho not-the-password\n")
    askpass.chmod(0o755)
    desktop = {"DISPLAY": ":0", "SSH_ASKPASS": str(askpass)}
    result = run_shell(f"{ssh_nodes.ssh('nokey')} true", env=desktop, timeout_s=30)
    assert result.returncode == 255 and "Permission denied" in result.stderr_tail
    assert not asked.exists()
