"""Report charts: matplotlib figures rendered to deterministic SVG strings."""

from __future__ import annotations

import base64
import io
import math
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = [
    "CUT",
    "REACH",
    "AxisRange",
    "Bar",
    "Point",
    "Series",
    "Strip",
    "acceptance_chart",
    "axis_range",
    "bar_axis",
    "before_after_chart",
    "data_uri",
    "palette",
    "sweep_axis",
    "sweep_chart",
    "variance_chart",
]

# A calm palette that survives grey-scale printing: baseline grey, speculation blue, accent.
GREY = "#8a8f98"
BLUE = "#2f5d8a"
ORANGE = "#c8742b"
GREEN = "#3f7f5f"
INK = "#2b2f36"
PALETTE = (BLUE, ORANGE, GREEN, "#7a4f9a", "#a23b3b", "#4f8a8b")


# tab20's hues PALETTE lacks first (brown, pink, olive, cyan), then its light shades; its
# greys (14, 15) never, as grey is the baseline's.
_TAB20_ORDER = (10, 12, 16, 18, 1, 3, 5, 7, 9, 11, 13, 17, 19, 0, 2, 4, 6, 8)


def palette(n: int) -> list[str]:
    """`n` distinct colours, never the baseline's grey: the calm PALETTE first, then tab20's
    other hues and light shades, and past those `n` evenly spaced on a continuous colormap."""
    if n <= len(PALETTE):
        return list(PALETTE[:n])
    from matplotlib import colormaps
    from matplotlib.colors import to_hex

    tab20 = colormaps["tab20"]
    colours = [*PALETTE, *(to_hex(tab20(i)) for i in _TAB20_ORDER)]
    if n <= len(colours):
        return colours[:n]
    cmap = colormaps["turbo"]
    return [to_hex(cmap(i / (n - 1))) for i in range(n)]


_RC: Any = {
    # A fixed salt and no dates make the SVG byte-identical across runs (reproducible reports).
    "svg.hashsalt": "diagnose-report",
    # Text stays text: the PDF uses the document's DejaVu font and stays searchable.
    "svg.fonttype": "none",
    "font.family": "DejaVu Sans",
    "font.size": 8,
    "axes.edgecolor": "#b9bec6",
    "axes.labelcolor": INK,
    "axes.titlesize": 9,
    "axes.titleweight": "bold",
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "axes.axisbelow": True,
    "grid.color": "#e4e7eb",
    "grid.linewidth": 0.6,
    "xtick.color": INK,
    "ytick.color": INK,
    "legend.frameon": False,
    "legend.fontsize": 7,
}


@dataclass(frozen=True)
class Bar:
    """One bar: a value with an optional interval, in a group (e.g. a workload)."""

    group: str
    label: str
    value: float
    low: float | None = None
    high: float | None = None
    baseline: bool = False


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


@dataclass(frozen=True)
class Strip:
    """Per-restart values of one arm, one workload."""

    arm: str
    workload: str
    values: Sequence[float]


def _style() -> AbstractContextManager[Any]:
    # matplotlib is imported on first use: `diagnose --help` should not pay for it.
    import matplotlib

    return matplotlib.rc_context(_RC)


def _figure(width_in: float, height_in: float) -> tuple[Figure, Axes]:
    # A bare Figure (no pyplot): no global figure registry and no GUI backend to select;
    # savefig writes SVG through matplotlib's own SVG backend.
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width_in, height_in))
    return fig, fig.add_subplot(1, 1, 1)


def _svg(fig: Figure) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None})
    return buf.getvalue()


def data_uri(svg: str) -> str:
    """An SVG as a data: URI, so the HTML embeds it without any markup marked safe."""
    return "data:image/svg+xml;base64," + base64.b64encode(svg.encode("utf-8")).decode("ascii")


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


def bar_axis(bars: Sequence[Bar]) -> AxisRange:
    """The value axis of before_after_chart: from 0, set by the bulk of the bars."""
    return axis_range(
        [b.value for b in bars], [b.low for b in bars], [b.high for b in bars], floor=0.0
    )


def sweep_axis(series: Sequence[Series]) -> AxisRange:
    """The value axis of sweep_chart: measured points and the predicted (dashed) lines."""
    measured = [p for s in series for p in s.points if p.value is not None]
    predicted = [_f(p.value) for s in series for p in s.theory]
    values = [_f(p.value) for p in measured] + predicted
    return axis_range(values, [p.low for p in measured], [p.high for p in measured])


def _label(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def _intervals(
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


def before_after_chart(
    bars: Sequence[Bar],
    *,
    unit: str = "decode tok/s",
    legend_on_top: bool = False,
    height_in: float = 2.3,
    label_bars: bool = False,
) -> str:
    """Grouped bars (one group per workload) with 95% interval whiskers, one colour per label
    (as many colours as labels). `label_bars` names every bar under the axis (and drops the
    legend that would repeat it); otherwise a legend names the colours."""
    with _style():
        groups = list(dict.fromkeys(b.group for b in bars))
        labels = list(dict.fromkeys(b.label for b in bars))
        own = [label for label in labels if not any(b.baseline for b in bars if b.label == label)]
        colours = dict(zip(own, palette(len(own)), strict=True))
        # Labelled bars stay at print width (fonts at their size); unlabelled ones grow.
        wide = min(6.6, 1.1 + 0.3 * len(bars)) if label_bars else 1.1 + 0.55 * len(bars)
        fig, ax = _figure(max(3.2, wide), height_in)
        axis = bar_axis(bars)
        width = 0.8 / max(1, len(labels))
        ticks: list[tuple[float, str]] = []
        for i, label in enumerate(labels):
            mine = [b for b in bars if b.label == label]
            xs = [groups.index(b.group) + (i - (len(labels) - 1) / 2) * width for b in mine]
            values = [b.value for b in mine]
            color = colours.get(label, GREY)
            ax.bar(xs, values, width * 0.92, color=color, label=label, zorder=2)
            _intervals(ax, xs, [b.low for b in mine], [b.high for b in mine], axis)
            ticks += [(x, label) for x in xs]
        ax.set_ylim(axis.low, axis.high)
        ax.set_ylabel(unit)
        ax.grid(axis="x", visible=False)
        if label_bars:
            ax.set_xticks([x for x, _ in ticks], [t for _, t in ticks], rotation=90, fontsize=6)
            drop = 6 * 0.62 * max(len(t) for _, t in ticks) + 10  # points below the axis
            for g, name in enumerate(groups):
                ax.annotate(
                    name,
                    (g, 0),
                    xycoords=("data", "axes fraction"),
                    xytext=(0, -drop),
                    textcoords="offset points",
                    ha="center",
                    va="top",
                    fontweight="bold",
                )
        else:
            ax.set_xticks(range(len(groups)), groups)
            if legend_on_top:
                ax.legend(loc="lower left", bbox_to_anchor=(0.0, 1.02), ncol=2)
            else:
                ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0))
        return _svg(fig)


def sweep_chart(series: Sequence[Series], *, ylabel: str = "decode tok/s") -> str:
    """Measured value against draft length k with interval bars, plus the theory curve."""
    with _style():
        fig, ax = _figure(5.6, 2.6)
        axis = sweep_axis(series)
        for line, color in zip(series, palette(len(series)), strict=True):
            pts = [p for p in line.points if p.value is not None]
            xs, ys = [p.x for p in pts], [float(p.value or 0.0) for p in pts]
            ax.plot(xs, ys, "o-", color=color, ms=3.5, lw=1.2, label=f"{line.name} measured")
            _intervals(ax, xs, [p.low for p in pts], [p.high for p in pts], axis, color)
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
        return _svg(fig)


def acceptance_chart(series: Sequence[Series]) -> str:
    """Per-position acceptance rate (position 1..k), one line per arm."""
    with _style():
        fig, ax = _figure(5.6, 2.3)
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
        return _svg(fig)


def variance_chart(
    strips: Sequence[Strip], *, band: tuple[float, float] | None = None, reference: float = 1.0
) -> str:
    """Per-restart points per arm (one colour per workload), relative to the baseline mean,
    with each arm's mean as a bar and the margin [1/(1+δ), 1+δ] shaded."""
    with _style():
        arms = list(dict.fromkeys(s.arm for s in strips))
        workloads = list(dict.fromkeys(s.workload for s in strips))
        fig, ax = _figure(max(4.2, 1.2 + 0.55 * len(arms)), 2.6)
        if band is not None:
            ax.axhspan(band[0], band[1], color=GREEN, alpha=0.15, lw=0, label="margin ±δ")
        ax.axhline(reference, color=GREY, lw=0.8, ls=":")
        width = 0.7 / max(1, len(workloads))
        colours = palette(len(workloads))
        labelled: set[str] = set()
        for s in strips:
            i = workloads.index(s.workload)
            x = arms.index(s.arm) + (i - (len(workloads) - 1) / 2) * width
            n = len(s.values)
            # A small deterministic spread keeps overlapping restarts visible.
            xs = [x + (j - (n - 1) / 2) * min(0.05, width / max(n, 1)) for j in range(n)]
            color = colours[i]
            label = None if s.workload in labelled else s.workload
            labelled.add(s.workload)
            ax.plot(xs, list(s.values), "o", ms=3.2, color=color, alpha=0.85, label=label)
            if n:
                mean = math.fsum(s.values) / n
                ax.plot([x - width * 0.4, x + width * 0.4], [mean, mean], color=INK, lw=1.0)
        ax.set_xticks(
            range(len(arms)),
            arms,
            rotation=30 if len(arms) > 5 else 0,
            ha="right" if len(arms) > 5 else "center",
            fontsize=7,
        )
        ax.set_ylabel("restart mean / baseline mean")
        ax.grid(axis="x", visible=False)
        ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0))
        return _svg(fig)


def _integer_ticks(ax: Axes, xs: Sequence[float]) -> None:
    ticks = sorted({int(x) for x in xs if float(x).is_integer()})
    if ticks:
        ax.set_xticks(ticks)


def _f(value: float | None) -> float:
    return float("nan") if value is None else float(value)
