"""The methodology's account of the design that ran: fixed or adaptive, the restarts and
requests each arm got and why, what the plan estimated against what it took (the manifest's
TimePlan, written by `sweep`)."""

from __future__ import annotations

from diagnostic.common.progress import duration
from diagnostic.report import fmt as f
from diagnostic.report.view import KeyValue
from diagnostic.schema.analysis import Analysis
from diagnostic.schema.bundle import Manifest, TimePlan

__all__ = ["design_rows"]


def design_rows(manifest: Manifest, a: Analysis) -> list[KeyValue]:
    """Rows of the methodology's 'What was measured' table on the design and its cost."""
    p, t = manifest.plan, manifest.time_plan
    if p.design.kind == "adaptive":
        looks = ", ".join(str(n) for n in p.design.looks)
        design = (
            f"adaptive (group-sequential): looks after blocks {looks} at the Pocock per-look "
            "level; an arm whose comparisons were all decided (WIN, LOSS or EQUIVALENT) got "
            "no more restarts, the baseline and the A/A arm ran while any was open"
        )
    else:
        design = f"fixed: every planned restart ({p.restarts} per arm), decided once"
    rows = [("Design", design), ("Restarts per arm (run)", _restarts(a, t))]
    if t is not None:
        rows.append(("Requests per restart (planned on site)", f"{t.requests}: {t.requests_why}"))
        took = duration(t.took_s) if t.took_s is not None else "not recorded"
        rows.append(
            (
                "Wall-clock: planned against taken",
                f"planned {duration(t.estimated_s)} at the start, from the costs given "
                f"before measuring; took {took}; costs {t.costs_source}: "
                f"{t.startup_s:.3g} s start-up, {t.request_s:.3g} s per request",
            )
        )
    return [KeyValue(key=k, value=f.text(v)) for k, v in rows]


def _restarts(a: Analysis, t: TimePlan | None) -> str:
    """Restarts each arm contributed ('baseline 8; ngram-k3 4 (decided at look 1 (WIN))'),
    or one number when every arm got the same."""
    counts: dict[str, int] = dict(t.restarts) if t is not None else {}
    stopped = t.stopped if t is not None else {}
    if not counts:
        for c in a.comparisons:
            counts.setdefault(c.baseline, c.n_restarts_baseline)
            counts.setdefault(c.arm, c.n_restarts_arm)
    if not counts:
        return f.MISSING
    if len(set(counts.values())) == 1 and not stopped:
        return f"{next(iter(counts.values()))} for every arm"
    parts = []
    for arm, n in counts.items():
        why = f" ({stopped[arm]})" if arm in stopped else ""
        parts.append(f"{arm} {n}{why}")
    return "; ".join(parts)
