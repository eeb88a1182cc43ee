"""Where a running server writes its log, asked of the host when `collect` is given no --log.

On the local host only (an address this machine can bind), in this order:

1. a llama-server started by `scripts/real-server`: its pid file and log in the cache's
   `run/` folder (`server-PORT.pid`, `server-PORT.log`);
2. a container publishing the port (`docker ps --filter publish=PORT`): `docker logs -f`
   follows it into a scratch file for as long as the run lasts;
3. the process listening on the port (Linux: `/proc/net/tcp`, `/proc/net/tcp6`, then the
   process whose descriptors hold that socket): its stdout and stderr when they are
   regular files.

Found nothing: the caller warns, naming the flag to add.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx

from diagnostic import defaults
from diagnostic.measure.client import server_url

__all__ = ["FoundLogs", "server_logs"]

_LISTEN = "0A"  # a socket's state in /proc/net/tcp: TCP_LISTEN


@dataclass(frozen=True)
class FoundLogs:
    """The log files to keep for a run and how they were found (said to the user)."""

    paths: list[Path]
    how: str


@contextlib.contextmanager
def server_logs(base_url: str) -> Iterator[FoundLogs | None]:
    """The logs of the server at `base_url`, valid inside the block (a container's log is
    followed into a scratch file until the block ends); None when none was found. A URL that
    collect refuses (not one, or holding credentials) is refused here first, the same way."""
    url = httpx.URL(server_url(base_url))
    port = url.port or (443 if url.scheme == "https" else 80)
    if not _is_local(url.host):
        yield None
        return
    found = _real_server_log(port)
    if found is not None:
        yield found
        return
    container = _container(port)
    if container is not None:
        with _followed(*container) as followed:
            yield followed
        return
    yield _listener_logs(port)


def _is_local(host: str) -> bool:
    """Whether `host` is one of this machine's addresses (binding to it succeeds)."""
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except OSError:
        return False
    for family, kind, proto, _, address in infos:
        with socket.socket(family, kind, proto) as sock:
            try:
                sock.bind((address[0], 0))
            except OSError:
                continue
            return True
    return False


def _real_server_log(port: int) -> FoundLogs | None:
    """The log of a llama-server that scripts/real-server started on `port` and that runs."""
    cache = Path(os.environ.get("DIAGNOSE_CACHE") or Path.home() / ".cache" / "diagnose")
    run = cache / "run"
    try:
        pid = int((run / f"server-{port}.pid").read_text().strip())
    except (OSError, ValueError):
        return None
    log = run / f"server-{port}.log"
    if not _serves(pid, port) or not log.is_file():
        return None  # a stale pid file, or the pid is another process's now
    return FoundLogs([log], f"scripts/real-server's log of llama-server (pid {pid})")


def _serves(pid: int, port: int) -> bool:
    """Whether `pid` is a llama-server started with `--port PORT` (as real-server starts it)."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    flag = [i for i, arg in enumerate(argv[:-1]) if arg == b"--port"]
    named = any(argv[i + 1] == str(port).encode() for i in flag)
    return bool(argv) and argv[0].endswith(b"llama-server") and named


def _container(port: int) -> tuple[str, str] | None:
    """docker and the one running container that publishes `port`, when docker answers."""
    docker = shutil.which("docker")
    if docker is None:
        return None
    argv = [docker, "ps", "--filter", f"publish={port}", "--format", "{{.Names}}"]
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=defaults.CONNECT_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    names = done.stdout.split()
    return (docker, names[0]) if done.returncode == 0 and len(names) == 1 else None


@contextlib.contextmanager
def _followed(docker: str, container: str) -> Iterator[FoundLogs]:
    """`docker logs -f CONTAINER` (its stdout and stderr) into a scratch file, stopped at exit."""
    with tempfile.TemporaryDirectory(prefix="diagnose-log-") as scratch:
        path = Path(scratch) / f"{container}.log"
        with open(path, "wb") as sink:
            follower = subprocess.Popen(
                [docker, "logs", "-f", container],
                stdin=subprocess.DEVNULL,
                stdout=sink,
                stderr=subprocess.STDOUT,
            )
        try:
            yield FoundLogs([path], f"docker logs of container {container}")
        finally:
            follower.terminate()
            try:
                follower.wait(timeout=defaults.CONNECT_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                follower.kill()
                follower.wait()


def _listener_logs(port: int) -> FoundLogs | None:
    """The stdout and stderr, when regular files, of the local process listening on `port`."""
    inodes = _listening_inodes(port)
    pid = _owner(inodes) if inodes else None
    if pid is None:
        return None
    paths: list[Path] = []
    for fd in (1, 2):
        try:
            target = Path(os.readlink(f"/proc/{pid}/fd/{fd}"))
            held, named = os.stat(f"/proc/{pid}/fd/{fd}"), os.stat(target)
        except OSError:  # gone, not ours to inspect, or deleted since ("/tmp/x (deleted)")
            continue
        same = (held.st_dev, held.st_ino) == (named.st_dev, named.st_ino)
        if stat.S_ISREG(held.st_mode) and same and target not in paths:
            paths.append(target)
    if not paths:
        return None
    return FoundLogs(paths, f"the stdout/stderr of pid {pid} ({_name(pid)}), listening on {port}")


def _listening_inodes(port: int) -> set[str]:
    """Socket inodes listening on `port` (any address), from /proc/net/tcp and tcp6."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if (
                len(fields) > 9
                and fields[3] == _LISTEN
                and int(fields[1].split(":")[1], 16) == port
            ):
                inodes.add(fields[9])
    return inodes


def _owner(inodes: set[str]) -> int | None:
    """The pid holding one of these socket inodes (only processes we may inspect)."""
    wanted = {f"socket:[{inode}]" for inode in inodes}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            for fd in (proc / "fd").iterdir():
                with contextlib.suppress(OSError):
                    if os.readlink(fd) in wanted:
                        return int(proc.name)
    return None


def _name(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return "?"
