"""The report's telemetry chapter and page 1's sensitivity line, from Analysis.telemetry and
the bundle's telemetry CSVs (the chart's time series)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

import pandas as pd

from diagnostic.bundle.store import Bundle, run_id
from diagnostic.bundle.telemetry import read_telemetry
from diagnostic.report.charts import data_uri
from diagnostic.report.telemetry_chart import Panel, telemetry_chart
from diagnostic.report.telemetry_view import (
    CauseRow,
    OutlierRow,
    TelemetryView,
    VarianceRow,
    WindowRow,
)
from diagnostic.report.view_base import Chart
from diagnostic.schema.analysis import Analysis
from diagnostic.schema.bundle import RunInfo
from diagnostic.schema.telemetry import (
    FOLLOWS_DECODE_RATE,
    LOW_IS_WORSE,
    RestartOutlier,
    TelemetryAnalysis,
    TelemetryWindow,
)

__all__ = ["page_one_line", "telemetry_view"]

_CHART_RUNS = 32  # panels past this would be unreadable on one page: the first ones are shown
_VARIANCE_ROWS = 12  # the strongest associations per report
# A cause goes with the noise on page 1 from this share of the restart means' variance (r²)
# over at least this many restarts: with 5, r² ≥ 0.5 by chance alone is about 1 time in 10.
_ASSOCIATED_SHARE = 0.5
_ASSOCIATED_RESTARTS = 5
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


def _column(variable: str) -> str:
    """'host.steal_busy_pct' (source.column, as the variance table names it) → its column."""
    return variable.split(".", 1)[-1]


def _reads(variable: str) -> str:
    """How an association with this variable reads: a condition of the run can be a cause;
    one that follows the decode rate moves because the restart was faster or slower."""
    follows = _column(variable) in FOLLOWS_DECODE_RATE
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


def page_one_line(a: Analysis) -> str:
    """Page 1's line when restart noise has a visible cause: the outlier restarts with a cause
    and the restart spread with and without them (a sensitivity, labelled, nothing excluded),
    and the causes whose variable goes with the restart means."""
    t = a.telemetry
    if t is None:
        return ""
    titles = {c.rule: c.title for c in t.causes}
    lines = []
    explained = [o for o in t.restart_outliers if o.causes]
    if explained:
        parts = [
            f"{run_id(o.arm, o.restart)} on {o.workload} ran at {o.mean_tps:,.1f} tok/s against "
            f"{o.others_tps:,.1f} in its other restarts "
            f"({', '.join(titles.get(c, c) for c in o.causes)}){_spread(a, o)}"
            for o in explained
        ]
        lines.append(
            "Restart noise with a visible cause (sensitivity only; no restart is left out of "
            "any figure): " + "; ".join(parts) + "."
        )
    associated = _associated(t)
    if associated:
        lines.append("The restart means go with a cause found: " + "; ".join(associated) + ".")
    if not lines:
        return ""
    return " ".join(lines) + " The telemetry chapter has the evidence."


def _associated(t: TelemetryAnalysis) -> list[str]:
    """The causes found whose variable also goes with the restart means, the worse way, for
    at least half their variance (r²) over 5 or more restarts: an association, said so."""
    runs = {(w.arm, w.restart) for w in t.windows}
    out = []
    for rule in dict.fromkeys(c.rule for c in t.causes if c.variable):
        causes = [c for c in t.causes if c.rule == rule]
        variable = causes[0].variable or ""
        low_is_worse = _column(variable) in LOW_IS_WORSE
        rows = sorted(
            (
                v
                for v in t.variance
                if v.variable == variable
                and v.restarts >= _ASSOCIATED_RESTARTS
                and v.share >= _ASSOCIATED_SHARE
                and (v.r > 0) == low_is_worse
            ),
            key=lambda v: v.workload,
        )
        if rows:
            hit = {(c.arm, c.restart) for c in causes}
            shares = ", ".join(f"{v.share:.0%} on {v.workload}" for v in rows)
            out.append(
                f"{causes[0].title} in {len(hit)} of {len(runs)} runs, and it goes with "
                f"{shares} of the variance between restart means (r², an association over "
                f"{max(v.restarts for v in rows)} restarts)"
            )
    return out


def _spread(a: Analysis, o: RestartOutlier) -> str:
    arm = next((x for x in a.arms if x.id == o.arm), None)
    rows = [w for w in (arm.workloads if arm else []) if w.workload == o.workload]
    if not rows:
        return ""
    means = {r.restart: r.mean for r in rows[0].restarts if r.mean}
    rest = [m for r, m in means.items() if r != o.restart]
    if len(rest) < 2:
        return ""
    return (
        f" (restart-to-restart variation {_cv(list(means.values())):.1%} with it, "
        f"{_cv(rest):.1%} without it)"
    )


def _cv(values: list[float]) -> float:
    return statistics.stdev(values) / statistics.fmean(values)


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
