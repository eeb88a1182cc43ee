"""The draft-length sweep chapter: per workload, every k's throughput, speedup, acceptance
and step cost beside the theory's prediction and the best k; the sweep and acceptance charts."""

from __future__ import annotations

import statistics
from collections import Counter

from diagnostic.report import charts
from diagnostic.report import fmt as f
from diagnostic.report import select as sel
from diagnostic.report.views.base import Chart
from diagnostic.report.views.chapters import SweepRow, SweepTable, SweepView
from diagnostic.schema.analysis import ALL_WORKLOADS, Analysis, Comparison, SweepWorkload

__all__ = ["sweep"]


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
            title=f.table_title(sw.workload, sw.concurrency, len(sel.levels(a))),
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
