"""The value axis every chart shares: limits set by the bulk of the estimates, and interval
whiskers whose ends beyond the axis are drawn as labelled arrows."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from diagnostic.report.charts.style import INK

if TYPE_CHECKING:
    from matplotlib.axes import Axes

__all__ = ["CUT", "REACH", "AxisRange", "axis_range", "intervals"]

# An interval end more than REACH times beyond the estimates (above the largest, below the
# smallest) does not set the axis: one restart-starved whisker ([0.006, 1911]) would squash
# every other point. It is drawn to the axis' edge with an arrow and its value.
REACH = 2.0


@dataclass(frozen=True)
class AxisRange:
    """The value axis' limits, and the interval ends that lie beyond them."""

    low: float
    high: float

    def clip(self, value: float) -> float:
        """`value` moved onto the axis."""
        return min(max(value, self.low), self.high)

    def beyond(self, value: float | None) -> bool:
        """Whether an interval end lies off the axis (drawn clipped, its value labelled)."""
        return value is not None and not self.low <= value <= self.high

    def cuts(self, lows: Sequence[float | None], highs: Sequence[float | None]) -> bool:
        """Whether any of these intervals runs off the axis (the caption then says CUT)."""
        return any(self.beyond(x) for x in (*lows, *highs))


CUT = "an arrow marks an interval that runs beyond the axis, its end labelled"


def axis_range(
    values: Sequence[float],
    lows: Sequence[float | None],
    highs: Sequence[float | None],
    *,
    floor: float | None = None,
) -> AxisRange:
    """Axis limits from the bulk: every estimate, and every interval end within REACH times
    the estimates (a factor, as the values are rates: tok/s); `floor` fixes the lower limit
    (bars start at 0). 5% headroom above the highest shown value, and below the lowest
    without a floor (never below 0 for values that are not: a rate has no negative axis)."""
    shown = [v for v in values if math.isfinite(v)] or [0.0]
    top, bottom = max(shown), min(shown)
    high = max([top, *(h for h in highs if h is not None and h <= top * REACH)])
    low = min([bottom, *(x for x in lows if x is not None and x * REACH >= bottom)])
    low = low if floor is None else floor
    pad = 0.05 * (high - low) or 0.05 * abs(high) or 1.0
    if floor is None:
        low = low - pad if low < 0 else max(0.0, low - pad)
    return AxisRange(low=low, high=high + pad)


def _label(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def intervals(
    ax: Axes,
    xs: Sequence[float],
    lows: Sequence[float | None],
    highs: Sequence[float | None],
    axis: AxisRange,
    color: str = INK,
) -> None:
    """Whiskers with caps; an end off the axis is an arrowhead at the edge, its value beside
    it, so nothing is hidden and no interval looks shorter than it is."""
    for x, lo, hi in zip(xs, lows, highs, strict=True):
        if lo is None or hi is None:
            continue
        ax.vlines(x, axis.clip(lo), axis.clip(hi), color=color, lw=0.8, zorder=3)
        for end, edge, arrow in ((lo, axis.low, "v"), (hi, axis.high, "^")):
            if not axis.beyond(end):
                ax.plot([x], [end], marker="_", ms=5, mew=0.8, color=color, zorder=3)
                continue
            ax.plot([x], [edge], marker=arrow, ms=4, color=color, clip_on=False, zorder=4)
            ax.annotate(
                _label(end),
                (x, edge),
                xytext=(2.5, -3 if arrow == "^" else 3),
                textcoords="offset points",
                rotation=90,
                ha="left",
                va="top" if arrow == "^" else "bottom",
                fontsize=5.5,
                color=INK,
            )
