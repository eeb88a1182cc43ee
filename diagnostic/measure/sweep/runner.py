"""One scheduled start of a sweep: launch, health, collect_run, stop; the run always recorded."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from diagnostic import defaults
from diagnostic.bundle.redact import redact_command, redact_env, redact_variables
from diagnostic.bundle.seal import seal_line, seal_run
from diagnostic.bundle.store import Bundle, log_file, metrics_files, run_id
from diagnostic.common.progress import Reporter, WithOverall
from diagnostic.engines import parse_log
from diagnostic.errors import DiagnosticError
from diagnostic.measure.client import server_url
from diagnostic.measure.collect import RunSettings, collect_run
from diagnostic.measure.health import wait_command, wait_healthy
from diagnostic.measure.launch import (
    LaunchError,
    ServerProcess,
    host_port,
    shell_variables,
    start_server,
    stop_leftover,
    wait_port_free,
)
from diagnostic.measure.plan.commands import Commands
from diagnostic.measure.plan.spec import Plan
from diagnostic.measure.remote import ssh_hosts
from diagnostic.measure.schedule import Start
from diagnostic.measure.sweep.logs import capture_logs
from diagnostic.measure.sweep.stopping import STOP_FAILED, run_stop, still_answers, stop_failure
from diagnostic.schema.bundle import MAIN_SOURCE, LaunchInfo, RunInfo, utc_now

__all__ = ["OVERALL", "OutcomeStatus", "RunOutcome", "StartRunner", "capture_facts"]

OVERALL = "sweep"  # the reporter label of the overall bar (steps = requests)
REQUESTS = "requests.jsonl"
SERVER = log_file(MAIN_SOURCE)  # the launch command's output: logs/server.log
OutcomeStatus = Literal["ok", "failed", "interrupted", "skipped", "planned", "decided"]


class RunOutcome(BaseModel):
    """What happened to one scheduled start."""

    model_config = ConfigDict(extra="forbid")

    start: Start = Field(description="The scheduled start")
    status: OutcomeStatus = Field(
        description="ok, failed, interrupted, skipped (done), planned, or decided (the arm's "
        "comparisons were decided at a look: not started)"
    )
    failure: str | None = Field(None, description="Why it failed")
    startup_s: float | None = Field(None, description="Seconds from launch to healthy")


class StartRunner:
    """Runs one scheduled start at a time against a bundle."""

    def __init__(
        self, bundle: Bundle, plan: Plan, settings: RunSettings, reporter: Reporter, grace_s: float
    ) -> None:
        self.bundle = bundle
        self.plan = plan
        self.settings = settings
        self.reporter = reporter
        self.grace_s = grace_s
        self.host, self.port = host_port(server_url(plan.base_url))
        per_level = settings.warmup + settings.requests
        self.steps_per_start = len(settings.workloads) * len(settings.concurrency) * per_level
        self.headline = ""  # what the overall bar says after each start's own status

    def run(self, start: Start) -> RunOutcome:
        """Launch, wait, collect, stop one start; record the run whatever happens."""
        progress = _StartProgress(self.reporter, start, self.headline)
        try:
            info = self._run(start, progress)
        finally:
            # Settle the overall bar for what collect did not report (skipped, failed).
            progress.settle(self.steps_per_start)
        status: OutcomeStatus = "failed" if info.status == "running" else info.status
        if progress.skipped:
            status = "skipped"
        return RunOutcome(
            start=start, status=status, failure=info.failure, startup_s=_startup(info)
        )

    def _run(self, start: Start, progress: _StartProgress) -> RunInfo:
        previous = self.bundle.find_run(start.arm, start.restart)
        if previous is not None and previous.status == "ok":
            progress.skipped = True
            return previous
        info = self._new_run(start, previous)
        if not wait_port_free(self.host, self.port, timeout_s=self.grace_s):
            busy = f"port {self.port} is in use by another process; stop it or change [plan] port"
            return self._finish(info, None, "failed", busy)
        arm = self.plan.arm(start.arm)
        server = start_server(
            self._commands(info).launch,
            env=arm.env,
            log_path=self._path(start, SERVER),
            marker=self._marker(start),
            daemon_ok=self._commands(info).stop is not None,
        )
        assert info.launch is not None
        info.launch.pid = server.pid
        self.bundle.write_run(info)
        try:
            return self._measure(info, server, progress)
        except BaseException as exc:
            why = f"{type(exc).__name__}: {exc}"
            if isinstance(exc, KeyboardInterrupt):  # Ctrl-C, or SIGTERM/SIGHUP via the CLI
                why = str(exc) or "Ctrl-C"
            with _signals_ignored():
                self._finish(
                    info, server, "interrupted", f"interrupted ({why}); continue with --resume"
                )
            raise

    def _measure(self, info: RunInfo, server: ServerProcess, progress: _StartProgress) -> RunInfo:
        o = self.plan.options
        env = self.plan.arm(info.arm).env
        health = self._commands(info).health
        try:
            if health is not None:
                ready = wait_command(
                    server,
                    health,
                    env=env,
                    timeout_s=o.health_timeout_s,
                    poll_s=defaults.HEALTH_POLL_S,
                    command_timeout_s=o.command_timeout_s,
                )
            else:
                ready = wait_healthy(
                    server,
                    self.plan.base_url,
                    timeout_s=o.health_timeout_s,
                    api=o.api,
                    model=o.model,
                    api_key=self.settings.api_key,
                )
        except LaunchError as exc:
            return self._finish(info, server, "failed", str(exc))
        assert info.launch is not None
        info.launch.startup_s = ready.startup_s
        self.bundle.write_run(info)
        info = self._capture_logs(info, "after start-up")
        try:
            info = collect_run(self.bundle, info, self._settings(info), reporter=progress)
        except DiagnosticError as exc:
            info = self._capture_logs(info, "after the failed measurement")
            return self._finish(info, server, "failed", self._died(server, info) or str(exc))
        info = self._capture_logs(info, "after the last request")
        died = self._died(server, info)
        if died or info.status != "ok":
            return self._finish(info, server, "failed", died or info.failure)
        return self._finish(info, server, "ok", None)

    def _settings(self, info: RunInfo) -> RunSettings:
        """The sweep's settings with the plan's telemetry templates rendered for this start."""
        telemetry = self.settings.telemetry
        if telemetry is None or not telemetry.remote:
            return self.settings
        rendered = telemetry.model_copy(update={"remote": self._commands(info).telemetry})
        return self.settings.model_copy(update={"telemetry": rendered})

    def _commands(self, info: RunInfo) -> Commands:
        return self.plan.arm(info.arm).commands.at(info.restart)

    def _capture_logs(self, info: RunInfo, when: str) -> RunInfo:
        logs, env = self._commands(info).logs, self.plan.arm(info.arm).env
        o = self.plan.options
        return capture_logs(
            self.bundle,
            info,
            logs,
            env=env,
            when=when,
            reporter=self.reporter,
            timeout_s=o.command_timeout_s,
            keep_bytes=o.log_keep_bytes,
        )

    def _run_stop(self, info: RunInfo) -> str | None:
        """The plan's stop command, before the launch's process group is signalled; why it
        failed (naming the nodes it reaches and the command), None when it did not."""
        stop = self._commands(info).stop
        if stop is None:
            return None
        env, timeout = self.plan.arm(info.arm).env, self.plan.options.command_timeout_s
        failure = run_stop(stop, env=env, timeout_s=timeout)
        if failure is not None:
            self.reporter.note(
                f"{info.arm}-r{info.restart}: {failure}; signalling the launch's process group "
                "all the same; the server may still run there (--resume runs the stop command "
                "first)"
            )
        return failure

    def _still_running(self, info: RunInfo) -> str | None:
        """After a stop that went well: why the server still runs `grace_s` later (its port
        or, with a stop command, its health command still answering). Without a stop command
        the launch's group was signalled: a port still busy is only noted."""
        stop, health = self._commands(info).stop, self._commands(info).health
        answers = still_answers(
            health if stop is not None else None,
            env=self.plan.arm(info.arm).env,
            host=self.host,
            port=self.port,
            grace_s=self.grace_s,
            timeout_s=self.plan.options.command_timeout_s,
        )
        if answers is None:
            return None
        if stop is None:
            self.reporter.note(f"port {self.port} still busy {self.grace_s:g} s after the stop")
            return None
        failure = stop_failure(
            stop,
            f": it ended with exit 0, but {answers} still answers {self.grace_s:g} s later: the "
            "server still runs; stop it there by hand before the next start",
        )
        self.reporter.note(f"{info.arm}-r{info.restart}: {failure}")
        return failure

    def stop_leftovers(self) -> None:
        """Before a resumed sweep starts anything: the servers its earlier runs may have left
        running (a sweep killed outright, a stop command that failed) are stopped, the local
        process group by its marker and the plan's stop command for each (once per distinct
        command), so no start measures against an orphan."""
        done: set[str] = set()
        for run in self.bundle.runs():
            left = run.status == "running" or STOP_FAILED in (run.failure or "")
            if run.launch is None or not left:
                continue
            start = Start(index=0, block=run.block, arm=run.arm, restart=run.restart)
            pid = run.launch.pid
            if pid and stop_leftover(pid, self._marker(start), grace_s=self.grace_s):
                self.reporter.note(f"stopped the server (pid {pid}) a killed sweep left running")
            stop = self._commands(run).stop
            if stop is None or stop in done:
                continue
            done.add(stop)
            self.reporter.note(
                f"{run_id(run.arm, run.restart)} was left {run.status}: running the plan's stop "
                "command before anything starts"
            )
            self._run_stop(run)

    def _marker(self, start: Start) -> str:
        return f"{self.bundle.path.resolve()}:{start.arm}-r{start.restart}"

    def _died(self, server: ServerProcess, info: RunInfo) -> str | None:
        code = server.poll()
        if code is None or server.daemonised:
            return None
        tail = "\n".join(f"  | {line}" for line in server.tail()[-10:])
        hosts = ssh_hosts(self._commands(info).launch)
        lost = (
            f" (ssh's own status: the connection to {', '.join(hosts)} was lost; the server "
            "may still run there)"
            if code == 255 and hosts
            else ""
        )
        return (
            f"the server exited with status {code}{lost} during the measurement; last log "
            f"lines:\n{tail}"
        )

    def _new_run(self, start: Start, previous: RunInfo | None) -> RunInfo:
        arm = self.plan.arm(start.arm)
        logs = self._keep_attempt(start, previous)
        attempts = previous.attempts + 1 if previous is not None else 1
        info = RunInfo(
            attempts=attempts,
            arm=start.arm,
            restart=start.restart,
            block=start.block,
            base_url=self.plan.base_url,
            model=self.plan.options.model,
            logs=[*logs, SERVER],
            sources={MAIN_SOURCE: SERVER},
        )
        launch = self._commands(info).launch
        info.launch = LaunchInfo(
            command=redact_command(launch),
            env=redact_env(arm.env),
            variables=redact_variables(launch, _values(launch, arm.env)),
        )
        self.bundle.write_run(info)
        return info

    def _keep_attempt(self, start: Start, previous: RunInfo | None) -> list[str]:
        """Set an earlier attempt's files aside as *.attempt<N>.*; return the logs kept.

        A restart is one server process: a run that did not end ok (failed, interrupted, or
        killed while running) is measured afresh on the new process, warm-up first, and the
        earlier process's records are kept apart, never mixed in or analysed.
        """
        current = list(previous.sources.values()) if previous else [SERVER]
        old = [name for name in (previous.logs if previous else []) if name not in current]
        n = 1 + max((_attempt(name) for name in old), default=0)
        names = list(current)
        if previous is not None and previous.status != "ok":
            folder = self._path(start, REQUESTS).parent
            names += [REQUESTS, *metrics_files(sorted(p.name for p in folder.glob("*.prom")))]
            # telemetry of the earlier process: on its own clock, never appended to
            names += sorted(
                f"telemetry/{p.name}"
                for p in (folder / "telemetry").glob("*.csv")
                if ".attempt" not in p.name
            )
        for name in names:
            path = self._path(start, name)
            if path.is_file():
                kept = str(Path(name).with_name(f"{path.stem}.attempt{n}{path.suffix}"))
                path.rename(self._path(start, kept))
                if name in current:
                    old.append(kept)
        return old

    def _path(self, start: Start, name: str) -> Path:
        return self.bundle.run_file(start.arm, start.restart, name)

    def _finish(
        self,
        info: RunInfo,
        server: ServerProcess | None,
        status: Literal["ok", "failed", "interrupted"],
        failure: str | None,
    ) -> RunInfo:
        launch = info.launch
        if server is not None:
            assert launch is not None
            stopped = self._run_stop(info)
            if stopped is not None:  # the server may still run on its node
                status, failure = (
                    ("failed" if status == "ok" else status),
                    "; ".join(w for w in (failure, stopped) if w),
                )
            launch.exit_code = server.stop(grace_s=self.grace_s)
            running = self._still_running(info) if stopped is None else None
            if running is not None:
                status = "failed" if status == "ok" else status
                failure = "; ".join(w for w in (failure, running) if w)
        # collect_run may have written run.json since (fingerprint, its own verdict): build on it.
        current = self.bundle.find_run(info.arm, info.restart) or info
        current = current.model_copy(
            update={
                "launch": launch,
                "status": status,
                "failure": failure,
                "ended_at": utc_now(),
                "capture": capture_facts(self.bundle.log_sources(current).get(MAIN_SOURCE)),
            }
        )
        self.bundle.write_run(current)
        # The server is stopped, its log closed: the run's files are final. Seal them, and say
        # the seal, so the client's engineer watching on site can note it.
        sealed = seal_run(self.bundle, current.arm, current.restart)
        self.reporter.note(seal_line(sealed))
        return sealed


class _StartProgress(WithOverall):
    """The reporter collect_run sees: forwards, and feeds the overall bar with the same steps."""

    def __init__(self, outer: Reporter, start: Start, headline: str) -> None:
        block = f"block {start.block + 1} · " if start.block is not None else ""
        super().__init__(outer, OVERALL, f"{block}{start.arm} r{start.restart}")
        self.headline = headline
        self.skipped = False

    def settle(self, total: int) -> None:
        """Move the overall bar by the steps of this start that were not reported."""
        rest = max(total - self.done, 0)
        if rest:
            state = "already done" if self.skipped else "ended"
            self.outer.advance(OVERALL, rest, status=self.line(state))
        self.done = max(self.done, total)


def capture_facts(log: Path | None) -> dict[str, Any] | None:
    """The capture facts `diagnose check` resolves from the server log (None without a log)."""
    if log is None or not log.is_file():
        return None
    try:
        return parse_log(log).capture.model_dump(mode="json")
    except Exception as exc:
        # A convenience copy: `check` re-reads server.log offline, so a parser failure must
        # not cost a measured run (or the rest of a long sweep).
        return {"error": f"{type(exc).__name__}: {exc}"}


def _attempt(name: str) -> int:
    """N of an earlier attempt's file name (*.attempt<N>.*), 0 for any other file."""
    stem = Path(name).stem
    _, dot, n = stem.rpartition(".attempt")
    return int(n) if dot and n.isdigit() else 0


def _startup(info: RunInfo) -> float | None:
    return info.launch.startup_s if info.launch else None


@contextlib.contextmanager
def _signals_ignored() -> Iterator[None]:
    """A second Ctrl-C (or SIGTERM, SIGHUP) must not abandon a half-stopped server."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    signals = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    previous = {sig: signal.signal(sig, signal.SIG_IGN) for sig in signals}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _values(launch: str, env: dict[str, str]) -> dict[str, str]:
    """What the shell will put for each variable the launch names (the arm's env first, then
    this process's), so the report can show the command as it ran; unset ones are left out."""
    seen = {**os.environ, **env}
    return {name: seen[name] for name in shell_variables(launch) if name in seen}
