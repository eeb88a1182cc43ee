"""The variance chapter: every restart's mean relative to the baseline (the chart), the margin
and the A/A check in words, and the spread per arm and workload with the requests and restarts
that would narrow it."""

from __future__ import annotations

from diagnostic.report import charts
from diagnostic.report import fmt as f
from diagnostic.report import select as sel
from diagnostic.report.budget import Day
from diagnostic.report.views.base import Chart
from diagnostic.report.views.chapters import RestartRow, VarianceView
from diagnostic.schema.analysis import Analysis, ArmResult, ArmWorkload

__all__ = ["variance"]


def _band_text(a: Analysis) -> str:
    nb = a.noise_band
    lo, hi = 1 / (1 + nb.delta), 1 + nb.delta
    inside = f"a speedup interval inside [{f.num(lo, 3)}, {f.num(hi, 3)}] counts as no difference"
    text = f"Margin δ = {f.pct(nb.delta)} ({nb.source}): {inside}."
    if nb.aa_check is not None:
        widest = next(  # the A/A interval the band reports, labelled with its own level
            (
                c
                for c in a.comparisons
                if c.checks_design and (c.ci_low, c.ci_high) == (nb.aa_ci_low, nb.aa_ci_high)
            ),
            None,
        )
        aa = (
            f.decided_ci(widest, nb.delta)
            if widest
            else f.ci(nb.aa_ci_low, nb.aa_ci_high, fmt="ratio")
        ) or f.MISSING
        text += f" Measured restart noise, A/A {nb.aa_source}: {aa}" + (
            ", containing 1."
            if nb.aa_check
            else ". The design check failed: "
            + "; ".join(sel.aa_text(c) for c in sel.aa_failures(a))
            + " excludes 1."
        )
    return text


def _restart_row(arm: ArmResult, aw: ArmWorkload, day: Day) -> RestartRow:
    means = ", ".join(f.tps(r.mean) for r in sorted(aw.restarts, key=lambda r: r.restart))
    p = aw.planning
    return RestartRow(
        arm=arm.id,
        workload=aw.workload,
        restarts=means or f.MISSING,
        cv_between=f.pct(p.cv_between) if p else "—",
        cv_within=f.pct(p.cv_within) if p else "—",
        restart_share=f.pct(p.restart_share, 0) if p else "—",
        advice=day.plan(p) if p else "One restart: restart spread not measured.",
    )


def variance(a: Analysis, day: Day) -> VarianceView:
    """Restart means per arm and workload, normalised to the baseline, with the A/A band;
    the planning advice bounded by what `day` allows."""
    level = sel.levels(a)[0]
    base = next((arm for arm in a.arms if arm.is_baseline), None)
    strips, rows = [], []
    for arm in sel.ordered_arms(a):
        for w in sel.workloads(a):
            aw = sel.arm_workload(arm, w, level)
            if aw is None:
                continue
            rows.append(_restart_row(arm, aw, day))
            ref = sel.arm_workload(base, w, level) if base else None
            scale = ref.decode_tps.estimate if ref else None
            values = [r.mean / scale for r in aw.restarts if r.mean is not None and scale]
            if values:
                strips.append(charts.Strip(arm.id, w, values))
    chart = None
    if strips:
        d = a.noise_band.delta
        chart = Chart(
            title="Restart means divided by the baseline's geometric mean on the same workload; "
            "bar: arm geometric mean; band: the margin [1/(1+δ), 1+δ].",
            uri=charts.data_uri(charts.variance_chart(strips, band=(1 / (1 + d), 1 + d))),
            alt="Strip plot of per-restart throughput relative to the baseline.",
        )
    return VarianceView(chart=chart, band=_band_text(a), rows=rows)
