"""Page 1's alarm for a bundle none of whose measured requests can be used (all failed)."""

from __future__ import annotations

from collections import Counter

from diagnostic.report import fmt as f
from diagnostic.report.inputs import Inputs
from diagnostic.schema.analysis import Analysis

__all__ = ["nothing_measured", "unmeasured"]

_QUOTED = 160  # characters of the commonest error quoted on page 1


def nothing_measured(a: Analysis) -> bool:
    """Whether no arm has a single usable measured request: every figure would be empty."""
    return not any(arm.decode_tps.n_requests for arm in a.arms)


def _many(n: int, what: str) -> str:
    return f"{f.count(n)} {what}{'' if n == 1 else 's'}"


def unmeasured(inputs: Inputs) -> str:
    """The alarm's sentences when nothing_measured, naming how many requests failed and the
    commonest error the server gave; '' otherwise."""
    if not nothing_measured(inputs.analysis):
        return ""
    records = [
        r
        for run in inputs.runs
        for r in inputs.bundle.read_requests(run.arm, run.restart).records
        if not r.warmup
    ]
    arms = len({run.arm for run in inputs.runs})
    where = f"{_many(len(inputs.runs), 'server run')} of {_many(arms, 'arm')}"
    if not records:
        return (
            f"This bundle holds no measured request ({where}): there is nothing to report. "
            "Measure the server with diagnose collect or diagnose sweep first."
        )
    errors = Counter(r.error for r in records if r.error)
    failed = sum(errors.values())
    if failed == len(records):
        said = f"Every one of the {f.count(failed)} measured requests failed ({where})"
    else:
        said = (
            f"None of the {f.count(len(records))} measured requests can be used ({where}): "
            f"{f.count(failed)} failed, the others were left out (see Output equivalence and "
            "data quality)"
        )
    if errors:
        error, n = errors.most_common(1)[0]
        shown = error if len(error) <= _QUOTED else error[: _QUOTED - 1] + "…"
        said += f"; the server answered “{shown}” ({f.count(n)} of them)"
    return (
        f"{said}. Nothing was measured: every figure, comparison and verdict below is empty. "
        "Check that the server is up and answers the OpenAI API at the URL given, then "
        "collect again."
    )
