"""The variance chart: every restart's mean relative to the baseline, per arm, with the margin
shaded (chapter 4)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from diagnostic.report.charts.style import GREEN, GREY, INK, figure, palette, style, to_svg

__all__ = ["Strip", "variance_chart"]


@dataclass(frozen=True)
class Strip:
    """Per-restart values of one arm, one workload."""

    arm: str
    workload: str
    values: Sequence[float]


def variance_chart(
    strips: Sequence[Strip], *, band: tuple[float, float] | None = None, reference: float = 1.0
) -> str:
    """Per-restart points per arm (one colour per workload), relative to the baseline mean,
    with each arm's mean as a bar and the margin [1/(1+δ), 1+δ] shaded."""
    with style():
        arms = list(dict.fromkeys(s.arm for s in strips))
        workloads = list(dict.fromkeys(s.workload for s in strips))
        fig, ax = figure(max(4.2, 1.2 + 0.55 * len(arms)), 2.6)
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
        return to_svg(fig)
