"""Real OpenSSH servers on 127.0.0.1 standing for a client's nodes: `node1`, `node2` and a
`bastion` that node2 is reached through (ProxyJump), each its own sshd on a free port with its
own host key, a key pair made for this run, and a throw-away ssh_config (`ssh -F`). Nothing in
~/.ssh or /etc/ssh is read or changed; every sshd is stopped at the end."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from conftest import free_port

SSHD = Path(shutil.which("sshd", path="/usr/sbin:/usr/bin:/sbin") or "/usr/sbin/sshd")
NODES = ("node1", "node2", "bastion")


@dataclass
class Node:
    """One sshd: its name in the ssh_config, its port and its config file."""

    name: str
    port: int
    config: Path
    host_key: Path
    process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        """Start (or start again) this node's sshd in the foreground; wait until it listens."""
        with open(self.config.with_suffix(".log"), "ab") as log:
            self.process = subprocess.Popen(
                [str(SSHD), "-D", "-e", "-f", str(self.config)],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=log,
                start_new_session=True,
            )
        deadline = time.monotonic() + 30
        while not _listens(self.port):
            assert self.process.poll() is None, self.config.with_suffix(".log").read_text()
            assert time.monotonic() < deadline, f"sshd of {self.name} not listening in 30 s"
            time.sleep(0.05)

    def kill(self) -> None:
        """Kill this sshd and every session it serves (what a node's crash does to ssh)."""
        if self.process is None or self.process.poll() is not None:
            return
        sessions = _sshd_descendants(self.process.pid)
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()
        for pid in sessions:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


@dataclass
class Cluster:
    """The nodes, the ssh_config naming them and the client key."""

    root: Path
    config: Path
    known_hosts: Path
    nodes: dict[str, Node] = field(default_factory=dict)

    def ssh(self, host: str) -> str:
        """The ssh command a plan template starts with for `host` (the consultant's config)."""
        return f"ssh -F {self.config} {host}"

    def run(self, host: str, command: str) -> subprocess.CompletedProcess[str]:
        """Run `command` on `host` over ssh."""
        return subprocess.run(
            ["ssh", "-F", str(self.config), host, command],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            stdin=subprocess.DEVNULL,
        )


def _listens(port: int) -> bool:
    import socket

    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def _sshd_descendants(pid: int) -> list[int]:
    """Pids of the sshd processes below listener `pid` (per connection: privileged and
    session processes, each in a session of its own), never the commands they run."""
    parents: dict[int, int] = {}
    names: dict[int, bytes] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            names[int(stat.parent.name)] = (stat.parent / "cmdline").read_bytes()
        except (OSError, IndexError, ValueError):
            continue
        parents[int(stat.parent.name)] = int(fields[1])
    found = []
    for child in parents:
        up = child
        while up in parents and up > 1 and up != pid:
            up = parents[up]
        if up == pid and child != pid and names.get(child, b"").startswith(b"sshd"):
            found.append(child)
    return found


def _keygen(path: Path, comment: str) -> None:
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)],
        check=True,
        timeout=60,
    )


def _sshd_config(root: Path, node: str, port: int, host_key: Path, keys: Path) -> Path:
    config = root / f"sshd-{node}.conf"
    config.write_text(
        "\n".join(
            [
                f"Port {port}",
                "ListenAddress 127.0.0.1",
                f"HostKey {host_key}",
                f"PidFile {root}/sshd-{node}.pid",
                f"AuthorizedKeysFile {keys}",
                "PermitRootLogin yes",
                "PubkeyAuthentication yes",
                "PasswordAuthentication yes",  # offered, so a missing key meets a prompt
                "KbdInteractiveAuthentication no",
                "UsePAM no",
                "StrictModes no",  # the temp folder is not root's ~/.ssh
                "AllowTcpForwarding yes",  # the bastion forwards to node2
                "PrintMotd no",
                "LogLevel ERROR",
                "AcceptEnv LANG",
                "Subsystem sftp internal-sftp",
                "",
            ]
        )
    )
    return config


def _ssh_config(root: Path, cluster: Cluster, identity: Path) -> None:
    n = cluster.nodes
    key = f"  IdentityFile {identity}"
    common = [
        "  IdentitiesOnly yes",
        f"  UserKnownHostsFile {cluster.known_hosts}",
        "  StrictHostKeyChecking yes",
        "  BatchMode yes",
        "  ConnectTimeout 10",
        "  User root",
        "  LogLevel ERROR",
    ]
    hosts = [
        (
            "node1",
            [key, "  HostName 127.0.0.1", f"  Port {n['node1'].port}", "  HostKeyAlias node1"],
        ),
        (
            "bastion",
            [key, "  HostName 127.0.0.1", f"  Port {n['bastion'].port}", "  HostKeyAlias bastion"],
        ),
        (
            "node2",
            [
                key,
                "  HostName 127.0.0.1",
                f"  Port {n['node2'].port}",
                "  HostKeyAlias node2",
                "  ProxyJump bastion",
            ],
        ),
        # node1's sshd, expected to show node2's host key: a host key that changed
        (
            "rekeyed",
            [key, "  HostName 127.0.0.1", f"  Port {n['node1'].port}", "  HostKeyAlias node2"],
        ),
        # node1 with a key it does not accept and without BatchMode: a password prompt
        (
            "nokey",
            [
                "  HostName 127.0.0.1",
                f"  Port {n['node1'].port}",
                "  HostKeyAlias node1",
                f"  IdentityFile {root / 'stranger'}",
                "  BatchMode no",
                "  PasswordAuthentication yes",
            ],
        ),
    ]
    lines = []
    for name, own in hosts:
        lines += [f"Host {name}", *own, *common, ""]
    cluster.config.write_text("\n".join(lines))


def start_cluster(root: Path) -> Cluster:
    """Keys, host keys and configs under `root`; every node's sshd started."""
    root.mkdir(parents=True, exist_ok=True)
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege separation folder
    identity = root / "id_ed25519"
    _keygen(identity, "diagnose-tests")
    _keygen(root / "stranger", "not-authorised")
    keys = root / "authorized_keys"
    shutil.copy(identity.with_suffix(".pub"), keys)
    cluster = Cluster(root=root, config=root / "ssh_config", known_hosts=root / "known_hosts")
    known = []
    for name in NODES:
        host_key = root / f"host-{name}"
        _keygen(host_key, name)
        port = free_port()
        config = _sshd_config(root, name, port, host_key, keys)
        cluster.nodes[name] = Node(name, port, config, host_key)
        public = host_key.with_suffix(".pub").read_text().split()[:2]
        known.append(f"{name} {' '.join(public)}")
    cluster.known_hosts.write_text("\n".join(known) + "\n")
    _ssh_config(root, cluster, identity)
    for node in cluster.nodes.values():
        node.start()
    return cluster


def stop_cluster(cluster: Cluster) -> None:
    """Kill every sshd of the cluster and its sessions."""
    for node in cluster.nodes.values():
        node.kill()


def ssh_cluster(root: Path) -> Iterator[Cluster]:
    """The cluster for a session fixture: started, yielded, stopped."""
    cluster = start_cluster(root)
    try:
        yield cluster
    finally:
        stop_cluster(cluster)


def toml_value(value: object) -> str:
    """A TOML value of a plan line (a string escaped, a list, a number)."""
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    return str(value)
