"""Telemetry samplers: NVML (pynvml), this host (psutil), a plan's command or DCGM URL."""

from __future__ import annotations

import contextlib
import math
import os
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any

import psutil

from diagnostic import defaults
from diagnostic.errors import TelemetryError
from diagnostic.measure.telemetry.parse import Row, SmiParser, parse_dcgm
from diagnostic.measure.telemetry.quiet import IdleProbe

__all__ = ["CommandSource", "DcgmSource", "HostSampler", "NvmlSampler", "Sampler"]

_ERRORS_KEPT = 5  # errors kept per source in run.json: the first say what went wrong
_TOP = 3  # busiest other processes named per host sample


class Sampler:
    """A source polled by the recording loop: sample() → rows (t_s added by the loop)."""

    absent: str | None = None  # why the source gives nothing (set at start, never raised)

    def __init__(self) -> None:
        self.errors: list[str] = []

    def error(self, text: str) -> None:
        """Keep the first few errors for run.json."""
        if len(self.errors) < _ERRORS_KEPT:
            self.errors.append(text[:300])

    def sample(self) -> list[Row]:
        """Rows of one sample."""
        return []

    def close(self) -> None:
        """Release what the sampler holds."""


class NvmlSampler(Sampler):
    """Every GPU NVML sees: clocks, power and its limit, temperature, utilisation, memory
    used, clocks-event reasons, compute processes. Without NVML it records why, never fails."""

    def __init__(self) -> None:
        super().__init__()
        self._handles: list[Any] = []
        try:
            import pynvml

            pynvml.nvmlInit()
            self._nvml: Any = pynvml
            count = pynvml.nvmlDeviceGetCount()
            self._handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
        except Exception as exc:
            self.absent = f"NVML is not available on this machine ({type(exc).__name__}: {exc})"
            return
        if not self._handles:
            self.absent = "NVML sees no GPU on this machine"

    def sample(self) -> list[Row]:
        """One row per GPU; a reading the device does not support stays empty."""
        return [self._device(i, h) for i, h in enumerate(self._handles)]

    def _device(self, index: int, handle: Any) -> Row:
        nv = self._nvml
        read = self._reader(handle)
        reasons = getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None) or getattr(
            nv, "nvmlDeviceGetCurrentClocksThrottleReasons", None
        )
        power = read(nv.nvmlDeviceGetPowerUsage)
        limit = read(nv.nvmlDeviceGetEnforcedPowerLimit)
        memory = read(nv.nvmlDeviceGetMemoryInfo)
        util = read(nv.nvmlDeviceGetUtilizationRates)
        procs = read(nv.nvmlDeviceGetComputeRunningProcesses)
        return {
            "gpu": index,
            "sm_clock_mhz": read(nv.nvmlDeviceGetClockInfo, nv.NVML_CLOCK_SM),
            "mem_clock_mhz": read(nv.nvmlDeviceGetClockInfo, nv.NVML_CLOCK_MEM),
            "power_w": power / 1000 if power is not None else None,
            "power_limit_w": limit / 1000 if limit is not None else None,
            "temperature_c": read(nv.nvmlDeviceGetTemperature, nv.NVML_TEMPERATURE_GPU),
            "utilization_pct": util.gpu if util is not None else None,
            "memory_used_mib": memory.used / 2**20 if memory is not None else None,
            "clocks_event_reasons": read(reasons) if reasons else None,
            "processes": len(procs) if procs is not None else None,
        }

    def _reader(self, handle: Any) -> Callable[..., Any]:
        def read(function: Callable[..., Any], *args: Any) -> Any:
            try:
                return function(handle, *args)
            except self._nvml.NVMLError as exc:
                if "Not Supported" not in str(exc):
                    self.error(f"{function.__name__}: {exc}")
                return None

        return read

    def close(self) -> None:
        """Shut NVML down."""
        if self._handles:
            with contextlib.suppress(Exception):
                self._nvml.nvmlShutdown()


class HostSampler(Sampler):
    """This machine (the client's): CPU load and frequency, the client's own CPU (collect and
    its workers), the server's when it runs here, everything else's, the busiest other
    processes, and an idle probe thread's lateness and share (quiet.py's IdleProbe). Reading
    every process costs milliseconds on a busy host, so the process table is read at most
    every TELEMETRY_SCAN_INTERVAL_S; in between, `other` is the machine's busy time less the
    client's, the server's and this recorder's."""

    def __init__(self, client_pid: int, server_pid: int | None) -> None:
        super().__init__()
        self._me = psutil.Process()
        self._client_pid, self._server_pid = client_pid, server_pid
        self._cache: dict[int, psutil.Process] = {}
        self._client: list[psutil.Process] = []
        self._server: list[psutil.Process] = []
        self._scanned = -math.inf
        self._switches: dict[int, int] = {}  # pid → involuntary context switches last read
        self._switched_at: float | None = None
        self._probe = IdleProbe()
        psutil.cpu_percent(None)  # the first call starts the interval (each function its own)
        psutil.cpu_times_percent(None)
        self.sample()  # every process' cpu_percent needs a first reading too

    def sample(self) -> list[Row]:
        """One row: the machine, then the processes by group."""
        cores = psutil.cpu_count() or 1
        row: Row = {
            "cpu_pct": psutil.cpu_percent(None),
            "cores": cores,
            "load1": _optional(lambda: psutil.getloadavg()[0]),
            # a sandbox (gVisor) or a VM may not say
            "freq_mhz": _optional(lambda: psutil.cpu_freq().current),
            # Linux only: a VM's cores taken by the hypervisor for other guests
            "steal_pct": _optional(lambda: psutil.cpu_times_percent(None).steal),
        }
        top = ""
        if time.monotonic() - self._scanned >= defaults.TELEMETRY_SCAN_INTERVAL_S:
            top = self._scan()
        client = _busy(self._client)
        server = _busy(self._server) if self._server_pid else None
        mine = _busy([self._me])
        busy = float(row["cpu_pct"]) * cores  # type: ignore[arg-type]
        row["client_cpu_pct"] = client
        row["server_cpu_pct"] = server
        row["server_preempt_per_s"] = self._preemptions() if self._server_pid else None
        row["other_cpu_pct"] = max(0.0, busy - client - (server or 0.0) - mine)
        row["top_other"] = top
        row["probe_late_ms"], row["probe_share"] = self._probe.take()
        return [row]

    def close(self) -> None:
        """Stop the idle probe."""
        self._probe.close()

    def _preemptions(self) -> float | None:
        """Involuntary context switches per second of the server's processes (their main
        threads, /proc's count) since the previous sample: how often another task took the
        core of a server that wanted to run on. None at the first sample."""
        now, seen, delta = time.monotonic(), {}, 0
        for proc in self._server:
            with contextlib.suppress(psutil.Error, AttributeError):
                count = proc.num_ctx_switches().involuntary
                delta += count - self._switches.get(proc.pid, count)
                seen[proc.pid] = count
        before, self._switches, self._switched_at = self._switched_at, seen, now
        if before is None or now <= before or not seen:
            return None
        return delta / (now - before)

    def _scan(self) -> str:
        """Read every process: refresh the client's and server's trees, name the busiest
        others (their CPU since the previous scan)."""
        self._scanned = time.monotonic()
        server = _tree(self._process(self._server_pid)) if self._server_pid else set()
        client = _tree(self._process(self._client_pid)) - server - {self._me.pid}
        self._client = [p for pid in client if (p := self._process(pid))]
        self._server = [p for pid in server if (p := self._process(pid))]
        others = {}
        for pid in set(psutil.pids()) - client - server - {self._me.pid}:
            proc = self._process(pid)
            if proc is None:
                continue
            try:
                with proc.oneshot():
                    others[pid] = (proc.cpu_percent(None), proc.name())
            except psutil.Error:
                self._cache.pop(pid, None)
        for pid in set(self._cache) - set(others) - client - server:
            del self._cache[pid]
        top = sorted(others.items(), key=lambda kv: -kv[1][0])[:_TOP]
        return "; ".join(f"{name} {pid} {pct:.0f}" for pid, (pct, name) in top)

    def _process(self, pid: int | None) -> psutil.Process | None:
        """A cached Process (its cpu_percent counts from the previous reading)."""
        if not pid:
            return None
        try:
            return self._cache.get(pid) or self._cache.setdefault(pid, psutil.Process(pid))
        except psutil.Error:
            return None


def _optional(read: Callable[[], float]) -> float | None:
    """A reading the OS may not give (None then)."""
    try:
        return float(read())
    except (AttributeError, OSError, NotImplementedError, psutil.Error):
        return None


def _tree(process: psutil.Process | None) -> set[int]:
    if process is None:
        return set()
    try:
        return {process.pid} | {c.pid for c in process.children(recursive=True)}
    except psutil.Error:
        return set()


def _busy(processes: list[psutil.Process]) -> float:
    """CPU % of one core of the processes since their previous reading."""
    total = 0.0
    for proc in processes:
        with contextlib.suppress(psutil.Error):
            total += proc.cpu_percent(None)
    return total


class CommandSource(Sampler):
    """A plan's command (`ssh node nvidia-smi --query-gpu=… --format=csv -lms 500`) run in its
    own process group for the whole run; each line of its stdout parsed as it arrives."""

    def __init__(self, name: str, command: str, clock: Callable[[], float]) -> None:
        super().__init__()
        self._parser = SmiParser(f"telemetry command {name!r}")
        self._clock = clock
        self._rows: list[Row] = []
        self._lock = threading.Lock()
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 - closed in close()
        self._proc = subprocess.Popen(
            ["bash", "-c", command],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=self._stderr,  # a file: a chatty command never fills a pipe and blocks
            text=True,
            start_new_session=True,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self._proc.stdout is not None
        for n, line in enumerate(self._proc.stdout, start=1):
            try:
                row = self._parser.feed(line.rstrip("\n"), n)
            except TelemetryError as exc:
                self.error(str(exc))
                continue
            if row is not None:
                row["t_s"] = self._clock()
                with self._lock:
                    self._rows.append(row)

    def sample(self) -> list[Row]:
        """The rows that arrived since the last call (the command sets its own pace)."""
        with self._lock:
            rows, self._rows = self._rows, []
        return rows

    def close(self) -> None:
        """Stop the command's process group; note how it ended if it ended by itself."""
        code = self._proc.poll()
        if code is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._proc.pid, signal.SIGTERM)
            try:
                self._proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                os.killpg(self._proc.pid, signal.SIGKILL)
                self._proc.wait()
        self._reader.join(timeout=5)
        if code is not None:
            self._stderr.seek(0)
            tail = self._stderr.read().decode("utf-8", "replace")[-300:].strip()
            self.error(f"the command exited with status {code} during the run: {tail}")
        if self._proc.stdout is not None:
            self._proc.stdout.close()
        self._stderr.close()


class DcgmSource(Sampler):
    """A DCGM exporter's /metrics URL, read at each sample (within the interval)."""

    def __init__(self, name: str, url: str, timeout_s: float) -> None:
        super().__init__()
        import httpx  # only here: the recorder of a run without a DCGM source starts lighter

        self._httpx = httpx
        self._name = f"telemetry URL {name!r} ({url})"
        self._client = httpx.Client(timeout=timeout_s)
        self._url = url

    def sample(self) -> list[Row]:
        """One row per GPU of the scrape; a failed scrape is an error kept, no row."""
        try:
            answer = self._client.get(self._url)
            answer.raise_for_status()
            return parse_dcgm(answer.text, self._name)
        except (self._httpx.HTTPError, TelemetryError) as exc:
            self.error(f"{self._name}: {exc}")
            return []

    def close(self) -> None:
        """Close the connection."""
        self._client.close()


def wall_clock_origin(origin: float) -> Callable[[], float]:
    """Seconds since the run's origin on time.perf_counter (CLOCK_MONOTONIC: one clock for
    every process of the host, so the recorder's t_s and collect's t_send agree)."""
    return lambda: time.perf_counter() - origin
