"""Telemetry of one run, sampled in a separate process from before the warm-up to after the
last request, into runs/<run>/telemetry/<source>.csv; run.json says what each source gave.

The recorder is `python -m diagnostic.measure.telemetry.child`: it reads its settings as one
JSON line on stdin, answers `ready` once every source took its first sample, samples until a
`stop` line or the end of stdin (collect gone, kill -9 included), takes one last sample and
prints what each source gave as one JSON line."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from pydantic import BaseModel, ConfigDict, Field, field_validator

import diagnostic
from diagnostic import defaults
from diagnostic.schema.bundle import source_name
from diagnostic.schema.telemetry import TelemetryKind, TelemetrySource

__all__ = ["Recording", "TelemetrySettings", "recording"]

NVML, HOST = "nvml", "host"  # the local sources' names
_PACKAGE_ROOT = str(Path(diagnostic.__file__).resolve().parents[1])


class TelemetrySettings(BaseModel):
    """What to sample during each run (collect --telemetry, a plan's telemetry keys)."""

    model_config = ConfigDict(extra="forbid")

    local: bool = Field(True, description="Sample this machine: NVML's GPUs and the host")
    interval_s: float = Field(
        defaults.TELEMETRY_INTERVAL_S,
        ge=defaults.TELEMETRY_MIN_INTERVAL_S,
        le=defaults.TELEMETRY_MAX_INTERVAL_S,
        description="Seconds between GPU samples",
    )
    quiet_s: float = Field(
        defaults.QUIET_WINDOW_S,
        ge=0,
        le=defaults.QUIET_MAX_S,
        description="Seconds of the quiet window before each run's first request (local "
        "only; 0: none): VM steal and a probe thread's share, which no arm can move",
    )
    remote: dict[str, str] = Field(
        default_factory=dict,
        description="Remote sources: name = a command printing nvidia-smi CSV, or a DCGM "
        "exporter's http(s) URL",
    )

    @field_validator("remote")
    @classmethod
    def _names(cls, value: dict[str, str]) -> dict[str, str]:
        for name in value:
            source_name(name)
            if name in (NVML, HOST):
                raise ValueError(f"telemetry source {name!r} is a local source's name")
        return value

    def kind(self, name: str) -> TelemetryKind:
        """The kind of a source by its name."""
        if name in (NVML, HOST):
            return "nvml" if name == NVML else "host"
        return "dcgm" if self.remote[name].startswith(("http://", "https://")) else "nvidia-smi"


class Recording:
    """A running recorder process; stop() ends it and returns what each source gave."""

    def __init__(
        self, settings: TelemetrySettings, process: subprocess.Popen[str], stderr: IO[bytes]
    ) -> None:
        self.settings = settings
        self._process = process
        self._stderr = stderr
        self._lines: list[str] = []
        self._ready = threading.Event()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self._stopped: dict[str, TelemetrySource] | None = None

    def _read(self) -> None:
        assert self._process.stdout is not None
        for line in self._process.stdout:
            self._lines.append(line)
            if line.strip() == "ready":
                self._ready.set()
        self._ready.set()

    def wait_ready(self, timeout_s: float) -> None:
        """Until every source took its first sample (or the recorder ended, or timeout_s)."""
        self._ready.wait(timeout_s)

    def stop(self) -> dict[str, TelemetrySource]:
        """Stop sampling (after one last sample) and say what each source gave."""
        if self._stopped is not None:
            return self._stopped
        with contextlib.suppress(OSError):
            assert self._process.stdin is not None
            self._process.stdin.write("stop\n")
            self._process.stdin.close()
        try:
            self._process.wait(timeout=defaults.TELEMETRY_STOP_S)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        self._reader.join(timeout=defaults.TELEMETRY_STOP_S)
        self._stopped = self._result()
        if self._process.stdout is not None:
            self._process.stdout.close()
        self._stderr.close()
        return self._stopped

    def _result(self) -> dict[str, TelemetrySource]:
        for line in reversed(self._lines):
            if line.startswith("{"):
                with contextlib.suppress(ValueError):
                    found = json.loads(line)
                    return {n: TelemetrySource.model_validate(v) for n, v in found.items()}
        err = _tail(self._stderr)
        why = f"the telemetry recorder ended without a result (exit {self._process.returncode})"
        why += f": {err}" if err else ""
        names = ([NVML, HOST] if self.settings.local else []) + list(self.settings.remote)
        return {
            n: TelemetrySource(
                kind=self.settings.kind(n), interval_s=self.settings.interval_s, absent=why
            )
            for n in names
        }


def _tail(stream: IO[bytes]) -> str:
    with contextlib.suppress(OSError, ValueError):
        stream.seek(0)
        return stream.read().decode("utf-8", "replace")[-300:].strip()
    return ""


@contextlib.contextmanager
def recording(
    run_dir: Path, settings: TelemetrySettings | None, *, origin: float, server_pid: int | None
) -> Iterator[Recording | None]:
    """Sample from entering (once every source took its first sample) to leaving; None when
    telemetry is off. Sampling runs in its own light process: it takes no time from collect's
    event loop (the GIL), and a slow source never delays a request."""
    if settings is None or not (settings.local or settings.remote):
        yield None
        return
    env = {**defaults.PLAN_COMMAND_ENV, **os.environ}  # the telemetry commands' too
    env["PYTHONPATH"] = os.pathsep.join(p for p in (_PACKAGE_ROOT, env.get("PYTHONPATH", "")) if p)
    stderr = tempfile.TemporaryFile()  # noqa: SIM115 - closed by Recording.stop
    process = subprocess.Popen(
        [sys.executable, "-m", "diagnostic.measure.telemetry.child"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=stderr,  # a file: a traceback never fills a pipe
        text=True,
        env=env,
    )
    config = {
        "run_dir": str(run_dir),
        "settings": settings.model_dump(),
        "origin": origin,
        "server_pid": server_pid,
        "client_pid": os.getpid(),
    }
    assert process.stdin is not None
    process.stdin.write(json.dumps(config) + "\n")
    process.stdin.flush()
    rec = Recording(settings, process, stderr)
    rec.wait_ready(defaults.TELEMETRY_START_S)
    try:
        yield rec
    finally:
        rec.stop()
