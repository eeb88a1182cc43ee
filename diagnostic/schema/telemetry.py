"""Telemetry of a run (GPU, host) as stored in a bundle, and its summary in the analysis."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from diagnostic.schema.base import Stored, Strict

__all__ = [
    "CLOCKS_EVENT_REASONS",
    "FOLLOWS_DECODE_RATE",
    "GPU_COLUMNS",
    "HOST_COLUMNS",
    "LOW_IS_WORSE",
    "OPTIONAL_COLUMNS",
    "TELEMETRY_FORMAT",
    "QuietWindow",
    "RestartOutlier",
    "TelemetryAnalysis",
    "TelemetryCause",
    "TelemetryKind",
    "TelemetrySource",
    "TelemetryStat",
    "TelemetryVariance",
    "TelemetryWindow",
    "steal_reported",
    "telemetry_file",
]

# Telemetry file format history (the first line of every telemetry/<source>.csv names it, and
# run.json `telemetry[<source>].format` repeats it):
#   diagnose-telemetry/1 — 2026-12: one CSV per source, `# diagnose-telemetry/1 kind=<kind>`
#       then a header of the kind's columns (GPU_COLUMNS or HOST_COLUMNS), one row per sample
#       per device, appended and flushed as taken; t_s on the run's clock (collect's origin).
#       The host's `steal_pct` and `server_preempt_per_s` came later (OPTIONAL_COLUMNS), then
#       `probe_late_ms` and `probe_share` (the recorder's idle probe): a file without them
#       reads them as empty.
TELEMETRY_FORMAT = "diagnose-telemetry/1"

TelemetryKind = Literal["nvml", "host", "nvidia-smi", "dcgm"]

# NVML clocks-event (throttle) reason bits (nvml.h nvmlClocksEventReason*), by the names the
# analysis and its rules use.
CLOCKS_EVENT_REASONS = {
    "gpu_idle": 0x1,
    "applications_clocks_setting": 0x2,
    "sw_power_cap": 0x4,
    "hw_slowdown": 0x8,
    "sync_boost": 0x10,
    "sw_thermal_slowdown": 0x20,
    "hw_thermal_slowdown": 0x40,
    "hw_power_brake_slowdown": 0x80,
    "display_clock_setting": 0x100,
}
# Columns of a GPU source (nvml, or a remote nvidia-smi / DCGM exporter parsed into them).
GPU_COLUMNS = (
    "t_s",  # seconds since the run began (collect's origin), when the sample arrived
    "gpu",  # device index
    "sm_clock_mhz",
    "mem_clock_mhz",
    "power_w",
    "power_limit_w",
    "temperature_c",
    "utilization_pct",
    "memory_used_mib",
    "clocks_event_reasons",  # NVML clocks-event (throttle) reason bitmask, an integer
    "processes",  # compute processes on the device (NVML only; empty elsewhere)
    "source_time",  # the sample's own timestamp where the source gives one (nvidia-smi)
)
# Variables that rise and fall with the decode rate itself (a faster restart keeps the GPU
# busier, draws more power, runs warmer and spends more CPU on the client and the server):
# their association with restart means is a consequence as much as a cause. The others (clocks,
# power limit, other processes, CPU frequency, compute processes) are conditions of the run.
FOLLOWS_DECODE_RATE = frozenset(
    {
        "utilization_pct",
        "power_w",
        "temperature_c",
        "memory_used_mib",
        "cpu_pct",
        "load1",
        "client_cpu_pct",
        "server_cpu_pct",
    }
)
# Variables whose lower values are the worse ones (a lower clock or power limit); for the
# others a higher value is worse.
LOW_IS_WORSE = frozenset(
    {"sm_clock_mhz", "mem_clock_mhz", "freq_mhz", "power_limit_w", "probe_share"}
)
# Columns of the client machine's host source (psutil).
HOST_COLUMNS = (
    "t_s",
    "cpu_pct",  # all cores, 0-100
    "cores",  # logical cores
    "load1",  # 1-minute load average
    "freq_mhz",  # mean current CPU frequency (empty where the OS does not say)
    "steal_pct",  # CPU time the hypervisor gave to other guests (VM steal), % of all cores
    "client_cpu_pct",  # this diagnose process and its children, % of one core
    "server_cpu_pct",  # the launched server's process tree, % of one core (empty: unknown)
    "server_preempt_per_s",  # involuntary context switches/s of its processes' main threads
    "other_cpu_pct",  # the rest of the busy time (other processes, interrupts, VM steal), % core
    "top_other",  # the busiest other processes: "name pid pct; …"
    "probe_late_ms",  # an idle probe thread's mean wake-up lateness since the previous sample
    "probe_share",  # ... and the CPU share its short spins got (1: none lost)
)


# Columns added after the format's first files: a file without them reads as empty there.
OPTIONAL_COLUMNS = frozenset({"steal_pct", "server_preempt_per_s", "probe_late_ms", "probe_share"})


def telemetry_file(source: str) -> str:
    """Path of a telemetry source's CSV inside a run folder."""
    return f"telemetry/{source}.csv"


class TelemetrySource(Stored):
    """run.json `telemetry[<source>]`: how one source was sampled during the run."""

    kind: TelemetryKind = Field(description="nvml, host, nvidia-smi (a command) or dcgm (a URL)")
    format: str = Field(TELEMETRY_FORMAT, description="Format of the CSV (first line repeats it)")
    file: str | None = Field(None, description="CSV in the run folder; None when absent")
    interval_s: float = Field(gt=0, description="Seconds between samples asked for")
    command: str | None = Field(None, description="The plan's command or URL (redacted)")
    samples: int = Field(0, ge=0, description="Rows written")
    absent: str | None = Field(
        None, description="Why the source gave nothing (no NVML on this machine, …); never fatal"
    )
    errors: list[str] = Field(
        default_factory=list, description="Lines or reads that could not be used (first few)"
    )


class QuietWindow(Stored):
    """run.json `quiet`: this machine measured in a quiet window before the run's first request
    (the server up and idle, no request in flight): conditions no arm can move, the run's
    arm-free covariate (measure/telemetry/quiet.py says how)."""

    seconds: float = Field(gt=0, description="Wall-clock seconds the window took")
    cores: int = Field(ge=1, description="Logical cores of this machine")
    steal_cores: float | None = Field(
        None,
        ge=0,
        description="VM steal over the window (/proc/stat, all cores): seconds stolen per "
        "second, in cores; None where the OS has no steal counter",
    )
    steal_since_boot_s: float | None = Field(
        None,
        ge=0,
        description="The host's steal counter at the window's end, seconds since boot (0: it "
        "never moved, so it may not be reported at all); None where the OS has none",
    )
    spin_share: float = Field(
        ge=0,
        le=1,
        description="First half: the CPU time a spinning thread got per second of wall-clock "
        "(1: it lost none to the hypervisor or to another task)",
    )
    tick_s: float = Field(gt=0, description="Second half: the sleep asked per tick, seconds")
    ticks: int = Field(ge=0, description="Ticks slept")
    tick_late_ms: float = Field(ge=0, description="Mean lateness of a tick's wake-up, ms")


def steal_reported(windows: list[QuietWindow]) -> str | None:
    """None when the quiet windows' steal can be used; else why it is not available: no steal
    counter, or one that never moved since boot in any run (a sandbox such as gVisor, a VM
    without steal accounting, or bare metal all read 0 there)."""
    if not windows or any(w.steal_since_boot_s is None for w in windows):
        return "this host's OS has no VM steal counter"
    if all(w.steal_since_boot_s == 0 for w in windows):
        return (
            "the host's steal counter (/proc/stat) never moved since boot in any run: this "
            "machine (bare metal, a sandbox such as gVisor, or a VM without steal accounting) "
            "may not report steal"
        )
    return None


class TelemetryStat(Strict):
    """One variable over one window: its median and its worst value."""

    variable: str = Field(description="Column, e.g. sm_clock_mhz")
    median: float = Field(description="Median over the window's samples")
    worst: float = Field(description="Worst value: the lowest clock, the highest power/temp/load")
    samples: int = Field(ge=1, description="Samples in the window")


class TelemetryWindow(Strict):
    """One run's telemetry over one workload's measured requests (or the whole run: `all`)."""

    arm: str = Field(description="Arm")
    restart: int = Field(description="Restart")
    window: str = Field(description="Workload name, or 'all' for the whole run")
    source: str = Field(description="Telemetry source")
    stats: list[TelemetryStat] = Field(default_factory=list, description="Per variable")
    reasons: dict[str, float] = Field(
        default_factory=dict,
        description="Share of samples (0-1) with each clocks-event reason active, by name",
    )
    top_other: str | None = Field(
        None, description="Host: the busiest other processes at the window's busiest sample"
    )


class TelemetryCause(Strict):
    """A rule of checklists/telemetry.yaml that matched a run's telemetry."""

    rule: str = Field(description="Rule id")
    title: str = Field(description="What it is")
    arm: str = Field(description="Arm")
    restart: int = Field(description="Restart")
    window: str = Field(description="Workload window, or 'all'")
    evidence: str = Field(description="The figures that matched, in words")
    variable: str | None = Field(
        None, description="What the rule read, as the variance table names it (host.steal_busy_pct)"
    )
    advice: str = Field(description="What to do")
    outlier: bool = Field(description="Whether the run's mean is a Tukey outlier of its arm")


class RestartOutlier(Strict):
    """A restart whose mean decode tok/s is outside the Tukey fences of its arm's restarts,
    set beside its telemetry against the other restarts'."""

    arm: str = Field(description="Arm")
    restart: int = Field(description="Restart")
    workload: str = Field(description="Workload")
    mean_tps: float = Field(description="Its mean decode tok/s")
    others_tps: float = Field(description="Median of the other restarts' means")
    side: Literal["low", "high"] = Field(description="Below or above the fences")
    evidence: list[str] = Field(default_factory=list, description="Telemetry against the others")
    causes: list[str] = Field(default_factory=list, description="Rules that matched this run")


class TelemetryVariance(Strict):
    """How much of the between-restart variance of one arm-workload's restart means goes with
    one telemetry variable: an association (squared correlation), not a cause."""

    workload: str = Field(description="Workload")
    variable: str = Field(description="Telemetry variable (its median per restart)")
    restarts: int = Field(ge=3, description="Restarts with both figures (all arms pooled)")
    r: float = Field(description="Pearson correlation of centred log restart means and variable")
    share: float = Field(description="r²: share of between-restart variance associated with it")


class TelemetryAnalysis(Strict):
    """Telemetry of every run, summarised; present only when some run recorded telemetry."""

    windows: list[TelemetryWindow] = Field(default_factory=list, description="Per run, window")
    restart_outliers: list[RestartOutlier] = Field(
        default_factory=list, description="Restarts whose mean is a Tukey outlier of their arm"
    )
    causes: list[TelemetryCause] = Field(default_factory=list, description="Rules that matched")
    variance: list[TelemetryVariance] = Field(
        default_factory=list, description="Association of restart means with telemetry"
    )
    absent: dict[str, str] = Field(
        default_factory=dict, description="Sources that gave nothing, by run/source: why"
    )
