"""Page 1's telemetry line: restart noise with a visible cause, from Analysis.telemetry."""

from __future__ import annotations

import statistics

from diagnostic.bundle.store import run_id
from diagnostic.report.chapters.telemetry import column
from diagnostic.schema.analysis import Analysis
from diagnostic.schema.telemetry import LOW_IS_WORSE, RestartOutlier, TelemetryAnalysis

__all__ = ["telemetry_line"]

# A cause goes with the noise on page 1 from this share of the restart means' variance (r²)
# over at least this many restarts: with 5, r² ≥ 0.5 by chance alone is about 1 time in 10.
_ASSOCIATED_SHARE = 0.5
_ASSOCIATED_RESTARTS = 5


def telemetry_line(a: Analysis) -> str:
    """Page 1's line when restart noise has a visible cause: the outlier restarts with a cause
    and the restart spread with and without them (a sensitivity, labelled, nothing excluded),
    and the causes whose variable goes with the restart means."""
    t = a.telemetry
    if t is None:
        return ""
    titles = {c.rule: c.title for c in t.causes}
    lines = []
    explained = [o for o in t.restart_outliers if o.causes]
    if explained:
        parts = [
            f"{run_id(o.arm, o.restart)} on {o.workload} ran at {o.mean_tps:,.1f} tok/s against "
            f"{o.others_tps:,.1f} in its other restarts "
            f"({', '.join(titles.get(c, c) for c in o.causes)}){_spread(a, o)}"
            for o in explained
        ]
        lines.append(
            "Restart noise with a visible cause (sensitivity only; no restart is left out of "
            "any figure): " + "; ".join(parts) + "."
        )
    associated = _associated(t)
    if associated:
        lines.append("The restart means go with a cause found: " + "; ".join(associated) + ".")
    if not lines:
        return ""
    return " ".join(lines) + " The telemetry chapter has the evidence."


def _associated(t: TelemetryAnalysis) -> list[str]:
    """The causes found whose variable also goes with the restart means, the worse way, for
    at least half their variance (r²) over 5 or more restarts: an association, said so."""
    runs = {(w.arm, w.restart) for w in t.windows}
    out = []
    for rule in dict.fromkeys(c.rule for c in t.causes if c.variable):
        causes = [c for c in t.causes if c.rule == rule]
        variable = causes[0].variable or ""
        low_is_worse = column(variable) in LOW_IS_WORSE
        rows = sorted(
            (
                v
                for v in t.variance
                if v.variable == variable
                and v.restarts >= _ASSOCIATED_RESTARTS
                and v.share >= _ASSOCIATED_SHARE
                and (v.r > 0) == low_is_worse
            ),
            key=lambda v: v.workload,
        )
        if rows:
            hit = {(c.arm, c.restart) for c in causes}
            shares = ", ".join(f"{v.share:.0%} on {v.workload}" for v in rows)
            out.append(
                f"{causes[0].title} in {len(hit)} of {len(runs)} runs, and it goes with "
                f"{shares} of the variance between restart means (r², an association over "
                f"{max(v.restarts for v in rows)} restarts)"
            )
    return out


def _spread(a: Analysis, o: RestartOutlier) -> str:
    arm = next((x for x in a.arms if x.id == o.arm), None)
    rows = [w for w in (arm.workloads if arm else []) if w.workload == o.workload]
    if not rows:
        return ""
    means = {r.restart: r.mean for r in rows[0].restarts if r.mean}
    rest = [m for r, m in means.items() if r != o.restart]
    if len(rest) < 2:
        return ""
    return (
        f" (restart-to-restart variation {_cv(list(means.values())):.1%} with it, "
        f"{_cv(rest):.1%} without it)"
    )


def _cv(values: list[float]) -> float:
    return statistics.stdev(values) / statistics.fmean(values)
