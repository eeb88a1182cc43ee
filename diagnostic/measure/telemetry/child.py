"""The telemetry recorder process (recorder.py says its protocol): samples every source at its
interval into its CSV until told to stop, then prints what each source gave."""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path
from typing import Any

from diagnostic import defaults
from diagnostic.bundle.redact import redact_command
from diagnostic.bundle.telemetry import TelemetryWriter
from diagnostic.measure.telemetry.recorder import HOST, TelemetrySettings
from diagnostic.measure.telemetry.samplers import (
    CommandSource,
    DcgmSource,
    HostSampler,
    NvmlSampler,
    Sampler,
    wall_clock_origin,
)
from diagnostic.schema.telemetry import TelemetrySource, telemetry_file

__all__ = ["main"]


def main() -> None:
    """Read the settings line, sample until `stop` or the end of stdin, print the report."""
    config = json.loads(sys.stdin.readline())
    settings = TelemetrySettings.model_validate(config["settings"])
    clock = wall_clock_origin(config["origin"])
    done = threading.Event()
    threading.Thread(target=_watch_stdin, args=(done,), daemon=True).start()
    sources = _open(settings, clock, config["client_pid"], config["server_pid"])
    writers = {
        n: TelemetryWriter(Path(config["run_dir"]), n, settings.kind(n))
        for n, s in sources.items()
        if s.absent is None
    }
    try:
        _loop(settings, sources, writers, clock, done)
    finally:
        for writer in writers.values():
            writer.close()
        for source in sources.values():
            source.close()
        print(json.dumps(_report(settings, sources, writers)), flush=True)


def _watch_stdin(done: threading.Event) -> None:
    """`stop`, or stdin's end (collect gone), ends the recording."""
    for line in sys.stdin:
        if line.strip() == "stop":
            break
    done.set()


def _loop(
    settings: TelemetrySettings,
    sources: dict[str, Sampler],
    writers: dict[str, TelemetryWriter],
    clock: Any,
    done: threading.Event,
) -> None:
    every = {n: _interval(settings, n) for n in writers}
    due = dict.fromkeys(writers, 0.0)
    first = True
    while True:
        now = clock()
        for name in writers:
            if now >= due[name]:
                due[name] = now + every[name]
                _take(sources[name], writers[name], clock)
        if first:
            print("ready", flush=True)
            first = False
        wait = min(due.values(), default=now + settings.interval_s) - clock()
        if done.wait(timeout=max(0.0, wait)):
            break
    for name in writers:  # the last sample, after the last request
        _take(sources[name], writers[name], clock)


def _open(
    settings: TelemetrySettings, clock: Any, client_pid: int, server_pid: int | None
) -> dict[str, Sampler]:
    sources: dict[str, Sampler] = {}
    if settings.local:
        sources["nvml"] = NvmlSampler()
        sources[HOST] = HostSampler(client_pid, server_pid)
    for name, command in settings.remote.items():
        if settings.kind(name) == "dcgm":
            sources[name] = DcgmSource(name, command, timeout_s=settings.interval_s)
        else:
            sources[name] = CommandSource(name, command, clock)
    return sources


def _interval(settings: TelemetrySettings, name: str) -> float:
    """A remote command sets its own pace (it is drained at the GPU interval); the host's
    sample at least every TELEMETRY_HOST_INTERVAL_S."""
    if name == HOST:
        return max(settings.interval_s, defaults.TELEMETRY_HOST_INTERVAL_S)
    return settings.interval_s


def _take(source: Sampler, writer: TelemetryWriter, clock: Any) -> None:
    t = clock()
    try:
        rows = source.sample()
    except Exception as exc:  # one source's failure never ends the others' (or the run)
        source.error(f"{type(exc).__name__}: {exc}")
        return
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
            command=redact_command(settings.remote[name], launch=False)
            if name in settings.remote
            else None,
            samples=writer.rows if writer is not None else 0,
            absent=absent,
            errors=source.errors,
        ).model_dump()
    return out


if __name__ == "__main__":
    main()
