"""The deliverable agrees with itself (issue 36 item 5): a bundle collected by hand, whose
plan names no method or k and whose logs name no capture mode, reads what is known; the
requests per restart and the cost of a restart are stated once, from one computation."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from pydantic import BaseModel

from diagnostic.analyse.core import analyse
from diagnostic.bundle.store import Bundle
from diagnostic.logcheck.stage import FINDINGS_FILE
from diagnostic.report import ReportContext, budget
from diagnostic.report.build import report_context
from diagnostic.report.chapters import capture
from diagnostic.report.chapters.methodology import COST_ROW
from diagnostic.report.inputs import Inputs
from diagnostic.schema.logfacts import CheckReport, RunSources, SourceCapture

# Recorded by `diagnose collect` and `diagnose check` against the real llama-server.
COLLECT = Path(__file__).parent / "data" / "collect" / "llamacpp-ngram-no-k"


def _cells(ctx: ReportContext) -> list[str]:
    """Every table cell and fact that names a setting: cover, chapters 1 and 2."""
    rows = [r.role for t in ctx.before_after for r in t.rows]
    rows += [r.spec for r in ctx.capture_runs]
    rows += [c for t in (ctx.spec_pairs, ctx.spec_table) if t for row in t.rows for c in row]
    return [ctx.cover.drafter or "", *rows]


@pytest.fixture(scope="module")
def collected() -> ReportContext:
    return report_context(Bundle.open(COLLECT, strict=False))


@pytest.fixture(scope="module")
def unnamed(tmp_path_factory: pytest.TempPathFactory) -> ReportContext:
    """The same bundle had its server named no method either (a server without /slots)."""
    root = tmp_path_factory.mktemp("collect") / "bundle"
    shutil.copytree(COLLECT, root)
    for run in root.glob("runs/*/run.json"):
        info = json.loads(run.read_text())
        info["server_args"].pop("speculative.types", None)
        run.write_text(json.dumps(info))
    return report_context(Bundle.open(root, strict=False))


def test_an_unknown_capture_mode_is_not_flagged_changed(collected: ReportContext) -> None:
    pairs = collected.spec_pairs
    assert pairs is not None
    assert [row[3:6] for row in pairs.rows] == [["UNKNOWN", "UNKNOWN", "unknown"]]
    assert capture.SAMENESS == {True: "same", False: "CHANGED", None: "unknown"}


def test_nodes_whose_mode_is_unknown_are_not_said_to_agree(collected: ReportContext) -> None:
    bundle = Bundle.open(COLLECT, strict=False)
    check = CheckReport.model_validate_json((COLLECT / FINDINGS_FILE).read_text())
    sources = [
        SourceCapture(source=name, path=f"{name}.log", engine="llamacpp", resolved=mode)
        for name, mode in (("head", "UNKNOWN"), ("node2", "UNKNOWN"))
    ]
    known = [s.model_copy(update={"resolved": "FULL"}) for s in sources]
    check.log_sources = [
        RunSources(run_id="ngram-r0", sources=sources),
        RunSources(run_id="baseline-r0", sources=known),
    ]
    table = capture.node_table(Inputs(analysis=analyse(bundle), bundle=bundle, check=check))
    assert table is not None
    verdicts = {row[0]: row[-1] for row in table.rows}
    assert verdicts == {"ngram-r0": "unknown", "baseline-r0": "agree"}


def test_check_says_unknown_in_words(tmp_path: Path) -> None:
    bundle = tmp_path / "bundle"
    shutil.copytree(COLLECT, bundle)  # check writes findings.json into it
    done = subprocess.run(
        [sys.executable, "-m", "diagnostic", "check", str(bundle)],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "200", "NO_COLOR": "1"},
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    row = next(line for line in done.stdout.splitlines() if "│ ngram-r0 (" in line)
    cells = [c.strip() for c in row.strip("│").split("│")]
    assert cells[-1] == "unknown" and "(method not recorded)" in cells[3], cells
    assert "│ ? " not in done.stdout and "(?)" not in done.stdout
    assert "? →" not in done.stdout


def test_what_is_known_of_the_setting_is_said(collected: ReportContext) -> None:
    """The server reported n-gram (llama.cpp's /slots); nothing recorded k."""
    cells = _cells(collected)
    assert "speculation" not in cells
    assert collected.cover.drafter == "n-gram"
    role = {r.arm: r.role for t in collected.before_after for r in t.rows}
    assert role["ngram"] == "n-gram, k not recorded"
    assert {r.spec for r in collected.capture_runs} == {"off", "n-gram, k not recorded"}
    assert collected.spec_pairs is not None and collected.spec_pairs.rows[0][1] == "n-gram"
    assert collected.summary.headline.startswith("Speculation with n-gram is")


def test_a_setting_nothing_names_says_so(unnamed: ReportContext) -> None:
    cells = _cells(unnamed)
    assert "speculation" not in cells
    assert unnamed.cover.drafter == "on (method not recorded)"
    role = {r.arm: r.role for t in unnamed.before_after for r in t.rows}
    assert role["ngram"] == "speculation on (method and k not recorded)"
    spec = {r.spec for r in unnamed.capture_runs}
    assert spec == {"off", "speculation on (method and k not recorded)"}
    assert unnamed.spec_pairs is not None and unnamed.spec_pairs.rows[0][1] == "not recorded"


# -- point 5: requests per restart and the cost of a restart, stated once -----------------
SAMPLES = Path(__file__).parents[1] / "samples"
TIMED = ("llamacpp-cpu-adaptive", "llamacpp-cpu-gemma3")
_COST_WORDS = re.compile(r"start-up \d|\d s start-up|s per request|a start costs")


@pytest.fixture(scope="module")
def timed() -> dict[str, tuple[Bundle, ReportContext]]:
    out = {}
    for name in TIMED:
        bundle = Bundle.open(SAMPLES / name, strict=False)
        out[name] = (bundle, report_context(bundle))
    return out


def _requests_per_block(bundle: Bundle) -> str:
    """Measured requests per restart and workload, per block, counted from the records."""
    per_block: dict[int, Counter[int]] = {}
    for run in bundle.runs():
        records = [r for r in bundle.read_requests(run.arm, run.restart).records if not r.warmup]
        counts = Counter(r.workload for r in records if not r.error)
        per_block.setdefault(run.block or 0, Counter())[max(counts.values())] += 1
    spans: list[tuple[list[int], int]] = []
    for block in sorted(per_block):
        n = per_block[block].most_common(1)[0][0]
        if spans and spans[-1][1] == n:
            spans[-1][0].append(block + 1)
        else:
            spans.append(([block + 1], n))
    if len(spans) == 1:
        return f"{spans[0][1]} measured + {bundle.manifest.plan.warmup} warm-up"
    return ", ".join(
        f"{n} in blocks {b[0]}–{b[-1]}" if len(b) > 1 else f"{n} in block {b[0]}" for b, n in spans
    )


def _texts(ctx: ReportContext) -> list[str]:
    """Every string of the report context (charts left out)."""
    found: list[str] = []

    def walk(value: object) -> None:
        if isinstance(value, str):
            found.append(value)
        elif isinstance(value, BaseModel):
            for name in type(value).model_fields:
                if name != "uri":
                    walk(getattr(value, name))
        elif isinstance(value, list | tuple):
            for item in value:
                walk(item)

    walk(ctx)
    return found


@pytest.mark.parametrize("name", TIMED)
def test_requests_per_restart_are_what_each_block_measured(
    timed: dict[str, tuple[Bundle, ReportContext]], name: str
) -> None:
    bundle, ctx = timed[name]
    rows = {kv.key: kv.value for kv in ctx.methodology.plan}
    assert rows["Requests per restart and workload"].startswith(_requests_per_block(bundle))
    if name == "llamacpp-cpu-adaptive":  # resized on site: 15, then 6, 7 and 5
        assert rows["Requests per restart and workload"].startswith(
            "15 in blocks 1–2, 6 in block 3, 7 in block 4, 5 in blocks 5–8"
        )
        assert "Cost of a restart, above" in rows["Requests per restart (planned on site)"]


@pytest.mark.parametrize("name", TIMED)
def test_the_cost_of_a_restart_is_stated_once_and_every_estimate_uses_it(
    timed: dict[str, tuple[Bundle, ReportContext]], name: str
) -> None:
    bundle, ctx = timed[name]
    stating = [t for t in _texts(ctx) if _COST_WORDS.search(t)]
    assert stating == [ctx.methodology.plan[3].value], stating  # the cost row, alone
    assert ctx.methodology.plan[3].key == COST_ROW
    day = budget.day(bundle.runs(), analyse(bundle), warmup=bundle.manifest.plan.warmup)
    assert day.costs is not None and day.restart_s == day.costs.restart_s()
    for row in ctx.variance.rows:  # the planning column: 2 arms × n restarts at m requests
        if m := re.match(
            r"(\d+) requests × (\d+) restarts per arm: ≈ (.+) for two arms", row.advice
        ):
            cost = day.costs.restart_s(int(m[1]))
            assert cost is not None
            assert m[3] == budget._hours(2 * int(m[2]) * cost), row.advice
    notes = [r.note for t in ctx.before_after for r in t.rows] + [
        r.text for r in ctx.recommendations
    ]
    more = [
        m
        for n in notes
        for m in re.finditer(
            r"(\d+) more restarts? per arm \(\d+ in all, ≈ ([^)]+) for (\d+) arms\)", n
        )
    ]
    assert more, name
    for m in more:  # the arms it names (the arm and its baseline, or more), at the last requests
        restart = day.costs.restart_s()
        assert restart is not None
        assert m[2] == budget._hours(int(m[1]) * int(m[3]) * restart), m[0]
