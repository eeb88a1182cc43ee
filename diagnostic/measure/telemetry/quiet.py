"""The host measured where no arm can move it: a quiet window before a run's first request.

The server is up and idle (healthy, fingerprinted, no request in flight, no telemetry recorder
yet), so whatever slows this machine in the window comes from outside it: the hypervisor giving
the cores to other guests (VM steal), or another tenant's load. A busy server (a speculative
arm's, say) moves the host's steal counter during a run, because steal accrues only on a vCPU
that wants to run; here the only vCPU that wants to run is the probe's own, the same in every
run. The window is the run's arm-free covariate (issue 45): in its first half a thread spins and
measures the CPU time it was given against the wall-clock that passed (its share); in its second
half it sleeps in short ticks and measures how late it wakes. The host's steal counter
(/proc/stat, psutil) is read around the whole window, and recorded as it is: a counter that has
not moved since boot (a VM just booted, bare metal, a sandbox such as gVisor, a VM without
steal accounting) says 0, and the analysis says steal was not available when no run of the
bundle saw it move (schema/telemetry.py `steal_reported`)."""

from __future__ import annotations

import threading
import time

import psutil

from diagnostic import defaults
from diagnostic.schema.telemetry import QuietWindow

__all__ = ["IdleProbe", "quiet_window", "steal_seconds"]


def steal_seconds() -> float | None:
    """The host's VM steal since boot, seconds summed over its cores; None where the OS has no
    steal counter."""
    steal = getattr(psutil.cpu_times(), "steal", None)
    return None if steal is None else float(steal)


def quiet_window(seconds: float, tick_s: float = defaults.QUIET_TICK_S) -> QuietWindow:
    """Measure the host for `seconds` (half spinning, half ticking) while nothing else of
    diagnose runs; blocks for that long."""
    before = steal_seconds()
    start = time.perf_counter()
    share = _spin(seconds / 2)
    ticks, late = _ticks(seconds / 2, tick_s)
    wall = time.perf_counter() - start
    after = steal_seconds()
    stolen = None if before is None or after is None else max(0.0, after - before) / wall
    return QuietWindow(
        seconds=wall,
        cores=psutil.cpu_count() or 1,
        steal_cores=stolen,
        steal_since_boot_s=after,
        spin_share=share,
        tick_s=tick_s,
        ticks=ticks,
        tick_late_ms=late,
    )


def _spin(seconds: float) -> float:
    """Spin for `seconds` of wall-clock: the share of them this thread ran (CPU time / wall)."""
    wall0, cpu0 = time.perf_counter(), time.thread_time()
    end = wall0 + seconds
    while time.perf_counter() < end:
        pass
    wall, cpu = time.perf_counter() - wall0, time.thread_time() - cpu0
    return min(1.0, max(0.0, cpu / wall)) if wall > 0 else 1.0


def _ticks(seconds: float, tick_s: float) -> tuple[int, float]:
    """Sleep in ticks of `tick_s` for `seconds`: how many, and their mean lateness in ms."""
    end = time.perf_counter() + seconds
    count, late = 0, 0.0
    while True:
        asked = time.perf_counter()
        if asked >= end:
            break
        time.sleep(tick_s)
        late += max(0.0, time.perf_counter() - asked - tick_s)
        count += 1
    return count, 1000 * late / count if count else 0.0


class IdleProbe:
    """The same probe during the run, in the telemetry recorder's process: a thread that
    sleeps in ticks of `tick_s` (how late it wakes) and, every `spin_every` ticks, spins for
    `spin_s` (the share of that wall-clock it ran). It keeps less than a hundredth of one core
    busy, so it moves nothing; a server that keeps every core busy would move it (the analysis
    checks its balance across arms). take() gives the figures since the previous take."""

    def __init__(
        self,
        tick_s: float = defaults.QUIET_TICK_S,
        spin_s: float = defaults.PROBE_SPIN_S,
        spin_every: int = defaults.PROBE_SPIN_EVERY,
    ) -> None:
        self._tick_s, self._spin_s, self._every = tick_s, spin_s, spin_every
        self._lock = threading.Lock()
        self._late = self._ticks = self._cpu = self._wall = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        n = 0
        while not self._stop.is_set():
            asked = time.perf_counter()
            time.sleep(self._tick_s)
            late = max(0.0, time.perf_counter() - asked - self._tick_s)
            n += 1
            spun = (0.0, 0.0)
            if n % self._every == 0:
                wall0, cpu0 = time.perf_counter(), time.thread_time()
                end = wall0 + self._spin_s
                while time.perf_counter() < end:
                    pass
                spun = (time.thread_time() - cpu0, time.perf_counter() - wall0)
            with self._lock:
                self._late += late
                self._ticks += 1
                self._cpu += spun[0]
                self._wall += spun[1]

    def take(self) -> tuple[float | None, float | None]:
        """Mean tick lateness (ms) and spin share since the previous take; None for a figure
        with nothing measured yet."""
        with self._lock:
            late = 1000 * self._late / self._ticks if self._ticks else None
            share = min(1.0, self._cpu / self._wall) if self._wall > 0 else None
            self._late = self._ticks = self._cpu = self._wall = 0.0
        return late, share

    def close(self) -> None:
        """Stop the thread."""
        self._stop.set()
        self._thread.join(timeout=1.0)
