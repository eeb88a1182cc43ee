"""The sweep's charts: decode throughput against draft length k with the theory's prediction,
and the per-position acceptance rate (chapter 3)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from diagnostic.report.charts.axis import AxisRange, axis_range, intervals
from diagnostic.report.charts.style import figure, palette, style, to_svg

if TYPE_CHECKING:
    from matplotlib.axes import Axes

__all__ = ["Point", "Series", "acceptance_chart", "sweep_axis", "sweep_chart"]


@dataclass(frozen=True)
class Point:
    """One x position with a value and an optional interval."""

    x: float
    value: float | None
    low: float | None = None
    high: float | None = None


@dataclass(frozen=True)
class Series:
    """A named line of points (one workload in the sweep, one draft length in acceptance)."""

    name: str
    points: Sequence[Point]
    theory: Sequence[Point] = field(default_factory=tuple)


def sweep_axis(series: Sequence[Series]) -> AxisRange:
    """The value axis of sweep_chart: measured points and the predicted (dashed) lines."""
    measured = [p for s in series for p in s.points if p.value is not None]
    predicted = [_f(p.value) for s in series for p in s.theory]
    values = [_f(p.value) for p in measured] + predicted
    return axis_range(values, [p.low for p in measured], [p.high for p in measured])


def sweep_chart(series: Sequence[Series], *, ylabel: str = "decode tok/s") -> str:
    """Measured value against draft length k with interval bars, plus the theory curve."""
    with style():
        fig, ax = figure(5.6, 2.6)
        axis = sweep_axis(series)
        for line, color in zip(series, palette(len(series)), strict=True):
            pts = [p for p in line.points if p.value is not None]
            xs, ys = [p.x for p in pts], [float(p.value or 0.0) for p in pts]
            ax.plot(xs, ys, "o-", color=color, ms=3.5, lw=1.2, label=f"{line.name} measured")
            intervals(ax, xs, [p.low for p in pts], [p.high for p in pts], axis, color)
            theory = [p for p in line.theory if p.value is not None]
            if theory:
                ax.plot(
                    [p.x for p in theory],
                    [_f(p.value) for p in theory],
                    "--",
                    color=color,
                    lw=1.0,
                    alpha=0.8,
                    label=f"{line.name} predicted",
                )
        ax.set_ylim(axis.low, axis.high)
        ax.set_xlabel("draft tokens per step (k; 0 = no speculation)")
        ax.set_ylabel(ylabel)
        _integer_ticks(ax, [p.x for s in series for p in s.points])
        ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0))
        return to_svg(fig)


def acceptance_chart(series: Sequence[Series]) -> str:
    """Per-position acceptance rate (position 1..k), one line per arm."""
    with style():
        fig, ax = figure(5.6, 2.3)
        for line, color in zip(series, palette(len(series)), strict=True):
            pts = [p for p in line.points if p.value is not None]
            ax.plot(
                [p.x for p in pts],
                [_f(p.value) for p in pts],
                "o-",
                ms=3,
                lw=1.1,
                color=color,
                label=line.name,
            )
        ax.set_xlabel("draft position")
        ax.set_ylabel("acceptance rate")
        ax.set_ylim(0, 1.05)
        _integer_ticks(ax, [p.x for s in series for p in s.points])
        ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0))
        return to_svg(fig)


def _integer_ticks(ax: Axes, xs: Sequence[float]) -> None:
    ticks = sorted({int(x) for x in xs if float(x).is_integer()})
    if ticks:
        ax.set_xticks(ticks)


def _f(value: float | None) -> float:
    return float("nan") if value is None else float(value)
