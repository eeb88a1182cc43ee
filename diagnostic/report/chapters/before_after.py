"""Chapter 2, before and after: one table per workload and concurrency level with every arm's
decode throughput, speedup and verdict, and the chart of every arm per workload."""

from __future__ import annotations

import statistics
from collections import Counter

from diagnostic.report import charts
from diagnostic.report import fmt as f
from diagnostic.report import select as sel
from diagnostic.report.budget import Day
from diagnostic.report.inputs import Describe
from diagnostic.report.views.base import Chart
from diagnostic.report.views.chapters import ArmRow, WorkloadTable
from diagnostic.schema.analysis import Analysis, ArmResult, ArmWorkload, Comparison

__all__ = ["before_after", "before_after_chart"]


def _n(aw: ArmWorkload) -> str:
    e = aw.decode_tps
    if not e.n_restarts:
        return f.MISSING
    per, rest = divmod(e.n_requests, e.n_restarts)
    return f"{per} × {e.n_restarts}" if rest == 0 else f"{e.n_requests} in {e.n_restarts}"


def _tokens_per_chunk(aw: ArmWorkload) -> str:
    values = [r.tokens_per_chunk for r in aw.restarts if r.tokens_per_chunk is not None]
    return f.num(statistics.fmean(values), 2) if values else f.MISSING


def _acceptance(arm: ArmResult, aw: ArmWorkload) -> str:
    """This workload's acceptance length when measured per workload (the sweep table's
    figure), else the run-level one."""
    acc = aw.acceptance_length or arm.acceptance_length
    if acc is None or acc.estimate is None:
        return f.MISSING if arm.speculative else "—"
    return f.num(acc.estimate, 2)


def _pooled(c: Comparison) -> str | None:
    """The reference a ratio divides by when the baseline is pooled with its A/A repeat, so
    that the ratio can be checked against the figures printed beside it."""
    if not (c.pooled_with and c.reference_tps):
        return None
    return f"vs {f.tps(c.reference_tps)} tok/s, {c.baseline} and {c.pooled_with} pooled"


def _arm_row(
    a: Analysis,
    arm: ArmResult,
    aw: ArmWorkload,
    level: int,
    setting: Describe,
    day: Day,
    shared: str | None,
) -> ArmRow:
    """One arm's row; `shared` is the pooled reference most ratios of the table divide by
    (stated once, on the baseline's row; a row whose reference differs states its own)."""
    c = sel.comparison(a, arm.id, aw.workload, level)
    e = aw.decode_tps
    verdict: str = "BASELINE" if arm.is_baseline else (c.verdict if c else "—")
    notes = []
    if c is not None and c.withheld:
        verdict = "WITHHELD"
    if c is not None and c.baseline != a.baseline:
        notes.append(f"vs {c.baseline}")
    pooled = _pooled(c) if c is not None else None
    if pooled and pooled != shared:
        notes.append(pooled)
    elif c is not None and shared and not pooled and c.baseline == a.baseline:
        notes.append(f"vs {c.baseline} alone")
    if arm.is_baseline and shared:
        notes.append(f"ratios below: {shared}")
    if c is not None and c.sensitivity:
        notes.append(c.sensitivity)
    if c is not None and not c.matched and c.differs:
        notes.append(f"also differs: {c.differs}")
    if c is not None and c.label:
        notes.append(c.label)
    elif c is not None and (stop := f.futility(c)):
        notes.append(stop)
    elif c is not None and c.verdict == "INCONCLUSIVE" and (more := day.extension(c)):
        notes.append(more)
    note = "; ".join(notes)
    return ArmRow(
        arm=arm.id,
        role=setting(arm),
        decode_tps=f.tps(e.estimate),
        decode_ci=f.span(e.ci_low, e.ci_high),
        ratio="—" if arm.is_baseline else (f.ratio(c.ratio) if c else f.MISSING),
        ratio_ci=f.span(c.ci_low, c.ci_high, "ratio", a.noise_band.delta)
        if c and not arm.is_baseline
        else "",
        verdict=verdict,
        n=_n(aw),
        ttft=f.seconds(aw.ttft_median_s),
        tokens_per_chunk=_tokens_per_chunk(aw),
        acceptance=_acceptance(arm, aw),
        note=note,
    )


def _footnoted(rows: list[ArmRow]) -> tuple[list[ArmRow], str]:
    """A caveat shared by several rows becomes one footnote; those rows carry '†'."""
    notes = Counter(r.note for r in rows if r.note)
    if not notes:
        return rows, ""
    common, n = notes.most_common(1)[0]
    if n < 2:
        return rows, ""
    marked = [r.model_copy(update={"note": "†"}) if r.note == common else r for r in rows]
    return marked, f"† {common}"


def before_after(a: Analysis, *, setting: Describe, day: Day) -> list[WorkloadTable]:
    """One table per workload and concurrency level, baseline first."""
    tables = []
    for level in sel.levels(a):
        for w in sel.workloads(a):
            pairs = [(arm, sel.arm_workload(arm, w, level)) for arm in sel.ordered_arms(a)]
            compared = (sel.comparison(a, arm.id, w, level) for arm, _ in pairs)
            pooled = Counter(p for c in compared if c is not None and (p := _pooled(c)))
            shared = pooled.most_common(1)[0][0] if pooled else None
            rows = [
                _arm_row(a, arm, aw, level, setting, day, shared)
                for arm, aw in pairs
                if aw is not None
            ]
            if rows:
                rows, footnote = _footnoted(rows)
                tables.append(
                    WorkloadTable(
                        title=f.table_title(w, level, len(sel.levels(a))),
                        anchor=f"ba-{w}-c{level}",
                        rows=rows,
                        footnote=footnote,
                    )
                )
    return tables


def before_after_chart(a: Analysis) -> Chart | None:
    """Every arm's decode tok/s with its interval, grouped by workload (lowest level)."""
    level = sel.levels(a)[0]
    bars = []
    for arm in sel.ordered_arms(a):
        for w in sel.workloads(a):
            aw = sel.arm_workload(arm, w, level)
            est = aw.decode_tps.estimate if aw is not None else None
            if aw is not None and est is not None:
                e = aw.decode_tps
                bars.append(charts.Bar(w, arm.id, est, e.ci_low, e.ci_high, arm.is_baseline))
    if not bars:
        return None
    cut = charts.bar_axis(bars).cuts([b.low for b in bars], [b.high for b in bars])
    return Chart(
        title="Decode throughput of every arm per workload, each bar named under the axis; "
        f"whiskers: 95% CI across restarts{f'; {charts.CUT}' if cut else ''}.",
        uri=charts.data_uri(charts.before_after_chart(bars, label_bars=True)),
        alt="Grouped bar chart of decode tokens per second per arm and workload.",
    )
