"""The methodology chapter's covariate adjustment: what was read before each run, the slope and
the spread it left, the balance check, whether the verdicts use it, and every comparison's
raw and adjusted estimate side by side."""

from __future__ import annotations

from diagnostic.report import fmt as f
from diagnostic.report.views.base import KeyValue
from diagnostic.report.views.chapters import CovariateRow
from diagnostic.schema.analysis import Analysis
from diagnostic.schema.covariate import CovariateAnalysis

__all__ = ["covariate_rows", "covariate_section"]

RULE = (
    "Declared before measuring: each restart's log mean decode throughput is regressed on a "
    "covariate measured where no arm can move it, with one slope per workload and "
    "concurrency pooled across arms from deviations within each arm, and loses slope × (its "
    "covariate − the mean over all runs). A comparison's ratio then moves only by what the "
    "covariate's difference between its two sides predicts, and its interval narrows by what "
    "the covariate explains. The same intervals and verdicts as above are then formed on the "
    "adjusted means."
)


def covariate_section(a: Analysis) -> list[KeyValue]:
    """The adjustment in words; empty when the runs had no covariate."""
    cov = a.covariate
    if cov is None:
        return []
    rows = [
        ("Rule", RULE),
        ("Covariate", f"{cov.description} ({cov.covariate}), {cov.runs} runs"),
        ("Slope and spread", _slopes(cov)),
        ("Balance check", _balance(cov)),
        ("Used for the verdicts", ("yes: " if cov.applied else "no: ") + cov.why + "."),
    ]
    return [KeyValue(key=k, value=v) for k, v in rows]


def covariate_rows(a: Analysis) -> list[CovariateRow]:
    """Every comparison, raw and adjusted, and which of the two the verdicts use."""
    cov = a.covariate
    if cov is None:
        return []
    return [
        CovariateRow(
            comparison=f"{e.arm} vs {e.baseline}, {e.workload}, concurrency {e.concurrency}",
            raw=_estimate(e.raw_ratio, e.raw_low, e.raw_high, e.raw_verdict),
            adjusted=_estimate(
                e.adjusted_ratio, e.adjusted_low, e.adjusted_high, e.adjusted_verdict
            ),
            used="adjusted" if cov.applied else "raw",
        )
        for e in cov.estimates
    ]


def _estimate(ratio: float, low: float | None, high: float | None, verdict: str) -> str:
    interval = f.span(low, high, "ratio")
    shown = f"{f.ratio(ratio)} ({interval})" if interval else f.ratio(ratio)
    return f"{shown} {verdict}"


def _slopes(cov: CovariateAnalysis) -> str:
    if not cov.slopes:
        return "the covariate did not vary within any arm: no slope"
    return "; ".join(
        f"{s.workload} (concurrency {s.concurrency}): slope {s.slope:.3g} per unit over "
        f"{s.restarts} restarts, restart-mean SD {f.pct(s.sd_raw)} raw, "
        f"{f.pct(s.sd_adjusted)} adjusted"
        for s in cov.slopes
    )


def _balance(cov: CovariateAnalysis) -> str:
    each = cov.balance_alpha / max(1, len(cov.balance))
    tests = "; ".join(
        f"{b.arm} − {b.reference} {_signed(b.difference)} "
        f"(p {f.pvalue(b.p_value)}, {'paired on' if b.method == 'paired-blocks' else 'Welch over'}"
        f" {b.runs} {'blocks' if b.method == 'paired-blocks' else 'runs'})"
        for b in cov.balance
    )
    return (
        f"The covariate's difference between each arm and its reference, tested at "
        f"{100 * each:.3g}% each (Bonferroni, {100 * cov.balance_alpha:.3g}% over "
        f"{len(cov.balance)} pairs): {tests or 'no pair'}. "
        + ("It passes." if cov.balanced else "It fails: the adjustment is withheld.")
    )


def _signed(value: float) -> str:
    """+0.502, −0.013; 0.000 for a difference that rounds to nothing (never −0.000)."""
    text = f"{value:+.3f}"
    return "0.000" if float(text) == 0 else text.replace("-", "−")
