"""The before-and-after chart: grouped bars of decode throughput with their intervals (chapter
2, and page 1's smaller one)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from diagnostic.report.charts.axis import AxisRange, axis_range, intervals
from diagnostic.report.charts.style import GREY, figure, palette, style, to_svg

__all__ = ["Bar", "bar_axis", "before_after_chart"]


@dataclass(frozen=True)
class Bar:
    """One bar: a value with an optional interval, in a group (e.g. a workload)."""

    group: str
    label: str
    value: float
    low: float | None = None
    high: float | None = None
    baseline: bool = False


def bar_axis(bars: Sequence[Bar]) -> AxisRange:
    """The value axis of before_after_chart: from 0, set by the bulk of the bars."""
    return axis_range(
        [b.value for b in bars], [b.low for b in bars], [b.high for b in bars], floor=0.0
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
    with style():
        groups = list(dict.fromkeys(b.group for b in bars))
        labels = list(dict.fromkeys(b.label for b in bars))
        own = [label for label in labels if not any(b.baseline for b in bars if b.label == label)]
        colours = dict(zip(own, palette(len(own)), strict=True))
        # Labelled bars stay at print width (fonts at their size); unlabelled ones grow.
        wide = min(6.6, 1.1 + 0.3 * len(bars)) if label_bars else 1.1 + 0.55 * len(bars)
        fig, ax = figure(max(3.2, wide), height_in)
        axis = bar_axis(bars)
        width = 0.8 / max(1, len(labels))
        ticks: list[tuple[float, str]] = []
        for i, label in enumerate(labels):
            mine = [b for b in bars if b.label == label]
            xs = [groups.index(b.group) + (i - (len(labels) - 1) / 2) * width for b in mine]
            values = [b.value for b in mine]
            color = colours.get(label, GREY)
            ax.bar(xs, values, width * 0.92, color=color, label=label, zorder=2)
            intervals(ax, xs, [b.low for b in mine], [b.high for b in mine], axis)
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
        return to_svg(fig)
