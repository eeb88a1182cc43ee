"""One figure per quantity in the whole deliverable (issue 44): the restarts that settle a
comparison, their probability, and each comparison's verdict read the same wherever the report
prints them — page 1, the glance table, the before-and-after tables, the recommendations."""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

import pytest

from diagnostic.bundle.store import Bundle
from diagnostic.report import ReportContext
from diagnostic.report.build import report_context

SAMPLES = Path(__file__).resolve().parent.parent / "samples"
NAMES = sorted(p.name for p in SAMPLES.iterdir() if (p / "manifest.json").is_file())
# "3 more restarts per arm (6 in all, ≈ 4 min for 2 arms) would decide it with probability 85%"
_MORE = re.compile(
    r"(\d+) more restarts? per arm \((\d+) in all[^)]*\)(?: \([^)]*\))? would decide it with "
    r"probability (\d+)%"
)
_NAMED = re.compile(r"([\w.+-]+) on (\w+): " + _MORE.pattern)


@pytest.fixture(scope="module")
def contexts() -> dict[str, ReportContext]:
    return {name: report_context(Bundle.open(SAMPLES / name, strict=False)) for name in NAMES}


def _workload(title: str) -> str:
    return title.removeprefix("Workload: ").split(",")[0].split(" ")[0]


def _settle(ctx: ReportContext) -> dict[tuple[str, str], set[tuple[str, str, str]]]:
    """(arm, workload) → every (more, in all, probability) the report prints for it."""
    seen: dict[tuple[str, str], set[tuple[str, str, str]]] = defaultdict(set)
    for table in ctx.before_after:
        w = _workload(table.title)
        for row in table.rows:
            for m in _MORE.finditer(row.note):
                seen[(row.arm, w)].add((m[1], m[2], m[3]))
    for text in [r.text for r in ctx.recommendations]:
        for m in _NAMED.finditer(text):
            seen[(m[1], m[2])].add((m[3], m[4], m[5]))
    return seen


@pytest.mark.parametrize("name", NAMES)
def test_restarts_to_settle_read_the_same_everywhere(
    contexts: dict[str, ReportContext], name: str
) -> None:
    for key, figures in _settle(contexts[name]).items():
        assert len(figures) == 1, (name, key, figures)


@pytest.mark.parametrize("name", NAMES)
def test_each_comparison_has_one_verdict_across_the_report(
    contexts: dict[str, ReportContext], name: str
) -> None:
    ctx = contexts[name]
    verdicts: dict[tuple[str, str], set[str]] = defaultdict(set)
    if ctx.glance is not None:
        for row in ctx.glance.rows:
            for w, cell in zip(ctx.glance.workloads, row.cells, strict=True):
                if cell.verdict not in ("—", ""):
                    verdicts[(row.arm, w)].add(cell.verdict)
    for table in ctx.before_after:
        if "concurrency" in table.title and not table.title.endswith("concurrency 1"):
            continue  # the glance table shows the lowest level
        for row in table.rows:
            if row.verdict not in ("BASELINE", "—", ""):
                verdicts[(row.arm, _workload(table.title))].add(row.verdict)
    for key, seen in verdicts.items():
        assert len(seen) == 1, (name, key, seen)
