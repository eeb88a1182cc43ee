"""The telemetry chapter: outlier restarts, the causes found, restart variance that goes with
telemetry, and each run's figures, from Analysis.telemetry; its chart from the bundle's
telemetry CSVs (the time series)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import pandas as pd

from diagnostic.bundle.store import Bundle, run_id
from diagnostic.bundle.telemetry import read_telemetry
from diagnostic.report.charts import Panel, data_uri, telemetry_chart
from diagnostic.report.views.base import Chart
from diagnostic.report.views.chapters import (
    CauseRow,
    OutlierRow,
    TelemetryView,
    VarianceRow,
    WindowRow,
)
from diagnostic.schema.analysis import Analysis
from diagnostic.schema.bundle import RunInfo
from diagnostic.schema.telemetry import FOLLOWS_DECODE_RATE, RestartOutlier, TelemetryWindow

__all__ = ["column", "telemetry_view"]

_CHART_RUNS = 32  # panels past this would be unreadable on one page: the first ones are shown
_VARIANCE_ROWS = 12  # the strongest associations per report
# Figures of the per-run table: (variable, label, unit).
_FIGURES = (
    ("sm_clock_mhz", "SM", "MHz"),
    ("power_w", "power", "W"),
    ("temperature_c", "temp", "°C"),
    ("cpu_pct", "host CPU", "%"),
    ("other_cpu_pct", "others", "% core"),
    ("client_cpu_pct", "client", "% core"),
)


def telemetry_view(a: Analysis, bundle: Bundle, runs: Sequence[RunInfo]) -> TelemetryView | None:
    """The chapter; None when no run recorded telemetry (the report is then as before)."""
    t = a.telemetry
    if t is None:
        return None
    first: dict[str, int] = {}
    for i, c in enumerate(t.causes):
        first.setdefault(c.rule, i)
    return TelemetryView(
        chart=_chart(a, bundle, runs),
        outliers=[_outlier_row(o, a) for o in t.restart_outliers],
        causes=[
            CauseRow(
                run=run_id(c.arm, c.restart),
                window=c.window,
                cause=c.title + (" (outlier restart)" if c.outlier else ""),
                evidence=c.evidence,
                # the advice once per cause: the H200 noise sample found steal in 8 windows
                advice=c.advice if i == first[c.rule] else "As above.",
            )
            for i, c in enumerate(t.causes)
        ],
        variance=[
            VarianceRow(
                workload=v.workload,
                variable=v.variable,
                restarts=str(v.restarts),
                r=f"{v.r:+.2f}",
                share=f"{v.share:.0%}",
                reads=_reads(v.variable),
            )
            for v in sorted(t.variance, key=lambda v: -v.share)[:_VARIANCE_ROWS]
        ],
        windows=[_window_row(w) for w in t.windows if w.window != "all" or _only_all(t.windows, w)],
        absent=[f"{where}: {why}" for where, why in sorted(t.absent.items())],
    )


def column(variable: str) -> str:
    """'host.steal_busy_pct' (source.column, as the variance table names it) → its column."""
    return variable.split(".", 1)[-1]


def _reads(variable: str) -> str:
    """How an association with this variable reads: a condition of the run can be a cause;
    one that follows the decode rate moves because the restart was faster or slower."""
    follows = column(variable) in FOLLOWS_DECODE_RATE
    return "follows the decode rate" if follows else "condition of the run"


def _only_all(windows: Sequence[TelemetryWindow], w: TelemetryWindow) -> bool:
    return not any(
        o.window != "all"
        for o in windows
        if (o.arm, o.restart, o.source) == (w.arm, w.restart, w.source)
    )


def _window_row(w: TelemetryWindow) -> WindowRow:
    parts = []
    for variable, label, unit in _FIGURES:
        s = next((s for s in w.stats if s.variable == variable), None)
        if s is not None:
            parts.append(f"{label} {s.median:,.0f} {unit} (worst {s.worst:,.0f})")
    active = [f"{n.replace('_', ' ')} {share:.0%}" for n, share in w.reasons.items() if share > 0]
    if active:
        parts.append("reasons: " + ", ".join(active))
    return WindowRow(
        run=f"{run_id(w.arm, w.restart)} ({w.source})", window=w.window, figures="; ".join(parts)
    )


def _outlier_row(o: RestartOutlier, a: Analysis) -> OutlierRow:
    titles = {c.rule: c.title for c in a.telemetry.causes} if a.telemetry else {}
    return OutlierRow(
        run=run_id(o.arm, o.restart),
        workload=o.workload,
        tps=f"{o.mean_tps:,.1f} vs {o.others_tps:,.1f} tok/s ({o.side})",
        evidence="; ".join(o.evidence) or "no telemetry difference",
        causes=", ".join(titles.get(c, c) for c in o.causes) or "none found",
    )


def _chart(a: Analysis, bundle: Bundle, runs: Sequence[RunInfo]) -> Chart | None:
    flagged = {(o.arm, o.restart) for o in (a.telemetry.restart_outliers if a.telemetry else [])}
    panels = []
    for run in runs:
        frame = _gpu_frame(bundle, run)
        if frame is None:
            continue
        by_t = frame.groupby("t_s")[["sm_clock_mhz", "power_w"]].median().reset_index()
        panels.append(
            Panel(
                label=run_id(run.arm, run.restart),
                t=[float(x) for x in by_t.t_s],
                clock=[_f(x) for x in by_t.sm_clock_mhz],
                power=[_f(x) for x in by_t.power_w],
                outlier=(run.arm, run.restart) in flagged,
            )
        )
    if not panels:
        return None
    shown = panels[:_CHART_RUNS]
    cut = f" (the first {len(shown)} of {len(panels)} runs)" if len(panels) > len(shown) else ""
    return Chart(
        title=f"SM clock (blue) and power (orange) per run over time, busy GPUs' median{cut}",
        uri=data_uri(telemetry_chart(shown)),
        alt=f"Small multiples of SM clock and power over time for {len(shown)} runs",
    )


def _gpu_frame(bundle: Bundle, run: RunInfo) -> pd.DataFrame | None:
    """The run's first GPU source with clocks, its busy GPUs only (as the analysis takes)."""
    frames = read_telemetry(bundle.run_dir(run.arm, run.restart), run)
    for source, frame in frames.items():
        if run.telemetry[source].kind == "host" or frame.sm_clock_mhz.isna().all():
            continue
        busy = frame.groupby("gpu")["utilization_pct"].max()
        working = busy[busy > 0].index
        return frame[frame.gpu.isin(working)] if len(working) else frame
    return None


def _f(value: float) -> float:
    number = float(value)
    return number if math.isfinite(number) else math.nan
