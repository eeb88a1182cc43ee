"""Streams in one event loop, or spread over worker processes with records back to one writer.

One Python process carries a few hundred streams before its event loop, not the server, sets
the pace (benchmarks/README.md, "Many streams"); past `defaults.STREAMS_PER_PROCESS` streams the
jobs are dealt round-robin to spawned worker processes, one event loop and one StreamClient
each, every worker keeping its share of the streams in flight.

The clock: every process times with time.perf_counter(), which on Linux is
clock_gettime(CLOCK_MONOTONIC), one clock for the whole system (so is time.monotonic(); both
are per-boot, not per-process). A worker subtracts the parent's run origin `t0` from its own
readings, so every record's t_send is on the run's one clock whichever process sent it
(tests/test_client_processes.py checks a worker's reading against the parent's).

The records: a worker sends each record, as JSON, through a multiprocessing queue; the parent
hands them one at a time to `on_record` (which appends and fsyncs), so the bundle has one
writer and a record is on disk once or not at all (a record still in the queue when collect
is killed is lost, and `--resume` makes that request again). A worker leaves as soon as its
parent is gone (kill -9 included), so a killed collect leaves no load running behind it, and
`--resume` finds nothing half-written but the torn last line it already drops.
"""

from __future__ import annotations

import asyncio
import math
import multiprocessing
import os
import queue
import signal
import threading
import time
import traceback
from collections.abc import Awaitable, Callable, Sequence
from multiprocessing.process import BaseProcess
from multiprocessing.queues import Queue

from diagnostic import defaults
from diagnostic.errors import WorkerFailed
from diagnostic.measure.client.deadlines import RunDeadline
from diagnostic.measure.client.options import ClientOptions, Job
from diagnostic.measure.client.streams import StreamClient, run_pool
from diagnostic.schema.requests import RequestRecord

__all__ = ["process_count", "run_streams"]

OnRecord = Callable[[RequestRecord], Awaitable[None] | None]
_DONE = "done"
_FAILED = "failed"
_RECORD = "record"
_POLL_S = 0.2  # how often a worker checks its parent, and the parent its workers


def process_count(concurrency: int, forced: int | None = None) -> int:
    """Worker processes for `concurrency` streams: `forced` when given (never more than the
    streams), else one per `defaults.STREAMS_PER_PROCESS` streams, at most one per core."""
    if forced is not None:
        return max(1, min(forced, concurrency))
    wanted = math.ceil(concurrency / defaults.STREAMS_PER_PROCESS)
    return max(1, min(wanted, os.cpu_count() or 1))


def run_streams(
    options: ClientOptions,
    jobs: Sequence[Job],
    *,
    concurrency: int,
    t0: float,
    on_record: Callable[[RequestRecord], None],
    processes: int | None = None,
    deadline: float | None = None,
) -> None:
    """Make every job's request, `concurrency` in flight, calling `on_record` in this process
    as each ends. One process (`process_count`) runs the pool here; several share it out.
    Past `deadline` (a time.perf_counter() value) the requests in flight are dropped and
    RunDeadline raised."""
    if not jobs:
        return
    _check_deadline(deadline)
    count = min(process_count(concurrency, processes), len(jobs))
    if count == 1:
        asyncio.run(_pool(options, jobs, concurrency, t0, on_record, deadline))
        return
    _spread(options, jobs, concurrency, t0, on_record, count, deadline)


def _check_deadline(deadline: float | None) -> None:
    if deadline is not None and time.perf_counter() >= deadline:
        raise RunDeadline("the run's deadline passed with requests still to make")


async def _pool(
    options: ClientOptions,
    jobs: Sequence[Job],
    concurrency: int,
    t0: float,
    on_record: OnRecord,
    deadline: float | None = None,
) -> None:
    left = None if deadline is None else max(deadline - time.perf_counter(), 0.0)
    async with StreamClient(options, concurrency=concurrency) as client:
        try:
            async with asyncio.timeout(left):
                await run_pool(client, jobs, concurrency=concurrency, t0=t0, on_record=on_record)
        except TimeoutError:
            _check_deadline(deadline)
            raise


def _spread(
    options: ClientOptions,
    jobs: Sequence[Job],
    concurrency: int,
    t0: float,
    on_record: Callable[[RequestRecord], None],
    count: int,
    deadline: float | None = None,
) -> None:
    """Deal the jobs round-robin to `count` spawned workers (streams split as evenly), then
    store their records here until every worker has said it is done."""
    context = multiprocessing.get_context("spawn")  # fork would copy this process's threads
    inbox: Queue[tuple[str, str]] = context.Queue()
    shares = [concurrency // count + (i < concurrency % count) for i in range(count)]
    workers = [
        context.Process(
            target=_work,
            args=(options, list(jobs[i::count]), shares[i], t0, inbox, os.getpid()),
            name=f"diagnose-streams-{i}",
            daemon=True,
        )
        for i in range(count)
    ]
    try:
        for worker in workers:
            worker.start()
        _receive(inbox, workers, on_record, deadline)
    finally:
        for worker in workers:
            if worker.is_alive():
                worker.terminate()
        for worker in workers:
            worker.join(timeout=10)
        inbox.close()


def _receive(
    inbox: Queue[tuple[str, str]],
    workers: Sequence[BaseProcess],
    on_record: Callable[[RequestRecord], None],
    deadline: float | None = None,
) -> None:
    done = 0
    while done < len(workers):
        _check_deadline(deadline)
        try:
            kind, body = inbox.get(timeout=_POLL_S)
        except queue.Empty:
            _check_alive(workers)
            continue
        if kind == _RECORD:
            on_record(RequestRecord.model_validate_json(body))
        elif kind == _DONE:
            done += 1
        else:
            raise WorkerFailed(f"a load worker process failed: {body}")


def _check_alive(workers: Sequence[BaseProcess]) -> None:
    """A worker that ended without saying so was killed (out of memory, a signal)."""
    for worker in workers:
        if worker.exitcode not in (None, 0):
            raise WorkerFailed(
                f"load worker process {worker.name} (pid {worker.pid}) died with exit code "
                f"{worker.exitcode}; its requests in flight were not recorded"
            )


def _work(
    options: ClientOptions,
    jobs: list[Job],
    concurrency: int,
    t0: float,
    outbox: Queue[tuple[str, str]],
    parent: int,
) -> None:
    """A worker process: its share of the pool, each record sent to the parent as it ends."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the parent, which stops us
    threading.Thread(target=_leave_when_orphaned, args=(parent,), daemon=True).start()

    def send(record: RequestRecord) -> None:
        outbox.put((_RECORD, record.model_dump_json()))

    try:
        asyncio.run(_pool(options, jobs, concurrency, t0, send))
    except Exception:
        outbox.put((_FAILED, traceback.format_exc(limit=4).strip()))
    else:
        outbox.put((_DONE, ""))
    outbox.close()
    outbox.join_thread()


def _leave_when_orphaned(parent: int) -> None:
    """Exit at once when the parent is gone: nobody would store what this worker measures."""
    while os.getppid() == parent:
        time.sleep(_POLL_S)
    os._exit(1)
