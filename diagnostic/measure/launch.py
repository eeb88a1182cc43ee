"""Start a server from a command in its own process group, capture its log, wait, stop it."""

from __future__ import annotations

import contextlib
import os
import re
import selectors
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections import deque
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import IO
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field

from diagnostic import defaults
from diagnostic.bundle.redact import LineRedactor, redact_text
from diagnostic.errors import LaunchError

__all__ = [
    "ServerProcess",
    "ShellResult",
    "host_port",
    "port_in_use",
    "run_shell",
    "shell_variables",
    "start_server",
    "stop_leftover",
    "wait_port_free",
]

TAIL_LINES = 20
_TAIL_CHARS = 2000  # of a plan command's last error lines, kept in messages
_DRAIN_S = 5.0  # reading what a killed command printed, at most
# Set in every server's environment: a leftover server is recognised by it, never by pid alone.
MARKER_VAR = "DIAGNOSE_SERVER_ID"
# $NAME or ${NAME} in a launch command (not $$ or an escaped \$).
_SHELL_VAR = re.compile(r"(?<![\\$])\$(?:\{([A-Za-z_]\w*)\}|([A-Za-z_]\w*))")


def shell_variables(command: str) -> list[str]:
    """The shell variables a launch command names ($MODEL, ${PORT}), in order, once each."""
    return list(dict.fromkeys(braced or bare for braced, bare in _SHELL_VAR.findall(command)))


class ServerProcess:
    """A launched server: a process group whose output streams into a redacted log file."""

    def __init__(
        self,
        popen: subprocess.Popen[bytes],
        log_path: Path,
        log: IO[str],
        *,
        daemon_ok: bool = False,
    ) -> None:
        self.popen = popen
        self.log_path = log_path
        self.started = time.monotonic()
        # A plan with a stop command may launch in the background (&, docker run -d, nohup
        # over ssh) and return 0, before or after the server answers: that exit is no death.
        self.daemon_ok = daemon_ok
        self._log = log
        self._tail: deque[str] = deque(maxlen=TAIL_LINES)
        self._thread = threading.Thread(target=self._pump, name=f"log-{popen.pid}", daemon=True)
        self._thread.start()

    @property
    def pid(self) -> int:
        """Process id of the group leader (the shell running the command)."""
        return self.popen.pid

    def poll(self) -> int | None:
        """Exit status once the leader exited, else None."""
        return self.popen.poll()

    @property
    def daemonised(self) -> bool:
        """The launch returned 0 leaving the server in the background, as `daemon_ok` allows."""
        return self.daemon_ok and self.popen.poll() == 0

    def tail(self) -> list[str]:
        """The last lines of the log (redacted), for error messages. Once the leader has
        exited, what it printed last is read first (at most _DRAIN_S: a child left in the
        background may hold the output open)."""
        if self.popen.poll() is not None:
            self._thread.join(timeout=_DRAIN_S)
        return list(self._tail)

    def _pump(self) -> None:
        # One line at a time, redacted before it touches the disk; flushed so a crash or a
        # Ctrl-C leaves the log complete up to the last line the server wrote.
        stream = self.popen.stdout
        assert stream is not None
        redactor = LineRedactor()  # as every log: a private key's body is masked too
        writable = True
        for raw in iter(stream.readline, b""):
            line = redactor.line(raw.decode("utf-8", errors="replace"))
            if writable:
                try:
                    self._log.write(line)
                    self._log.flush()
                except (OSError, ValueError) as exc:  # a full disk; a log closed by stop()
                    writable = False
                    self._tail.append(f"(the log is not written from here on: {exc})")
            self._tail.append(line.rstrip("\r\n"))
        stream.close()

    def stop(self, *, grace_s: float = 30.0) -> int | None:
        """SIGTERM the whole group, SIGKILL after `grace_s`; return the leader's exit status.

        The status follows subprocess: negative when a signal ended it (-15: SIGTERM).
        """
        deadline = time.monotonic() + grace_s
        # Even when the leader already exited, its children (engine workers) may still run.
        if self.popen.poll() is None or _group_alive(self.pid):
            _signal_group(self.pid, signal.SIGTERM)
        try:
            self.popen.wait(timeout=max(deadline - time.monotonic(), 0.1))
        except subprocess.TimeoutExpired:
            _signal_group(self.pid, signal.SIGKILL)
            self.popen.wait()
        # Children (engine workers) may outlive the leader: the group must be empty.
        if not _wait_group_gone(self.pid, deadline):
            _signal_group(self.pid, signal.SIGKILL)
            _wait_group_gone(self.pid, time.monotonic() + 5.0)
        self._thread.join(timeout=5.0)
        self._log.close()
        return self.popen.returncode


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # killpg also finds zombies (exited, not yet reaped): those run nothing and hold no port.
    members = list(_members(pgid))
    return not members or any(state != "Z" for _, state in members)


def _members(pgid: int) -> Iterator[tuple[Path, str]]:
    """(/proc/<pid>, state) of every process in group `pgid` (nothing without /proc)."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            # The 2nd field (comm, in parentheses) may contain spaces: split after it.
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[2]) == pgid:
                yield stat.parent, fields[0]
        except (OSError, IndexError, ValueError):
            continue


def _wait_group_gone(pgid: int, deadline: float) -> bool:
    while _group_alive(pgid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True


def start_server(
    command: str,
    *,
    env: Mapping[str, str],
    log_path: Path,
    cwd: Path | None = None,
    marker: str | None = None,
    daemon_ok: bool = False,
) -> ServerProcess:
    """Run `command` with bash -c (so $VARS expand) in a new session, output to `log_path`.

    `marker` goes into the environment as DIAGNOSE_SERVER_ID, for `stop_leftover`;
    `daemon_ok`: the command may return 0 leaving the server in the background (a plan that
    has a stop command for it).
    """
    shell = shutil.which("bash") or "/bin/sh"
    try:
        log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open(log_path, "a", encoding="utf-8", newline="")  # noqa: SIM115 (closed by stop)
    except OSError as exc:
        raise LaunchError(f"{log_path}: cannot write the server's log ({exc.strerror})") from None
    try:
        popen = subprocess.Popen(
            [shell, "-c", command],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env={
                **defaults.PLAN_COMMAND_ENV,
                **os.environ,
                **env,
                **({MARKER_VAR: marker} if marker else {}),
            },
            cwd=cwd,
            start_new_session=True,  # own process group: stop() reaches every child
        )
    except OSError as exc:
        log.close()
        raise LaunchError(f"cannot run {shell} to start the server: {exc}") from None
    return ServerProcess(popen, log_path, log, daemon_ok=daemon_ok)


def stop_leftover(pgid: int, marker: str, *, grace_s: float = 30.0) -> bool:
    """Stop a server group left running by a killed sweep; True when there was one.

    Only processes of group `pgid` whose environment carries DIAGNOSE_SERVER_ID=`marker` are
    ours: a reused pid is never signalled (Linux /proc; elsewhere nothing is done).
    """
    if not _group_has_marker(pgid, marker):
        return False
    _signal_group(pgid, signal.SIGTERM)
    if not _wait_group_gone(pgid, time.monotonic() + grace_s):
        _signal_group(pgid, signal.SIGKILL)
        _wait_group_gone(pgid, time.monotonic() + 5.0)
    return True


def _group_has_marker(pgid: int, marker: str) -> bool:
    wanted = f"{MARKER_VAR}={marker}".encode()
    for proc, state in _members(pgid):
        try:
            if state != "Z" and wanted in (proc / "environ").read_bytes().split(b"\0"):
                return True
        except OSError:
            continue
    return False


# -- plan commands (stop, health, logs) ----------------------------------------------------


class ShellResult(BaseModel):
    """How one plan command ended: its status, its output, the tail of its errors."""

    model_config = ConfigDict(extra="forbid")

    returncode: int | None = Field(description="Exit status; None when it ran out of time")
    timeout_s: float = Field(description="The time it was given")
    stdout: bytes = Field(b"", description="What it printed on stdout (the tail, when cut)")
    stdout_total: int = Field(0, description="Bytes it printed on stdout, kept or not")
    stderr_tail: str = Field("", description="Its last stderr lines, redacted")

    @property
    def cut(self) -> bool:
        """Whether stdout was longer than the bytes kept (only its tail is in `stdout`)."""
        return self.stdout_total > len(self.stdout)

    def why(self) -> str:
        """'exit 3: <stderr tail>' or 'no end within N s'; for run records and notes."""
        head = (
            f"no end within {self.timeout_s:g} s"
            if self.returncode is None
            else f"exit {self.returncode}"
        )
        return f"{head}: {self.stderr_tail}" if self.stderr_tail else head


class _Tail:
    """What a pipe gave, keeping only its last `keep` bytes."""

    def __init__(self, keep: int) -> None:
        self.keep, self.total, self.data = keep, 0, bytearray()

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        self.data += chunk
        if len(self.data) > 2 * self.keep:
            del self.data[: len(self.data) - self.keep]

    def bytes(self) -> bytes:
        """The kept tail; when cut, from the first whole line on (a last line longer than
        all that is kept: its end)."""
        data = bytes(self.data[-self.keep :]) if self.keep else b""
        if self.total > len(data) and b"\n" in data[:-1]:
            data = data[data.find(b"\n") + 1 :]
        return data


def _read_until(popen: subprocess.Popen[bytes], tails: dict[int, _Tail], deadline: float) -> bool:
    """Read the pipes into `tails` (fd -> tail) until both end (True) or `deadline` passes."""
    with selectors.DefaultSelector() as selector:
        for fd in tails:
            selector.register(fd, selectors.EVENT_READ)
        while selector.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            for key, _ in selector.select(timeout=min(left, 1.0)):
                chunk = os.read(key.fd, 1 << 16)
                if chunk:
                    tails[key.fd].add(chunk)
                else:
                    selector.unregister(key.fd)
    return True


def run_shell(
    command: str,
    *,
    env: Mapping[str, str],
    timeout_s: float,
    keep_bytes: int = defaults.LOG_KEEP_BYTES,
) -> ShellResult:
    """Run a plan command with bash -c in its own process group; never raises for its
    failure (the whole group is killed when it overruns `timeout_s`). Of its stdout only the
    last `keep_bytes` are kept (a node's log of a gigabyte), from a whole line on."""
    shell = shutil.which("bash") or "/bin/sh"
    try:
        popen = subprocess.Popen(
            [shell, "-c", command],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**defaults.PLAN_COMMAND_ENV, **os.environ, **env},
            start_new_session=True,
        )
    except OSError as exc:
        return ShellResult(returncode=127, timeout_s=timeout_s, stderr_tail=f"{shell}: {exc}")
    assert popen.stdout is not None and popen.stderr is not None
    out, err = _Tail(keep_bytes), _Tail(1 << 16)
    tails = {popen.stdout.fileno(): out, popen.stderr.fileno(): err}
    code: int | None = None
    ended = _read_until(popen, tails, time.monotonic() + timeout_s)
    if ended:
        code = popen.wait()  # its output ended: it ended, or ends now
    else:  # out of time (a child it left in the background holding the pipes, too)
        _signal_group(popen.pid, signal.SIGKILL)
        popen.wait()
        ended = _read_until(popen, tails, time.monotonic() + _DRAIN_S)
    for pipe in (popen.stdout, popen.stderr):
        pipe.close()
    lines = err.bytes().decode("utf-8", "replace").splitlines()
    if not ended:
        lines.append("(a process it started in the background still holds its output)")
    # its last lines, and of those the last characters (one line of megabytes without a
    # newline, a loop printing its error forever)
    tail = redact_text(" | ".join(lines[-TAIL_LINES // 4 :])[-_TAIL_CHARS:])
    return ShellResult(
        returncode=code,
        timeout_s=timeout_s,
        stdout=out.bytes(),
        stdout_total=out.total,
        stderr_tail=tail,
    )


# -- ports -------------------------------------------------------------------------------


def host_port(base_url: str) -> tuple[str, int]:
    """Host and port of a base URL (default ports for http/https)."""
    parts = urlsplit(base_url)
    default = 443 if parts.scheme == "https" else 80
    return parts.hostname or "127.0.0.1", parts.port or default


def port_in_use(host: str, port: int) -> bool:
    """Whether something accepts connections on host:port."""
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def wait_port_free(host: str, port: int, *, timeout_s: float = 30.0) -> bool:
    """Wait until nothing listens on host:port; False when the timeout passed first."""
    deadline = time.monotonic() + timeout_s
    while port_in_use(host, port):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.1)
    return True
