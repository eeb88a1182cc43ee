"""collect_run: measure one server process into one run of a bundle, resumably."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any, Literal

import httpx

from diagnostic.bundle.redact import secret_values
from diagnostic.bundle.store import METRICS_AFTER, METRICS_BEFORE, Bundle, run_id, workload_metrics
from diagnostic.common.answers import ACCEPT_ENCODING
from diagnostic.common.progress import Reporter
from diagnostic.engines.endpoints import Fingerprint, fingerprint
from diagnostic.engines.metrics import fetch_metrics
from diagnostic.errors import BundleError, ServerGone
from diagnostic.measure.client import ClientOptions, Job, auth_headers, run_streams
from diagnostic.measure.client.deadlines import RunDeadline, ServerStalled, stalled
from diagnostic.measure.client.faults import refused
from diagnostic.measure.collect.settings import RunSettings, plan_jobs
from diagnostic.measure.environment import capture_environment
from diagnostic.measure.telemetry import Recording, recording, server_pid
from diagnostic.measure.telemetry.quiet import quiet_window
from diagnostic.measure.workloads import Workload
from diagnostic.schema.bundle import RunInfo, utc_now
from diagnostic.schema.requests import RequestRecord, decode_tps, latest_attempts

__all__ = ["collect_run"]


def collect_run(
    bundle: Bundle, run: RunInfo, settings: RunSettings, *, reporter: Reporter
) -> RunInfo:
    """Measure one server process into bundle/runs/<arm>-r<restart>/; resumable.

    Fingerprints the engine, snapshots /metrics around the measured requests, runs each
    workload's warm-ups then its measured requests, appending each record as it ends. Requests
    already in requests.jsonl (same workload and seq) without an error are skipped, never
    repeated; failed ones are tried again, as the next attempt. The first refused connection
    ends the run: the server is gone, and every request after it would fail in a moment.
    """
    reporter = _NotesOnce(reporter)
    bundle.drop_torn_line(run.arm, run.restart)
    existing = bundle.read_requests(run.arm, run.restart).records
    _check_existing(bundle, run, settings, existing)
    # Measuring again (a resume): the run is open, its old seal no longer says its files.
    update = {"base_url": settings.base_url, "status": "running", "seal": None}
    run = run.model_copy(update=update)
    origin = _origin(run, existing)
    headers = auth_headers(settings.api_key)
    found = fingerprint(settings.base_url, headers=headers, timeout_s=min(30.0, settings.timeout_s))
    if found.unreachable:
        return _end(bundle, run, "failed", found.unreachable)
    run = _with_fingerprint(run, found, settings.model)
    for path, why in found.unreadable.items():
        reporter.note(f"{run_id(run.arm, run.restart)}: GET {path}: {why}; not kept")
    run = _with_quiet(run, settings, existing)
    bundle.write_run(run)
    options = settings.client_options(settings.model or found.model)
    past = _Past(existing)
    sampling = recording(
        bundle.run_dir(run.arm, run.restart),
        settings.telemetry,
        origin=origin,
        server_pid=server_pid(run, settings.base_url),
    )
    try:
        info_timeout = min(30.0, settings.timeout_s)
        with (
            sampling as telemetry,
            httpx.Client(
                base_url=settings.base_url,
                headers={**ACCEPT_ENCODING, **headers},
                timeout=info_timeout,
                limits=httpx.Limits(max_keepalive_connections=0),  # fetch_metrics' Deadline
            ) as info,
        ):
            try:
                _snapshot(bundle, run, info, METRICS_BEFORE, keep=bool(existing), reporter=reporter)
                made = _measure(bundle, run, settings, options, past, origin, reporter, info)
                # Nothing left to run (resuming a finished run): the old "after" snapshot stands.
                _snapshot(bundle, run, info, METRICS_AFTER, keep=not made, reporter=reporter)
            finally:
                # Stopped here, so that run.json says what each source gave whatever ends the run.
                run = _with_telemetry(run, telemetry, reporter)
        run = _refreshed(run, settings)
    except (ServerGone, ServerStalled) as gone:
        return _end(bundle, run, "failed", str(gone))
    except RunDeadline:
        return _end(bundle, run, "failed", _overdue(settings))
    except BaseException:
        # Said when it can be (a full disk may refuse run.json too: the error raised says it).
        with contextlib.suppress(BundleError):
            _end(bundle, run, "interrupted", "collect was interrupted; continue with --resume")
        raise
    return _end(bundle, run, *_verdict(bundle.read_requests(run.arm, run.restart).records))


def _overdue(settings: RunSettings) -> str:
    return (
        f"the run passed its deadline of {settings.run_timeout_s:g} s ([plan] run_timeout_s, "
        "collect --run-timeout) with requests still to make, and was stopped; continue with "
        "--resume, which makes the requests not made"
    )


def _stalled(settings: RunSettings, record: RequestRecord) -> ServerStalled:
    return ServerStalled(
        f"the server at {settings.base_url} accepted a request and stopped answering "
        f"({record.error}; {record.workload} request {record.seq}), so the run was stopped "
        "and recorded as failed; look at the server, then continue with --resume, which "
        "tries the failed and missing requests again"
    )


class _NotesOnce:
    """The run's reporter, saying each note once: /metrics is read twice per workload and
    around the run, and a server without it would say so every time."""

    def __init__(self, outer: Reporter) -> None:
        self.outer = outer
        self._said: set[str] = set()

    def start(self, label: str, total: int | None) -> None:
        """Forwarded."""
        self.outer.start(label, total)

    def advance(self, label: str, steps: int = 1, status: str | None = None) -> None:
        """Forwarded."""
        self.outer.advance(label, steps, status)

    def note(self, message: str) -> None:
        """Forwarded the first time only."""
        if message not in self._said:
            self._said.add(message)
            self.outer.note(message)


def _check_existing(
    bundle: Bundle, run: RunInfo, settings: RunSettings, existing: list[RequestRecord]
) -> None:
    asked = {r.max_tokens for r in existing} - {None, settings.max_tokens}
    if asked:
        raise BundleError(
            f"{bundle.run_dir(run.arm, run.restart)}: recorded with max_tokens {asked.pop()}; "
            f"resume with the same --max-tokens (not {settings.max_tokens})"
        )


def _origin(run: RunInfo, existing: list[RequestRecord]) -> float:
    """perf_counter value of the run's start: t_send stays monotonic across a resume."""
    now = time.perf_counter()
    if not existing:
        return now
    elapsed = time.time() - datetime.fromisoformat(run.started_at).timestamp()
    last_end = max(r.t_send + (r.e2e_s or 0.0) for r in existing)
    return now - max(elapsed, last_end)


def _with_fingerprint(run: RunInfo, found: Fingerprint, model: str | None) -> RunInfo:
    return run.model_copy(
        update={
            "engine": found.engine,
            "model": model or found.model,
            "server_args": found.server_args,
            "endpoints": found.endpoints,
            "unreadable_endpoints": found.unreadable,
            "environment": capture_environment(run.base_url),
        }
    )


def _with_quiet(run: RunInfo, settings: RunSettings, existing: list[RequestRecord]) -> RunInfo:
    """The quiet window, before the recorder starts and before the first request (local
    telemetry only); a resumed run keeps the window taken before its first request."""
    asked = settings.telemetry
    if asked is None or not asked.local or asked.quiet_s <= 0:
        return run
    if existing and run.quiet is not None:
        return run
    return run.model_copy(update={"quiet": quiet_window(asked.quiet_s)})


def _with_telemetry(run: RunInfo, telemetry: Recording | None, reporter: Reporter) -> RunInfo:
    """run.json's telemetry entries once sampling stopped; a resumed run's samples add up."""
    if telemetry is None:
        return run
    found = telemetry.stop()
    for name, source in found.items():
        earlier = run.telemetry.get(name)
        if earlier is not None and earlier.file is not None:
            found[name] = source.model_copy(
                update={"samples": source.samples + earlier.samples, "file": earlier.file}
            )
        if source.absent:
            reporter.note(f"{run_id(run.arm, run.restart)}: telemetry {name}: {source.absent}")
    return run.model_copy(update={"telemetry": {**run.telemetry, **found}})


def _refreshed(run: RunInfo, settings: RunSettings) -> RunInfo:
    """Info answers again after the requests: llama.cpp's /slots shows a slot's speculation
    params only once it has served one, SGLang's internal_states the acceptance so far."""
    headers = auth_headers(settings.api_key)
    later = fingerprint(settings.base_url, headers=headers, timeout_s=min(30.0, settings.timeout_s))
    if later.unreachable or later.engine.name != run.engine.name:
        return run
    return run.model_copy(
        update={
            "endpoints": later.endpoints,
            "server_args": later.server_args,
            "unreadable_endpoints": {**run.unreadable_endpoints, **later.unreadable},
        }
    )


def _snapshot(
    bundle: Bundle, run: RunInfo, client: httpx.Client, name: str, *, keep: bool, reporter: Reporter
) -> None:
    if keep and bundle.run_file(run.arm, run.restart, name).is_file():
        return  # resuming: the first snapshot is the one before the first request
    snap = fetch_metrics(client)
    if snap.text is not None:
        bundle.write_run_file(run.arm, run.restart, name, snap.text)
    if snap.error:
        reporter.note(f"{run_id(run.arm, run.restart)}: {snap.error}")


def _measure(
    bundle: Bundle,
    run: RunInfo,
    settings: RunSettings,
    options: ClientOptions,
    past: _Past,
    origin: float,
    reporter: Reporter,
    info: httpx.Client,
) -> int:
    """Run every job not yet done; return how many requests were made. /metrics is read
    after each workload's warm-up and after its measured requests, so acceptance can be had
    per workload without the warm-ups."""
    levels = settings.concurrency
    made = 0
    deadline = time.perf_counter() + settings.run_timeout_s  # afresh on each --resume
    for level, workload in ((lv, w) for lv in range(len(levels)) for w in settings.workloads):
        label = f"{run_id(run.arm, run.restart)} {workload.name}"
        label += f" c={levels[level]}" if len(levels) > 1 else ""
        warm, measured = plan_jobs(run, settings, workload, level)
        todo = [past.next_try(j) for j in measured if not past.done(j)]
        # A server that died and came back is a new, cold process: warm it up again.
        warm = [past.next_try(j) for j in warm if past.lost_server or not past.done(j)]
        if not todo:
            warm = []
        total = len(warm) + len(measured)
        reporter.start(label, total)
        skipped = len(measured) - len(todo)
        if skipped:
            reporter.advance(label, skipped, status=f"{skipped} already recorded")

        secrets = _prompt_secrets(workload)

        def store(
            record: RequestRecord, label: str = label, secrets: dict[str, list[str]] = secrets
        ) -> None:
            bundle.append_request(record, secrets.get(record.prompt_id))
            reporter.advance(label, 1, status=_status(record))
            if refused(record.error):
                raise ServerGone(
                    f"the server at {settings.base_url} stopped answering ({record.error}; "
                    f"{record.workload} request {record.seq}): it died or was stopped, so the "
                    "run was stopped; look at the server's log, start it again and continue "
                    "with --resume, which retries the failed requests"
                )
            if stalled(record.error):
                raise _stalled(settings, record)

        _run_jobs(warm, options, levels[level], origin, store, settings.processes, deadline)
        tag = levels[level] if len(levels) > 1 else 0
        if todo:
            before = workload_metrics(workload.name, tag, "before")
            _snapshot(bundle, run, info, before, keep=False, reporter=reporter)
        _run_jobs(todo, options, levels[level], origin, store, settings.processes, deadline)
        if todo:
            after = workload_metrics(workload.name, tag, "after")
            _snapshot(bundle, run, info, after, keep=False, reporter=reporter)
        made += len(warm) + len(todo)
    return made


def _prompt_secrets(workload: Workload) -> dict[str, list[str]]:
    """Secrets in each prompt, by prompt id: a model that repeats its prompt echoes them out
    of the context (`--api-key`, `PASSWORD=`) that shows them to be secrets."""
    found = {
        p.id: secret_values(p.prompt if p.prompt is not None else json.dumps(p.messages))
        for p in workload.prompts
    }
    return {k: v for k, v in found.items() if v}


class _Past:
    """Records already in the run: which requests are done, and the next attempt of each."""

    def __init__(self, records: list[RequestRecord]) -> None:
        self._ok = {(r.workload, r.seq) for r in records if not r.error}
        self._tries: dict[tuple[str, int], int] = {}
        for r in records:
            key = (r.workload, r.seq)
            self._tries[key] = max(self._tries.get(key, 0), r.attempt)
        self.lost_server = any(refused(r.error) for r in records)

    def done(self, job: Job) -> bool:
        """Whether the job's request already succeeded."""
        return (job.label.workload, job.label.seq) in self._ok

    def next_try(self, job: Job) -> Job:
        """The job labelled with its next attempt number."""
        tries = self._tries.get((job.label.workload, job.label.seq), 0)
        return replace(job, label=replace(job.label, attempt=tries + 1))


def _run_jobs(
    jobs: Sequence[Job],
    options: ClientOptions,
    concurrency: int,
    origin: float,
    store: Callable[[RequestRecord], None],
    processes: int | None = None,
    deadline: float | None = None,
) -> None:
    """The jobs' requests, `concurrency` in flight, in this process or spread over several
    (`processes`; None decides by the streams); every record stored here, by `store`; past
    `deadline` (perf_counter) RunDeadline."""
    run_streams(
        options,
        jobs,
        concurrency=concurrency,
        t0=origin,
        on_record=store,
        processes=processes,
        deadline=deadline,
    )


def _status(record: RequestRecord) -> str:
    if record.error:
        return f"error: {record.error[:60]}"
    tps = decode_tps(record)
    kind = "warm-up" if record.warmup else "last"
    text = f"{kind} {tps:.1f} tok/s" if tps is not None else f"{kind}: no decode interval"
    if record.completion_tokens != record.max_tokens:
        # The engine stopped early (EOS not ignored?): the analysis leaves such requests out.
        text += f", {record.completion_tokens} of {record.max_tokens} tokens"
    return text


def _verdict(records: list[RequestRecord]) -> tuple[Literal["ok", "failed"], str | None]:
    """ok unless fewer than half the measured requests succeeded (a server in trouble); single
    errors stay in the records, where the analysis leaves them out. A request retried by
    --resume counts by its last attempt."""
    measured = [r for r in latest_attempts(records) if not r.warmup]
    bad = [r for r in measured if r.error]
    if measured and len(bad) * 2 <= len(measured):
        return "ok", None
    first = bad[0].error if bad else "no measured request"
    return "failed", f"{len(bad)} of {len(measured)} measured requests failed; first: {first}"


def _end(bundle: Bundle, run: RunInfo, status: Any, failure: str | None) -> RunInfo:
    run = run.model_copy(update={"status": status, "failure": failure, "ended_at": utc_now()})
    bundle.write_run(run)
    return run
