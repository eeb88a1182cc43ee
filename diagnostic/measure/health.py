"""Waiting for a launched server to be ready: the plan's health command, or HTTP probes
(/health, /v1/models, a 1-token completion) read as data from outside; a launch that exits,
daemonises or never gets ready ends with its log's last lines, within the plan's timeouts."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any, Literal

import httpx
from pydantic import BaseModel, ConfigDict, Field

from diagnostic.bundle.redact import redact_text
from diagnostic.common.answers import (
    ACCEPT_ENCODING,
    Deadline,
    Unreadable,
    parse_json,
    read_body,
)
from diagnostic.defaults import SHELL_TIMEOUT_S
from diagnostic.errors import LaunchError
from diagnostic.measure.launch import ServerProcess, run_shell

__all__ = ["Health", "wait_command", "wait_healthy"]

# Answers meaning "this server has no such endpoint" rather than "not ready yet".
_ABSENT = {404, 405, 501}


class Health(BaseModel):
    """How a started server proved it was ready."""

    model_config = ConfigDict(extra="forbid")

    startup_s: float = Field(description="Seconds from launch to a successful 1-token probe")
    health_endpoint: str | None = Field(None, description="/health, or None when absent")
    model: str | None = Field(None, description="Model name the probe used")


def wait_command(
    server: ServerProcess,
    command: str,
    *,
    env: Mapping[str, str],
    timeout_s: float,
    poll_s: float,
    command_timeout_s: float = SHELL_TIMEOUT_S,
) -> Health:
    """Run a plan's health command until it exits 0, each run bounded by `command_timeout_s`
    and all by `timeout_s`; fail fast when the launch exits (see _launch_exited)."""
    deadline = server.started + timeout_s
    while True:
        left = deadline - time.monotonic()
        result = run_shell(command, env=env, timeout_s=max(min(left, command_timeout_s), 1.0))
        if result.returncode == 0:
            return Health(startup_s=round(time.monotonic() - server.started, 3))
        _launch_exited(server)
        if time.monotonic() + poll_s >= deadline:
            late = " ([plan] command_timeout_s)" if result.returncode is None else ""
            raise _start_failed(
                server,
                f"the health command did not succeed within {timeout_s:g} s (last: "
                f"{result.why()}{late}); raise [plan] health_timeout_s if it is only slow",
            )
        time.sleep(poll_s)


def _launch_exited(server: ServerProcess) -> None:
    """Raise when the launch command ended during start-up. Status 0 is a launch that
    started the server in the background (`&`, `docker run -d`, nohup) and returned: with a
    [plan] stop command to stop it (the server's `daemon_ok`), that is how it runs (start-up
    is still bounded by health_timeout_s); without one, diagnose could neither stop nor
    restart that server."""
    code = server.poll()
    if code is None or server.daemonised:
        return
    if code == 0:
        raise _start_failed(
            server,
            "the launch command exited (status 0) during start-up: it seems to start the "
            "server in the background (&, -d, nohup, a service) and return, so diagnose can "
            "neither stop nor restart it; run the server in the foreground, or give a [plan] "
            "stop command that stops it",
        )
    raise _start_failed(server, f"the launch command exited with status {code} during start-up")


def wait_healthy(
    server: ServerProcess,
    base_url: str,
    *,
    timeout_s: float,
    api: Literal["completions", "chat"] = "completions",
    model: str | None = None,
    api_key: str | None = None,
    poll_s: float = 0.25,
) -> Health:
    """Wait for GET /health (else /v1/models), then a 1-token completion answered with 200.

    Fails fast with the log's last lines when the process exits (status 0 only when the
    server is not `daemon_ok`: see _launch_exited) or `timeout_s` passes.
    """
    deadline = server.started + timeout_s
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    probe = _Probe(base_url.rstrip("/"), api, model)
    with httpx.Client(
        headers={**ACCEPT_ENCODING, **headers},
        timeout=httpx.Timeout(5.0, connect=2.0),
        limits=httpx.Limits(max_keepalive_connections=0),  # each probe's Deadline sees its own
    ) as client:
        while True:
            _launch_exited(server)
            remaining = deadline - time.monotonic()
            if probe.step(client, remaining):
                return Health(
                    startup_s=round(time.monotonic() - server.started, 3),
                    health_endpoint=probe.health_endpoint,
                    model=probe.model,
                )
            if time.monotonic() >= deadline:
                raise _start_failed(
                    server,
                    f"the server did not become healthy within {timeout_s:g} s "
                    f"(last check: {probe.last}); raise [plan] health_timeout_s if it is only "
                    "slow",
                )
            time.sleep(poll_s)


def _start_failed(server: ServerProcess, why: str) -> LaunchError:
    """A failed start-up, with the launch log's last lines and where the whole log is."""
    tail = server.tail()
    return LaunchError(
        f"{why}; last log lines:\n{_indent(tail)}\nfull log: {server.log_path}", tail=tail
    )


def _indent(lines: list[str]) -> str:
    return "\n".join(f"  | {line}" for line in lines) or "  | (the log is empty)"


_PROBE_BYTES = 4 * 2**20  # a health, /v1/models or 1-token answer is far smaller


class _Probe:
    """The readiness checks, in order: /health (or /v1/models), then a 1-token completion.
    Each answer is read within _PROBE_BYTES and the time left, whatever the server sends."""

    def __init__(self, base_url: str, api: str, model: str | None) -> None:
        self.base_url = base_url
        self.api = api
        self.model = model
        self.health_endpoint: str | None = "/health"
        self.last = "no answer yet"

    def step(self, client: httpx.Client, remaining: float) -> bool:
        """One round of checks; True when the server answered a completion."""
        with Deadline(max(remaining, 1.0)) as deadline:
            try:
                if not self._ready(client, deadline):
                    return False
                return self._complete(client, deadline)
            except httpx.HTTPError as exc:
                self.last = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
                if deadline.passed:
                    self.last = f"no whole answer before the deadline ({self.last})"
                return False
            except Unreadable as exc:
                self.last = f"{self.last}: {exc}"
                return False

    def _ask(
        self, client: httpx.Client, method: str, path: str, deadline: Deadline, **kw: Any
    ) -> tuple[int, bytes]:
        url = self.base_url + path
        self.last = f"{method} {path} -> no answer"
        with client.stream(method, url, extensions=deadline.extensions, **kw) as answer:
            self.last = f"{method} {path} -> {answer.status_code}"
            body = read_body(answer, limit=_PROBE_BYTES, deadline=deadline.end)
        self.last = f"{method} {path} -> {answer.status_code} {_snippet(body)}"
        return answer.status_code, body

    def _ready(self, client: httpx.Client, deadline: Deadline) -> bool:
        if self.health_endpoint is not None:
            status, _ = self._ask(client, "GET", self.health_endpoint, deadline)
            if status in _ABSENT:
                self.health_endpoint = None  # e.g. llama-cpp-python: ask /v1/models instead
            elif status != 200:
                return False
        if self.model is None or self.health_endpoint is None:
            status, body = self._ask(client, "GET", "/v1/models", deadline)
            if status != 200:
                return False
            self.model = self.model or _first_model(body)
        return True

    def _complete(self, client: httpx.Client, deadline: Deadline) -> bool:
        path = "/v1/completions" if self.api == "completions" else "/v1/chat/completions"
        body: dict[str, Any] = {"max_tokens": 1, "temperature": 0}
        if self.api == "completions":
            body["prompt"] = "Hello"
        else:
            body["messages"] = [{"role": "user", "content": "Hello"}]
        if self.model:
            body["model"] = self.model
        # The first generation may compile kernels: allow it most of the time left.
        timeout = httpx.Timeout(max(min(deadline.left(), 300.0), 1.0), connect=2.0)
        status, _ = self._ask(client, "POST", path, deadline, json=body, timeout=timeout)
        return status == 200


def _first_model(body: bytes) -> str | None:
    try:
        data = parse_json(body)
    except Unreadable:
        return None
    models = data.get("data") if isinstance(data, dict) else None
    first = models[0] if isinstance(models, list) and models else None
    model = first.get("id") if isinstance(first, dict) else None
    return model if isinstance(model, str) else None


def _snippet(body: bytes) -> str:
    text = " ".join(body[:4096].decode("utf-8", "replace").split())
    return redact_text(text[:160] + ("…" if len(text) > 160 else ""))
