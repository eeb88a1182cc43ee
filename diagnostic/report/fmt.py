"""Number and text formatting for the report: one place decides how every value reads."""

from __future__ import annotations

import math
from datetime import datetime

from diagnostic import defaults
from diagnostic.schema.analysis import ALL_WORKLOADS, Comparison

__all__ = [
    "MISSING",
    "NOT_RECORDED",
    "ci",
    "count",
    "date",
    "decided_ci",
    "decided_ratio",
    "futility",
    "join",
    "method_name",
    "num",
    "pct",
    "pvalue",
    "ratio",
    "ratio_ci",
    "ratio_end",
    "seconds",
    "span",
    "spec_setting",
    "table_title",
    "text",
    "tps",
]

MISSING = "not measured"
NOT_RECORDED = "not recorded"

_METHODS = {
    "ngram": "n-gram",
    "ngram_gpu": "n-gram",
    "ngram_simple": "n-gram",
    "ngram_mod": "n-gram",
    "ngram_map_k": "n-gram",
    "ngram_cache": "n-gram cache",
    "prompt_lookup": "prompt lookup",
    "standalone": "a standalone draft model",
    "nextn": "MTP (NextN)",
    "eagle": "EAGLE",
    "eagle3": "EAGLE-3",
    "mtp": "MTP",
    "medusa": "Medusa",
    "suffix": "suffix decoding",
    "draft_model": "a draft model",
    "draft": "a draft model",
    "draft_simple": "a draft model",
    "draft_eagle3": "EAGLE-3",
    "draft_mtp": "MTP",
    "self": "the model as its own drafter",
    "lookup": "prompt lookup",
}


def _ok(value: float | None) -> bool:
    return value is not None and math.isfinite(value)


def num(value: float | None, digits: int = 2) -> str:
    """A plain number with `digits` decimals, or 'not measured'."""
    return f"{value:,.{digits}f}" if _ok(value) else MISSING


def tps(value: float | None) -> str:
    """Tokens per second: 1 decimal below 1000, none above (3-4 significant figures)."""
    if not _ok(value):
        return MISSING
    assert value is not None
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:,.1f}"


def ci(low: float | None, high: float | None, fmt: str = "tps") -> str:
    """'[95% CI low–high]' in the same format as the estimate, or '' when not computed."""
    if not (_ok(low) and _ok(high)):
        return ""
    return f"[95% CI {span(low, high, fmt)}]"


RATIO_SHOWN_MAX = 100.0
"""Ratio interval ends beyond this print as '100+' (a t quantile on one df at a family's level
reaches 10^30: the digits would say nothing the '+' does not)."""


def ratio_end(value: float, delta: float = defaults.MARGIN) -> str:
    """A ratio interval's end: 2 decimals, more when those would print an edge of the ±δ
    margin (1.0199 is '1.0199', never '1.02', which reads as deciding)."""
    if value > RATIO_SHOWN_MAX:
        return f"{RATIO_SHOWN_MAX:.0f}+"
    edges = (1 + delta, 1 / (1 + delta))
    for digits in range(2, 7):
        text = num(value, digits)
        if all(text != num(e, digits) or value == e for e in edges):
            return text
    return num(value, 6)


def span(
    low: float | None, high: float | None, fmt: str = "tps", delta: float = defaults.MARGIN
) -> str:
    """'low–high' in the estimate's format, or '' when the interval was not computed."""
    if low is None or high is None or not (_ok(low) and _ok(high)):
        return ""
    if fmt == "tps":
        return f"{tps(low)}–{tps(high)}"
    return f"{ratio_end(low, delta)}–{ratio_end(high, delta)}"


def ratio(value: float | None) -> str:
    """A speedup ratio: '1.23×'."""
    return f"{value:.2f}×" if _ok(value) else MISSING


def ratio_ci(value: float | None, low: float | None, high: float | None) -> str:
    """'1.23× [95% CI 1.15–1.31]'."""
    if not _ok(value):
        return MISSING
    interval = ci(low, high, fmt="ratio")
    return f"{ratio(value)} {interval}" if interval else ratio(value)


def decided_ci(c: Comparison, delta: float = defaults.MARGIN) -> str:
    """The interval that decided a comparison, with its level: '[95% CI 1.15–1.31]',
    '[simultaneous 95% CI over 6 comparisons (each 99.4%): 1.15–1.31]'."""
    interval = span(c.ci_low, c.ci_high, "ratio", delta)
    if not interval:
        return ""
    return f"[{c.ci_label} {interval}]" if c.ci_label == "95% CI" else f"[{c.ci_label}: {interval}]"


def decided_ratio(c: Comparison, delta: float = defaults.MARGIN) -> str:
    """'1.23× [95% CI 1.15–1.31]' for a comparison, its deciding interval labelled."""
    interval = decided_ci(c, delta)
    return f"{ratio(c.ratio)} {interval}" if interval else ratio(c.ratio)


def futility(c: Comparison) -> str:
    """'stopped at look 1 for futility: +10% unlikely (one-sided p = 0.004)' for a comparison
    the adaptive design stopped for futility; '' for any other."""
    s = c.stopping
    if s is None or not s.futile or s.target is None:
        return ""
    p = pvalue(s.futility_p)
    p = f"< {p[1:]}" if p.startswith("<") else f"= {p}"
    return (
        f"stopped at look {s.look_number} for futility: +{pct(s.target, 0)} unlikely "
        f"(one-sided p {p})"
    )


def pct(value: float | None, digits: int = 1) -> str:
    """A fraction as a percentage: 0.123 → '12.3%'."""
    return f"{100 * value:.{digits}f}%" if _ok(value) else MISSING  # type: ignore[operator]


def pvalue(value: float | None) -> str:
    """A p-value: '0.003', '<0.001'."""
    if not _ok(value):
        return MISSING
    assert value is not None
    return "<0.001" if value < 0.001 else f"{value:.3f}"


def seconds(value: float | None) -> str:
    """A duration: milliseconds below one second, else seconds."""
    if not _ok(value):
        return MISSING
    assert value is not None
    return f"{value * 1000:.0f} ms" if value < 1 else f"{value:.2f} s"


def count(value: int | None) -> str:
    """An integer count with thousands separators."""
    return f"{value:,}" if value is not None else MISSING


def date(iso: str | None) -> str:
    """An ISO timestamp as '29 November 2026'."""
    if not iso:
        return NOT_RECORDED
    try:
        return datetime.fromisoformat(iso).strftime("%-d %B %Y")
    except ValueError:
        return iso


def text(value: object, missing: str = MISSING) -> str:
    """Any value as text; None and empty strings become `missing`."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return missing
    return str(value)


def method_name(method: str | None) -> str:
    """A speculation method as people write it: ngram → n-gram, eagle3 → EAGLE-3."""
    if not method:
        return "speculation"
    return _METHODS.get(method.strip().lower().replace("-", "_"), method)


def spec_setting(method: str | None, k: int | None) -> str:
    """A speculative setting by what is known of it: 'n-gram, k=3', 'n-gram, k not
    recorded', 'speculation on, k=3 (method not recorded)', 'speculation on (method and k
    not recorded)': never a bare 'speculation' that reads as a repeated heading."""
    if method:
        return method_name(method) + (f", k={k}" if k is not None else ", k not recorded")
    if k is not None:
        return f"speculation on, k={k} (method not recorded)"
    return "speculation on (method and k not recorded)"


def table_title(workload: str, level: int, levels: int) -> str:
    """A table's title: 'Workload: code' ('All workloads pooled'), with its concurrency level
    when the bundle measured `levels` > 1 of them."""
    name = "All workloads pooled" if workload == ALL_WORKLOADS else f"Workload: {workload}"
    return name + (f", concurrency {level}" if levels > 1 else "")


def join(parts: list[str]) -> str:
    """'a', 'a and b', 'a, b and c'."""
    if len(parts) <= 1:
        return "".join(parts)
    return ", ".join(parts[:-1]) + " and " + parts[-1]
