"""Telemetry of one run, sampled in a separate process from before the warm-up to after the
last request, into runs/<run>/telemetry/<source>.csv; run.json says what each source gave."""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from diagnostic import defaults
from diagnostic.bundle.redact import redact_text
from diagnostic.bundle.telemetry import TelemetryWriter
from diagnostic.measure.telemetry.samplers import (
    CommandSource,
    DcgmSource,
    HostSampler,
    NvmlSampler,
    Sampler,
    wall_clock_origin,
)
from diagnostic.schema.bundle import source_name
from diagnostic.schema.telemetry import TelemetryKind, TelemetrySource, telemetry_file

__all__ = ["Recording", "TelemetrySettings", "recording"]

NVML, HOST = "nvml", "host"  # the local sources' names


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

    def __init__(self, settings: TelemetrySettings, process: Any, done: Any, results: Any):
        self.settings = settings
        self._process, self._done, self._results = process, done, results

    def stop(self) -> dict[str, TelemetrySource]:
        """Stop sampling (after one last sample) and say what each source gave."""
        self._done.set()
        found: dict[str, Any] = {}
        with contextlib.suppress(Exception):
            found = self._results.get(timeout=defaults.TELEMETRY_STOP_S)
        self._process.join(timeout=defaults.TELEMETRY_STOP_S)
        if self._process.is_alive():
            self._process.kill()
            self._process.join()
        if not found:
            why = f"the telemetry recorder ended without a result (exit {self._process.exitcode})"
            return {n: self._source(n, why) for n in self._names()}
        return {n: TelemetrySource.model_validate(v) for n, v in found.items()}

    def _names(self) -> list[str]:
        return ([NVML, HOST] if self.settings.local else []) + list(self.settings.remote)

    def _source(self, name: str, absent: str) -> TelemetrySource:
        return TelemetrySource(
            kind=self.settings.kind(name), interval_s=self.settings.interval_s, absent=absent
        )


@contextlib.contextmanager
def recording(
    run_dir: Path, settings: TelemetrySettings | None, *, origin: float, server_pid: int | None
) -> Iterator[Recording | None]:
    """Sample from entering (once every source took its first sample) to leaving; None when
    telemetry is off. Sampling runs in a spawned process: it takes no time from collect's
    event loop (the GIL) and a slow source never delays a request."""
    if settings is None or not (settings.local or settings.remote):
        yield None
        return
    ctx = mp.get_context("spawn")
    ready, done, results = ctx.Event(), ctx.Event(), ctx.Queue()
    args = (str(run_dir), settings.model_dump(), origin, server_pid, os.getpid())
    process = ctx.Process(
        target=_main, args=(*args, ready, done, results), name="diagnose-telemetry", daemon=True
    )
    process.start()
    ready.wait(timeout=defaults.TELEMETRY_START_S)
    rec = Recording(settings, process, done, results)
    try:
        yield rec
    finally:
        if not done.is_set():
            rec.stop()


def _main(
    run_dir: str,
    raw: dict[str, Any],
    origin: float,
    server_pid: int | None,
    parent: int,
    ready: Any,
    done: Any,
    results: Any,
) -> None:
    """The recorder process: open the sources, sample every interval until told to stop (or
    collect is gone), then report what each gave."""
    settings = TelemetrySettings.model_validate(raw)
    clock = wall_clock_origin(origin)
    sources = _open(settings, clock, parent, server_pid)
    writers = {
        n: TelemetryWriter(Path(run_dir), n, settings.kind(n))
        for n, s in sources.items()
        if s.absent is None
    }
    every = {n: _interval(settings, n) for n in sources}
    due = dict.fromkeys(sources, 0.0)
    try:
        first = True
        while True:
            now = clock()
            for name in writers:
                if now >= due[name]:
                    due[name] = now + every[name]
                    _take(sources[name], writers[name], clock)
            if first:
                ready.set()
                first = False
            if done.wait(timeout=max(0.0, min(due.values()) - clock())) or os.getppid() != parent:
                break
        for name in writers:  # the last sample, after the last request
            _take(sources[name], writers[name], clock)
    finally:
        ready.set()
        for writer in writers.values():
            writer.close()
        for source in sources.values():
            source.close()
        results.put(_report(settings, sources, writers))


def _open(
    settings: TelemetrySettings, clock: Any, parent: int, server_pid: int | None
) -> dict[str, Sampler]:
    sources: dict[str, Sampler] = {}
    if settings.local:
        sources[NVML] = NvmlSampler()
        sources[HOST] = HostSampler(parent, server_pid)
    for name, command in settings.remote.items():
        if settings.kind(name) == "dcgm":
            sources[name] = DcgmSource(name, command, timeout_s=settings.interval_s)
        else:
            sources[name] = CommandSource(name, command, clock)
    return sources


def _interval(settings: TelemetrySettings, name: str) -> float:
    """A remote command sets its own pace (it is drained at the GPU interval); the host's
    process table is read at most every TELEMETRY_HOST_INTERVAL_S (reading it costs CPU)."""
    if name == HOST:
        return max(settings.interval_s, defaults.TELEMETRY_HOST_INTERVAL_S)
    return settings.interval_s


def _take(source: Sampler, writer: TelemetryWriter, clock: Any) -> None:
    t = clock()
    rows = source.sample()
    for row in rows:
        row.setdefault("t_s", t)
    if rows:
        writer.write(rows)


def _report(
    settings: TelemetrySettings, sources: dict[str, Sampler], writers: dict[str, TelemetryWriter]
) -> dict[str, Any]:
    out = {}
    for name, source in sources.items():
        writer = writers.get(name)
        absent = source.absent
        if writer is not None and writer.rows == 0 and absent is None:
            absent = "no sample arrived: " + ("; ".join(source.errors) or "the source was silent")
        out[name] = TelemetrySource(
            kind=settings.kind(name),
            file=telemetry_file(name) if writer is not None else None,
            interval_s=_interval(settings, name),
            command=redact_text(settings.remote[name]) if name in settings.remote else None,
            samples=writer.rows if writer is not None else 0,
            absent=absent,
            errors=source.errors,
        ).model_dump()
    return out
