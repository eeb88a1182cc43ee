"""The telemetry chart: small multiples of SM clock and power per run over time (the telemetry
chapter)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from diagnostic.report.charts.style import BLUE, ORANGE, style, to_svg

__all__ = ["Panel", "telemetry_chart"]

_COLUMNS = 4


@dataclass(frozen=True)
class Panel:
    """One run: its samples' times, SM clocks (MHz) and power draws (W); NaN where absent."""

    label: str
    t: Sequence[float]
    clock: Sequence[float]
    power: Sequence[float]
    outlier: bool = False


def telemetry_chart(panels: Sequence[Panel]) -> str:
    """One small panel per run on shared axes: SM clock (blue, left) and power (orange,
    right) against seconds into the run; an outlier restart's title is marked."""
    from matplotlib.figure import Figure

    with style():
        rows = math.ceil(len(panels) / _COLUMNS)
        columns = min(_COLUMNS, len(panels))
        fig = Figure(figsize=(1.75 * columns + 0.6, 1.25 * rows + 0.3))
        axes = fig.subplots(rows, columns, squeeze=False, sharex=True, sharey=True)
        power_max = max((p for panel in panels for p in panel.power if p == p), default=1.0)
        twins = []
        for i, panel in enumerate(panels):
            ax = axes[i // columns][i % columns]
            ax.plot(panel.t, panel.clock, color=BLUE, lw=0.8)
            twin = ax.twinx()
            twin.plot(panel.t, panel.power, color=ORANGE, lw=0.6, alpha=0.8)
            twin.set_ylim(0, power_max * 1.1)
            last = i % columns == columns - 1
            twin.tick_params(labelsize=5, labelright=last, right=last)
            twins.append(twin)
            ax.set_title(panel.label + (" (outlier)" if panel.outlier else ""), fontsize=6)
            ax.tick_params(labelsize=5)
            ax.grid(visible=False)
        for j in range(len(panels), rows * columns):
            axes[j // columns][j % columns].set_visible(False)
        axes[0][0].set_ylabel("SM clock (MHz)", fontsize=6, color=BLUE)
        twins[min(columns, len(twins)) - 1].set_ylabel("power (W)", fontsize=6, color=ORANGE)
        for ax in axes[-1]:
            ax.set_xlabel("s into the run", fontsize=6)
        fig.tight_layout()
        return to_svg(fig)
