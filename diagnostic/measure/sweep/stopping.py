"""A start's end: the plan's stop command, and the server it should have stopped, looked at
again (a stop that ends with 0 and stops nothing leaves a server the next start would measure)."""

from __future__ import annotations

import time
from collections.abc import Mapping

from diagnostic import defaults
from diagnostic.bundle.redact import redact_command
from diagnostic.measure.launch import port_in_use, run_shell
from diagnostic.measure.remote import ssh_hosts

__all__ = ["STOP_FAILED", "run_stop", "still_answers", "stop_failure"]

STOP_FAILED = "the stop command failed"  # in a run's failure: its server may still run


def run_stop(stop: str, *, env: Mapping[str, str], timeout_s: float) -> str | None:
    """Run the plan's stop command; why it failed (naming the nodes it reaches and the
    command), None when it did not."""
    result = run_shell(stop, env=env, timeout_s=timeout_s)
    if result.returncode == 0:
        return None
    why = (
        f"no end within {timeout_s:g} s ([plan] command_timeout_s)"
        if result.returncode is None
        else result.why()
    )
    return stop_failure(stop, f" ({why})")


def stop_failure(stop: str, said: str) -> str:
    """A run's failure for a stop command that did not stop its server: the nodes it
    reaches over ssh, what was seen, and the command (redacted)."""
    hosts = ssh_hosts(stop)
    nodes = f" on {', '.join(hosts)}" if hosts else ""
    return f"{STOP_FAILED}{nodes}{said}: {redact_command(stop)}"


def still_answers(
    health: str | None,
    *,
    env: Mapping[str, str],
    host: str,
    port: int,
    grace_s: float,
    timeout_s: float,
) -> str | None:
    """What still answers `grace_s` after the stop ("its port H:P", "its health command": the
    health command says a second node's server too); None as soon as nothing does."""
    deadline = time.monotonic() + grace_s
    while True:
        answers = f"its port {host}:{port}" if port_in_use(host, port) else ""
        if not answers and health is not None:
            up = run_shell(health, env=env, timeout_s=timeout_s).returncode == 0
            answers = "its health command" if up else ""
        if not answers:
            return None
        if time.monotonic() >= deadline:
            return answers
        pause = defaults.HEALTH_POLL_S if health is not None else 0.1
        time.sleep(min(pause, max(deadline - time.monotonic(), 0.1)))
