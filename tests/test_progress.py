"""The overall bar (issue 23 item 8): one bar over the whole run beside the per-workload ones,
the planned duration said before the first request; on the real engine for `collect`."""

from __future__ import annotations

from pathlib import Path

import pytest

from diagnostic.common.progress import WithOverall
from diagnostic.measure.collect import CollectConfig, collect
from diagnostic.measure.collect.stage import OVERALL


class Recorder:
    """A reporter that keeps what it was told, in order."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, int | None, str | None]] = []

    def start(self, label: str, total: int | None) -> None:
        self.events.append(("start", label, total, None))

    def advance(self, label: str, steps: int = 1, status: str | None = None) -> None:
        self.events.append(("advance", label, steps, status))

    def note(self, message: str) -> None:
        self.events.append(("note", message, None, None))

    def steps(self, label: str) -> int:
        return sum(n or 0 for kind, lab, n, _ in self.events if kind == "advance" and lab == label)


def test_the_overall_bar_moves_with_every_task_and_says_where() -> None:
    outer = Recorder()
    progress = WithOverall(outer, "all", where="block 1 · a r0")
    progress.headline = "likely done 14:20"
    progress.start("a-r0 code", 3)
    progress.advance("a-r0 code", 2, status="51 tok/s")
    progress.advance("a-r0 prose", 1)
    assert outer.steps("all") == 3 and progress.done == 3
    assert outer.steps("a-r0 code") == 2
    statuses = [s for kind, lab, _, s in outer.events if kind == "advance" and lab == "all"]
    assert statuses == [
        "block 1 · a r0 · code · 51 tok/s · likely done 14:20",
        "block 1 · a r0 · prose · likely done 14:20",
    ]


@pytest.mark.engine
def test_collect_draws_one_bar_over_every_workload(tmp_path: Path, llama_server: str) -> None:
    """Real llama-server: the planned duration is a note before the first request; the overall
    bar's total is every request of every workload and it ends full."""
    recorder = Recorder()
    config = CollectConfig(
        base_url=llama_server,
        out=tmp_path / "b",
        workloads=["code", "prose"],
        requests=2,
        warmup=1,
        max_tokens=16,
    )
    recap = collect(config, reporter=recorder)
    assert recap.status == "ok"
    kinds = [(kind, label) for kind, label, _, _ in recorder.events]
    planned = kinds.index(("note", recorder.events[0][1]))
    assert recorder.events[0][1].startswith("Planned: 6 requests (0 already recorded), about")
    assert planned < kinds.index(("start", OVERALL)) < kinds.index(("advance", OVERALL))
    assert ("start", OVERALL, 6, None) in recorder.events
    assert recorder.steps(OVERALL) == 6
    workload_bars = {lab for kind, lab, _, _ in recorder.events if kind == "start"} - {OVERALL}
    assert len(workload_bars) == 2
