"""The contents page's glance table: every arm's speedup and verdict on every workload."""

from __future__ import annotations

from diagnostic.report import fmt as f
from diagnostic.report import select as sel
from diagnostic.report.inputs import Describe
from diagnostic.report.views.chapters import Glance, GlanceCell, GlanceRow
from diagnostic.schema.analysis import Analysis

__all__ = ["glance"]


def glance(a: Analysis, *, setting: Describe) -> Glance | None:
    """Every non-baseline arm's speedup and verdict per workload (lowest level)."""
    level, names = sel.low_level(a), sel.workloads(a)
    rows = []
    for arm in sel.ordered_arms(a):
        if arm.is_baseline:
            continue
        comps = [sel.comparison(a, arm.id, w, level) for w in names]
        cells = [
            GlanceCell(ratio=f.ratio(c.ratio), verdict=c.verdict)
            if c
            else GlanceCell(ratio=f.MISSING, verdict="—")
            for c in comps
        ]
        rows.append(GlanceRow(arm=arm.id, setting=setting(arm), cells=cells))
    return Glance(workloads=names, rows=rows) if rows else None
