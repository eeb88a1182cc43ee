"""Telemetry of every run: medians and worst values per run and workload window, outlier
restarts set beside their telemetry, causes from the rule file, and how much of the
between-restart variance goes with each variable (an association)."""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Sequence
from typing import Literal

import numpy as np
import pandas as pd

from diagnostic.analyse import stats
from diagnostic.analyse.telemetry_rules import Rule, apply_rules, load_rules
from diagnostic.bundle.store import Bundle, run_id
from diagnostic.bundle.telemetry import read_telemetry
from diagnostic.schema.analysis import ALL_WORKLOADS, ArmResult, ArmWorkload
from diagnostic.schema.bundle import RunInfo
from diagnostic.schema.requests import RequestRecord, latest_attempts
from diagnostic.schema.telemetry import (
    CLOCKS_EVENT_REASONS,
    GPU_COLUMNS,
    HOST_COLUMNS,
    LOW_IS_WORSE,
    RestartOutlier,
    TelemetryAnalysis,
    TelemetryCause,
    TelemetryStat,
    TelemetryVariance,
    TelemetryWindow,
)

__all__ = ["analyse_telemetry", "window_of"]

# Every numeric column of the sources but the sample's time, device, bitmask and core count.
# steal_pct gives way to its share of the busy time (_DERIVED).
_NOT_SUMMARISED = {
    "t_s",
    "gpu",
    "clocks_event_reasons",
    "source_time",
    "cores",
    "top_other",
    "steal_pct",
}
# Derived from the host's columns (_host_derived): VM steal as a share of the busy CPU time.
_DERIVED = ("steal_busy_pct",)
_SUMMARISED = (
    *(c for c in (*GPU_COLUMNS, *HOST_COLUMNS) if c not in _NOT_SUMMARISED),
    *_DERIVED,
)
# Figures an outlier restart is set beside its siblings with (the first that differ most).
_EVIDENCE = (
    "sm_clock_mhz",
    "power_w",
    "temperature_c",
    "cpu_pct",
    "other_cpu_pct",
    "steal_busy_pct",
    "server_preempt_per_s",
)
_EVIDENCE_LINES = 3
_LABELS = {
    "sm_clock_mhz": "SM clock (MHz)",
    "power_w": "power (W)",
    "temperature_c": "temperature (°C)",
    "cpu_pct": "host CPU (%)",
    "other_cpu_pct": "other processes' CPU (% of a core)",
    "steal_busy_pct": "VM steal (% of the busy CPU time)",
    "server_preempt_per_s": "server preemptions (/s)",
}
_MIN_RESTARTS = 3  # a correlation over fewer points says nothing


def window_of(records: Sequence[RequestRecord], workload: str) -> tuple[float, float] | None:
    """Start and end (run clock, s) of one workload's measured requests: first send to last
    end, on latest attempts."""
    spans = [
        (r.t_send, r.t_send + (r.e2e_s or 0.0))
        for r in latest_attempts(list(records))
        if not r.warmup and r.workload == workload
    ]
    if not spans:
        return None
    return min(s for s, _ in spans), max(e for _, e in spans)


def analyse_telemetry(
    bundle: Bundle,
    runs: Sequence[RunInfo],
    records: dict[tuple[str, int], list[RequestRecord]],
    arms: Sequence[ArmResult],
    *,
    rules: Sequence[Rule] | None = None,
) -> TelemetryAnalysis | None:
    """The telemetry chapter of the analysis; None when no run recorded telemetry (every
    bundle before issue 30: the analysis and report stay as they were)."""
    if not any(r.telemetry for r in runs):
        return None
    out = TelemetryAnalysis()
    for run in runs:
        for name, info in sorted(run.telemetry.items()):
            if info.absent:
                out.absent[f"{run_id(run.arm, run.restart)}/{name}"] = info.absent
        frames = read_telemetry(bundle.run_dir(run.arm, run.restart), run)
        workloads = sorted({r.workload for r in records.get((run.arm, run.restart), [])})
        for source, frame in frames.items():
            out.windows += _windows(run, source, frame, records, workloads)
    rules = load_rules() if rules is None else rules
    out.causes = _causes(out.windows, rules, arms)
    out.restart_outliers = _outliers(out.windows, out.causes, arms)
    out.variance = _variance(out.windows, arms)
    return out


def _windows(
    run: RunInfo,
    source: str,
    frame: pd.DataFrame,
    records: dict[tuple[str, int], list[RequestRecord]],
    workloads: list[str],
) -> list[TelemetryWindow]:
    frame = _host_derived(_busy_gpus(frame))
    spans: dict[str, tuple[float, float] | None] = {ALL_WORKLOADS: None}
    for workload in workloads:
        span = window_of(records.get((run.arm, run.restart), []), workload)
        if span is not None:
            spans[workload] = span
    out = []
    for name, span in spans.items():
        part = frame if span is None else frame[(frame.t_s >= span[0]) & (frame.t_s <= span[1])]
        if len(part):
            out.append(_window(run, source, name, part))
    return out


def _busy_gpus(frame: pd.DataFrame) -> pd.DataFrame:
    """A GPU source's rows of the GPUs that worked during the run (utilisation above 0 at
    some sample): an idle GPU of the same machine would read as a low clock."""
    if "gpu" not in frame or "utilization_pct" not in frame:
        return frame
    busy = frame.groupby("gpu")["utilization_pct"].max()
    working = busy[busy > 0].index
    return frame[frame.gpu.isin(working)] if len(working) else frame


def _host_derived(frame: pd.DataFrame) -> pd.DataFrame:
    """A host source's VM steal as a share of the busy CPU time, and the other processes' CPU
    without it. The OS counts steal as busy time and, since a vCPU only loses time it wanted
    to run, steal lands on the few busy cores of a host-bound server: 1% of 16 vCPUs is a
    tenth of the 1.6 cores a server and its client keep busy (recorded on the H200,
    samples/vllm-h200-gemma3-noise). `other_cpu_pct` is the busy time less the client's and
    the server's, so it held the steal too: it is taken out here."""
    if "steal_pct" not in frame or "cpu_pct" not in frame:
        return frame
    steal, busy = frame["steal_pct"], frame["cpu_pct"]
    out = frame.assign(steal_busy_pct=(100 * steal / busy).where(busy > 0).clip(upper=100))
    if "other_cpu_pct" in frame and "cores" in frame:
        stolen = (steal * frame["cores"]).fillna(0.0)  # % of one core
        out["other_cpu_pct"] = (frame["other_cpu_pct"] - stolen).clip(lower=0.0)
    return out


def _window(run: RunInfo, source: str, name: str, part: pd.DataFrame) -> TelemetryWindow:
    found = []
    for variable in _SUMMARISED:
        if variable not in part:
            continue
        values = part[variable].dropna()
        if not len(values):
            continue
        worst = values.min() if variable in LOW_IS_WORSE else values.max()
        found.append(
            TelemetryStat(
                variable=variable,
                median=float(values.median()),
                worst=float(worst),
                samples=len(values),
            )
        )
    return TelemetryWindow(
        arm=run.arm,
        restart=run.restart,
        window=name,
        source=source,
        stats=found,
        reasons=_reason_shares(part),
        top_other=_top_other(part),
    )


def _reason_shares(part: pd.DataFrame) -> dict[str, float]:
    if "clocks_event_reasons" not in part:
        return {}
    masks = part["clocks_event_reasons"].dropna().astype("int64")
    if not len(masks):
        return {}
    return {name: float(((masks & bit) != 0).mean()) for name, bit in CLOCKS_EVENT_REASONS.items()}


def _top_other(part: pd.DataFrame) -> str | None:
    if "top_other" not in part or "other_cpu_pct" not in part:
        return None
    busiest = part["other_cpu_pct"].idxmax() if part["other_cpu_pct"].notna().any() else None
    if busiest is None:
        return None
    value = part.loc[busiest, "top_other"]
    return str(value) if isinstance(value, str) and value else None


def _siblings(
    windows: Sequence[TelemetryWindow], w: TelemetryWindow, arms: Sequence[str] | None = None
) -> list[TelemetryWindow]:
    """The same source and window in the other restarts of the same arm."""
    return [
        o
        for o in windows
        if o.arm == w.arm
        and o.source == w.source
        and o.window == w.window
        and o.restart != w.restart
    ]


def _causes(
    windows: Sequence[TelemetryWindow], rules: Sequence[Rule], arms: Sequence[ArmResult]
) -> list[TelemetryCause]:
    flagged = _flagged(arms)
    out = []
    for w in windows:
        if w.window == ALL_WORKLOADS and any(
            o.window != ALL_WORKLOADS for o in windows if (o.arm, o.restart) == (w.arm, w.restart)
        ):
            continue  # judged per workload window where the run has them
        for match in apply_rules(rules, w, _siblings(windows, w)):
            out.append(
                TelemetryCause(
                    rule=match.rule.id,
                    title=match.rule.title,
                    arm=w.arm,
                    restart=w.restart,
                    window=w.window,
                    evidence=f"{w.source}: {match.evidence}",
                    variable=f"{w.source}.{v}" if (v := match.rule.when.variable) else None,
                    advice=match.rule.advice,
                    outlier=(w.arm, w.restart, w.window) in flagged,
                )
            )
    return out


Flagged = dict[tuple[str, int, str], tuple[float, float, Literal["low", "high"]]]


def _flagged(arms: Sequence[ArmResult]) -> Flagged:
    """Restarts whose mean is outside the Tukey fences of their arm's restart means, per
    workload: (arm, restart, workload) → (its mean, the others' median, side)."""
    out: Flagged = {}
    for arm in arms:
        for aw in _first_level(arm):
            restarts = [r for r in aw.restarts if r.mean is not None]
            means = [float(r.mean) for r in restarts if r.mean is not None]
            for i, side in stats.tukey_outliers(means):
                others = statistics.median(m for j, m in enumerate(means) if j != i)
                out[(arm.id, restarts[i].restart, aw.workload)] = (means[i], others, side)
    return out


def _first_level(arm: ArmResult) -> list[ArmWorkload]:
    """The arm's per-workload rows at its first concurrency level: a telemetry window spans a
    workload's requests at every level, so only one level's restart means go with it."""
    rows = [aw for aw in arm.workloads if aw.workload != ALL_WORKLOADS]
    first = min((aw.concurrency for aw in rows), default=0)
    return [aw for aw in rows if aw.concurrency == first]


def _outliers(
    windows: Sequence[TelemetryWindow], causes: Sequence[TelemetryCause], arms: Sequence[ArmResult]
) -> list[RestartOutlier]:
    out = []
    for (arm, restart, key), (mean, others, side) in _flagged(arms).items():
        mine = [w for w in windows if (w.arm, w.restart, w.window) == (arm, restart, key)]
        if not mine:
            continue
        out.append(
            RestartOutlier(
                arm=arm,
                restart=restart,
                workload=key,
                mean_tps=mean,
                others_tps=others,
                side=side,
                evidence=_evidence(mine, windows),
                causes=sorted(
                    {c.rule for c in causes if (c.arm, c.restart, c.window) == (arm, restart, key)}
                ),
            )
        )
    return out


def _evidence(mine: Sequence[TelemetryWindow], windows: Sequence[TelemetryWindow]) -> list[str]:
    """The figures of the restart's windows (every source) that differ most from the other
    restarts' medians, then the clocks-event reasons active in them."""
    ranked: list[tuple[float, str]] = []
    reasons: list[str] = []
    for w in mine:
        others = _siblings(windows, w)
        for s in w.stats:
            theirs = [t.median for o in others for t in o.stats if t.variable == s.variable]
            if s.variable not in _EVIDENCE or not theirs:
                continue
            ref = statistics.median(theirs)
            gap = abs(s.median - ref) / abs(ref) if ref else 0.0
            label = _LABELS.get(s.variable, s.variable)
            text = f"{label} {s.median:,.0f} median vs {ref:,.0f} in the other restarts"
            ranked.append((gap, text))
        reasons += [
            f"{name.replace('_', ' ')} reason active {share:.0%} of the time"
            for name, share in w.reasons.items()
            if share > 0 and name != "gpu_idle"
        ]
    ranked = sorted((r for r in ranked if r[0] > 0), key=lambda x: -x[0])
    return [text for _, text in ranked[:_EVIDENCE_LINES]] + reasons


def _variance(
    windows: Sequence[TelemetryWindow], arms: Sequence[ArmResult]
) -> list[TelemetryVariance]:
    """Per workload and variable: r between each restart's log mean and its window median,
    both centred within their arm (so configuration differences do not count), over every
    arm's restarts. r² is the share of the within-arm variance of restart means that goes
    with the variable: an association over few restarts, not a cause."""
    means = {
        (arm.id, r.restart, aw.workload): math.log(r.mean)
        for arm in arms
        for aw in _first_level(arm)
        for r in aw.restarts
        if r.mean
    }
    points: dict[tuple[str, str], list[tuple[str, float, float]]] = defaultdict(list)
    for w in windows:
        y = means.get((w.arm, w.restart, w.window))
        if y is None:
            continue
        for s in w.stats:
            points[(w.window, f"{w.source}.{s.variable}")].append((w.arm, y, s.median))
    out = []
    for (workload, variable), found in sorted(points.items()):
        r, n = _centred_r(found)
        if r is not None:
            out.append(
                TelemetryVariance(
                    workload=workload, variable=variable, restarts=n, r=r, share=r * r
                )
            )
    return sorted(out, key=lambda v: (v.workload, -v.share))


def _centred_r(found: list[tuple[str, float, float]]) -> tuple[float | None, int]:
    frame = pd.DataFrame(found, columns=["arm", "y", "x"])
    frame = frame[frame.groupby("arm")["arm"].transform("size") >= 2]  # one restart: no spread
    if len(frame) < _MIN_RESTARTS:
        return None, len(frame)
    y = frame.y - frame.groupby("arm").y.transform("mean")
    x = frame.x - frame.groupby("arm").x.transform("mean")
    if np.allclose(x, 0) or np.allclose(y, 0):
        return None, len(frame)
    return float(np.corrcoef(x, y)[0, 1]), len(frame)
