"""Report sections fed by the Analysis: before/after, sweep, variance, equivalence, failures."""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Callable

from diagnostic.report import charts
from diagnostic.report import fmt as f
from diagnostic.report import select as sel
from diagnostic.report.budget import Day
from diagnostic.report.design import futility
from diagnostic.report.view import (
    ArmRow,
    Chart,
    Glance,
    GlanceCell,
    GlanceRow,
    SweepRow,
    SweepTable,
    SweepView,
    WorkloadTable,
)
from diagnostic.schema.analysis import (
    ALL_WORKLOADS,
    Analysis,
    ArmResult,
    ArmWorkload,
    Comparison,
    SweepWorkload,
)

__all__ = ["before_after", "before_after_chart", "glance", "sweep"]

Describe = Callable[[ArmResult], str]


def _title(workload: str, level: int, a: Analysis) -> str:
    name = "All workloads pooled" if workload == ALL_WORKLOADS else f"Workload: {workload}"
    return name + (f", concurrency {level}" if len(sel.levels(a)) > 1 else "")


# -- before / after -----------------------------------------------------------------------
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
    elif c is not None and (stop := futility(c)):
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
                        title=_title(w, level, a),
                        anchor=f"ba-{w}-c{level}",
                        rows=rows,
                        footnote=footnote,
                    )
                )
    return tables


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


# -- sweep --------------------------------------------------------------------------------
def _sweep_rows(sw: SweepWorkload) -> list[SweepRow]:
    return [
        SweepRow(
            k=str(p.k),
            arm=p.arm,
            decode_tps=f.tps(p.decode_tps.estimate),
            decode_ci=f.span(p.decode_tps.ci_low, p.decode_tps.ci_high),
            ratio="—" if p.k == 0 else f.ratio(p.ratio),
            ratio_ci="" if p.k == 0 else f.span(p.ci_low, p.ci_high, "ratio"),
            verdict="BASELINE" if p.k == 0 else (p.verdict or "—"),
            # A dash, not 'not measured': three narrow columns side by side (the note says so).
            acceptance="—" if p.k == 0 else _dash(f.num(p.acceptance_length, 2)),
            rho="1.00" if p.k == 0 else _dash(f.num(p.rho, 2)),
            predicted="1.00×" if p.k == 0 else _dash(f.ratio(p.predicted_speedup)),
        )
        for p in sw.points
    ]


def _dash(text: str) -> str:
    return "—" if text == f.MISSING else text


def _best_k_text(sw: SweepWorkload, rec: Comparison | None) -> str:
    """The sweep's best k in words; when page 1 serves the workload with an arm the sweep
    does not name as best (one against its own baseline, outside the sweep), it says so, so
    the two pages never disagree."""
    where = f"on {sw.workload}"
    swept = {p.arm for p in sw.points}
    base = next((p.arm for p in sw.points if p.k == 0), None)
    if rec is not None and rec.arm not in swept:
        best = "no k wins" if not sw.best_k else f"k={sw.best_k} is best"
        return (
            f"Among the arms swept against {base}, {best} {where}. "
            f"Page 1 serves {sw.workload} with {rec.arm} (k={rec.k}) instead: it wins against "
            f"its own baseline {rec.baseline}, which this sweep does not include."
        )
    if sw.best_k is None:
        return f"Best k {where}: not decided — {sw.best_k_reason}."
    if sw.best_k == 0:
        return f"Best {where}: no speculation (k=0) — {sw.best_k_reason}."
    point = next((p for p in sw.points if p.k == sw.best_k), None)
    gain = f" ({f.ratio_ci(point.ratio, point.ci_low, point.ci_high)})" if point else ""
    return f"Best k {where}: {sw.best_k}{gain} — {sw.best_k_reason}."


def _theory_text(sw: SweepWorkload) -> str:
    t = sw.theory
    if t is None or t.alpha_hat is None:
        return "Theory: not measured (no acceptance counters to estimate α̂)."
    parts = [
        f"Theory (Leviathan et al.): per-token acceptance α̂ = {f.num(t.alpha_hat, 3)}, "
        f"estimated from {t.alpha_source}"
    ]
    if t.a is not None and t.b is not None:
        parts.append(
            f"fitted step cost ρ_k = {f.num(t.a, 2)} + {f.num(t.b, 3)}·k over "
            f"{t.fit_points} k values"
        )
    if t.alpha_ci:
        parts[0] += f" [95% bootstrap interval {f.span(t.alpha_ci[0], t.alpha_ci[1], 'ratio')}]"
    if t.a_ci and t.b_ci:
        a_ci = f.span(t.a_ci[0], t.a_ci[1], "ratio")
        parts[-1] += f" (a {a_ci}, b {f.num(t.b_ci[0], 3)}–{f.num(t.b_ci[1], 3)})"
    if t.degenerate:
        parts.append("no predicted best k (degenerate acceptance)")
    elif t.predicted_best_k is not None:
        measured = [p.k for p in sw.points if p.k >= 1]
        parts.append(_predicted_best_k(t.predicted_best_k, t.best_k_range, measured))
    else:
        parts.append(f"predicted best k = {f.MISSING}")
    return "; ".join(parts) + ". " + t.explanation


def _predicted_best_k(best: int, spread: list[int] | None, measured: list[int]) -> str:
    """'predicted best k = 5 (bootstrap range 4–7; 7 is beyond the measured k = 1–5:
    extrapolated)'. A range that holds 0 (no speculation) says the theory cannot tell whether
    speculation pays; one of 0 alone, that it predicts it does not; without a range (no
    bootstrap) the estimate is marked as one."""
    low, high = spread or (best, best)
    notes = [f"bootstrap range {low}–{high}"] if spread else ["no bootstrap interval"]
    top, bottom = max(measured, default=0), min(measured, default=0)
    shown = sorted({low, best, high})
    for side, ks in (
        ("beyond", [k for k in shown if k > top]),
        ("below", [k for k in shown if 1 <= k < bottom]),
    ):
        if ks and measured:
            verb = "is" if len(ks) == 1 else "are"
            notes.append(
                f"{f.join([str(k) for k in ks])} {verb} {side} the measured k = "
                f"{bottom}–{top}: extrapolated"
            )
    text = f"predicted best k = {best} ({'; '.join(notes)})"
    if low == 0 < high:
        return f"{text}: the theory cannot tell whether speculation pays"
    if high == 0 and spread:
        return f"{text}: the theory predicts that speculation does not pay"
    return text


def _sweep_workloads(a: Analysis) -> list[SweepWorkload]:
    """Per-workload sweeps; the pooled 'all' one only when nothing finer exists."""
    assert a.sweep is not None
    named = [sw for sw in a.sweep.workloads if sw.workload != ALL_WORKLOADS]
    return named or list(a.sweep.workloads)


def _sweep_chart(a: Analysis) -> Chart | None:
    assert a.sweep is not None
    level = sel.levels(a)[0]
    series = []
    for sw in _sweep_workloads(a):
        if sw.concurrency != level:
            continue
        pts = [
            charts.Point(p.k, p.decode_tps.estimate, p.decode_tps.ci_low, p.decode_tps.ci_high)
            for p in sw.points
        ]
        base = next((p.decode_tps.estimate for p in sw.points if p.k == 0), None)
        theory = []
        if sw.theory is not None and base is not None:
            top = max(p.k for p in sw.points)
            theory = [
                charts.Point(t.k, t.speedup * base) for t in sw.theory.predicted if t.k <= top
            ]
        series.append(charts.Series(sw.workload, pts, theory))
    if not any(s.points for s in series):
        return None
    dashed = (
        "; dashed: predicted by the fitted theory model" if any(s.theory for s in series) else ""
    )
    points = [p for s in series for p in s.points]
    if charts.sweep_axis(series).cuts([p.low for p in points], [p.high for p in points]):
        dashed += f"; {charts.CUT}"
    return Chart(
        title=f"Decode tok/s against draft length k (95% CI across restarts){dashed}.",
        uri=charts.data_uri(charts.sweep_chart(series)),
        alt="Line chart of decode tokens per second against k, measured"
        + (" and predicted." if dashed else "."),
    )


def _acceptance_chart(a: Analysis) -> Chart | None:
    series = []
    ks = Counter(arm.k for arm in a.arms if arm.k is not None)
    for arm in sorted(a.arms, key=lambda x: (x.k or 0, x.id)):
        per_pos: dict[int, list[float]] = {}
        for run in arm.runs:
            for p in run.acceptance.per_position if run.acceptance else []:
                per_pos.setdefault(p.position, []).append(p.cumulative)
        if per_pos:
            pts = [charts.Point(pos + 1, statistics.fmean(v)) for pos, v in sorted(per_pos.items())]
            # Two arms at one k (two backends, eager and not) get their names, not "k=3" twice.
            label = f"k={arm.k}" if arm.k is not None and ks[arm.k] == 1 else arm.id
            series.append(charts.Series(label, pts))
    if not series:
        return None
    return Chart(
        title="Share of verify steps whose draft was accepted at least up to each position "
        "(mean over restarts).",
        uri=charts.data_uri(charts.acceptance_chart(series)),
        alt="Per-position acceptance rate per draft length.",
    )


def sweep(a: Analysis) -> SweepView | None:
    """The k sweep section, or None when the bundle has no sweep."""
    if a.sweep is None or not a.sweep.workloads:
        return None
    pooled = (
        ""
        if a.sweep.best_k is None
        else f" Pooled over every workload the best k is {a.sweep.best_k}."
    )
    note = (
        "Each point runs the same speculation method with a different number of draft "
        "tokens k per step (k = 0 is the baseline). More draft tokens raise the tokens "
        "accepted per step but also the cost of every step; the best k balances the two. A "
        "dash in a table marks a value not measured." + pooled
    )
    level = sel.low_level(a)
    tables = [
        SweepTable(
            title=_title(sw.workload, sw.concurrency, a),
            rows=_sweep_rows(sw),
            best_k=_best_k_text(
                sw, sel.best_comparison(a, sw.workload) if sw.concurrency == level else None
            ),
            theory=_theory_text(sw),
        )
        for sw in _sweep_workloads(a)
    ]
    return SweepView(
        tables=tables, chart=_sweep_chart(a), acceptance_chart=_acceptance_chart(a), note=note
    )
