"""client/processes.py: streams over worker processes, one clock, one writer; against the real
llama-server, with a kill -9 of collect and --resume (no record lost, none repeated)."""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import threading
import time
from multiprocessing.queues import Queue
from pathlib import Path

import pytest
import sse_server
from click.testing import CliRunner
from conftest import collect_until

from diagnostic import defaults
from diagnostic.bundle.store import Bundle
from diagnostic.cli import main
from diagnostic.errors import WorkerFailed
from diagnostic.measure.client import ClientOptions, Job, RequestLabel, process_count, run_streams
from diagnostic.schema.requests import RequestRecord


def _jobs(n: int, concurrency: int = 1) -> list[Job]:
    prompts = ["The sky is", "Rivers flow", "Once upon a time", "Bread is made"]
    return [
        Job(
            label=RequestLabel(
                arm="p",
                restart=0,
                seq=i,
                workload="tiny",
                prompt_id=f"tiny-{i % len(prompts)}",
                warmup=False,
                concurrency=concurrency,
            ),
            prompt=prompts[i % len(prompts)],
        )
        for i in range(n)
    ]


def test_process_count_follows_the_streams_and_the_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    per = defaults.STREAMS_PER_PROCESS
    monkeypatch.setattr(os, "cpu_count", lambda: 8)
    assert process_count(1) == process_count(per) == 1
    assert process_count(per + 1) == 2 and process_count(4 * per) == 4
    assert process_count(100 * per) == 8  # one per core at most
    assert process_count(per, forced=3) == 3 and process_count(2, forced=5) == 2
    monkeypatch.setattr(os, "cpu_count", lambda: None)
    assert process_count(4 * per) == 1


def _perf_counter_into(outbox: Queue[float]) -> None:
    outbox.put(time.perf_counter())


def test_a_spawned_process_reads_the_parents_clock() -> None:
    """perf_counter is CLOCK_MONOTONIC on Linux, one clock system-wide: a worker's reading
    falls between two of the parent's, so t_send from any worker is on the run's clock."""
    if sys.platform == "linux":
        assert "CLOCK_MONOTONIC" in time.get_clock_info("perf_counter").implementation
    context = multiprocessing.get_context("spawn")
    outbox: Queue[float] = context.Queue()
    before = time.perf_counter()
    child = context.Process(target=_perf_counter_into, args=(outbox,))
    child.start()
    seen = outbox.get(timeout=60)
    child.join()
    after = time.perf_counter()
    assert before < seen < after


def test_a_worker_killed_mid_run_is_an_error_naming_it() -> None:
    with sse_server.serving(sse_server.silent_after(2, 60)) as server:
        options = ClientOptions(base_url=server.url, max_tokens=8, read_timeout_s=60)

        def never(_: RequestRecord) -> None:
            raise AssertionError("a silent stream cannot end")

        def killer() -> None:
            deadline = time.monotonic() + 60
            while not (children := multiprocessing.active_children()):
                assert time.monotonic() < deadline
                time.sleep(0.05)
            time.sleep(1.0)  # the workers have started their streams
            assert children[0].pid is not None
            os.kill(children[0].pid, signal.SIGKILL)

        threading.Thread(target=killer, daemon=True).start()
        with pytest.raises(WorkerFailed, match=r"died with exit code -9"):
            run_streams(options, _jobs(4), concurrency=4, t0=0.0, on_record=never, processes=2)
    assert not multiprocessing.active_children()


def test_an_error_in_the_writer_stops_every_worker() -> None:
    """collect's store raises ServerGone at the first refused connection: the workers go too."""
    with sse_server.refusing() as url:
        options = ClientOptions(base_url=url, max_tokens=8)
        seen: list[RequestRecord] = []

        def store(record: RequestRecord) -> None:
            seen.append(record)
            raise RuntimeError("stop")

        with pytest.raises(RuntimeError, match="stop"):
            run_streams(options, _jobs(40), concurrency=4, t0=0.0, on_record=store, processes=2)
    assert len(seen) == 1 and seen[0].error and "cannot connect" in seen[0].error
    assert not multiprocessing.active_children()


@pytest.mark.engine
def test_workers_measure_the_real_engine_on_one_clock(llama_server: str) -> None:
    options = ClientOptions(base_url=llama_server, max_tokens=8)
    records: list[RequestRecord] = []
    t0 = time.perf_counter()
    run_streams(options, _jobs(8, 4), concurrency=4, t0=t0, on_record=records.append, processes=2)
    elapsed = time.perf_counter() - t0
    assert sorted(r.seq for r in records) == list(range(8))
    assert all(r.error is None and r.completion_tokens == 8 for r in records)
    # Every send and end lies inside the parent's window: one clock across the processes.
    assert all(r.t_send > 0 and r.t_send + (r.e2e_s or 0) < elapsed for r in records)
    assert not multiprocessing.active_children()


def _children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(c) for c in (task / "children").read_text().split()]
    return found


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except FileNotFoundError:
        return b""


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return True
    return state in {"Z", "X"}  # exited, not yet reaped by whoever adopted it


@pytest.mark.engine
@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc for the worker processes")
def test_multiprocess_collect_resumes_after_sigkill_without_loss_or_duplicates(
    tmp_path: Path, llama_server: str
) -> None:
    out = tmp_path / "bundle"
    requests = 12
    args = [
        llama_server,
        "--out",
        str(out),
        "--workloads",
        "code",
        "--requests",
        str(requests),
        "--warmup",
        "1",
        "--max-tokens",
        "16",
        "--concurrency",
        "4",
        "--processes",
        "2",
    ]
    path = out / "runs" / "baseline-r0" / "requests.jsonl"
    child = collect_until(args, path, 4)
    workers = [c for c in _children(child.pid) if b"spawn_main" in _cmdline(c)]
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    assert len(workers) == 2, "collect --processes 2 runs two workers"
    deadline = time.monotonic() + 60
    while not all(_gone(w) for w in workers):  # orphans leave: no load left running
        assert time.monotonic() < deadline, "worker processes outlived the killed collect"
        time.sleep(0.05)
    killed = Bundle.open(out).read_requests("baseline", 0).records
    assert 0 < len([r for r in killed if not r.warmup]) < requests, "killed mid-run"

    result = CliRunner().invoke(main, ["collect", *args, "--resume"])
    assert result.exit_code == 0, result.output
    records = Bundle.open(out).read_requests("baseline", 0).records
    measured = [r for r in records if not r.warmup]
    assert sorted(r.seq for r in measured) == list(range(1, requests + 1))  # none lost, none twice
    assert all(r.error is None and r.completion_tokens == 16 for r in measured)
    kept = {(r.seq, r.t_send) for r in killed if not r.warmup}
    assert kept <= {(r.seq, r.t_send) for r in measured}  # what was stored stays as it was
    resumed = [r for r in measured if (r.seq, r.t_send) not in kept]
    # One clock across the kill: the resumed requests were sent after the stored ones ended.
    assert min(r.t_send for r in resumed) > max(r.t_send + (r.e2e_s or 0) for r in killed)
