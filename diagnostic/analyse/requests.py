"""Requests of a bundle → one table (pandas) and the per-request decode throughput samples of
its measured rows, with every exclusion counted by reason."""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from diagnostic.bundle.store import Bundle, run_id
from diagnostic.schema.analysis import Exclusion, Exclusions
from diagnostic.schema.bundle import RunInfo
from diagnostic.schema.requests import RequestRecord, decode_tps, latest_attempts

__all__ = ["REQUEST_COLUMNS", "Loaded", "Sample", "exclusion_reason", "load_samples"]

REASON_RUN_FAILED = "run failed"
REASON_RUN_FAILURES = "over 10% of the run's requests failed"
MAX_FAILED_SHARE = 0.10
"""A run with a larger share of failed measured requests is left out of every figure."""
REASON_WARMUP = "warmup"
REASON_ERROR = "error"
REASON_TOKENS = "completion_tokens != max_tokens"
REASON_NO_INTERVAL = "no decode interval (< 2 chunks)"
REASON_RETRIED = "retried: a later attempt counts"


REQUEST_COLUMNS: tuple[str, ...] = (
    "arm",
    "restart",
    "block",
    "workload",
    "concurrency",
    "seq",
    "attempt",
    "warmup",
    "error",
    "excluded",
    "decode_tps",
    "ttft_s",
    "e2e_s",
    "completion_tokens",
    "prompt_id",
)
"""The columns of the requests table (Loaded.frame, requests.csv)."""


@dataclass(frozen=True)
class Sample:
    """One measured request reduced to what the statistics need."""

    arm: str
    restart: int
    block: int | None
    workload: str
    concurrency: int
    seq: int
    t_send: float
    prompt_id: str
    decode_tps: float
    ttft_s: float | None
    e2e_s: float | None
    tokens_per_chunk: float
    tokens: int = 0
    draft_tokens: float | None = None  # the engine's per-request draft count (llama.cpp)
    accepted_tokens: float | None = None  # … and how many of them were accepted


@dataclass
class Loaded:
    """Everything read from a bundle's runs."""

    runs: list[RunInfo]
    samples: list[Sample]
    exclusions: Exclusions
    texts: list[RequestRecord] = field(default_factory=list)
    first_chunk_assumed: int = 0
    left_out: list[tuple[str, str]] = field(default_factory=list)  # (run id, reason)
    records: dict[tuple[str, int], list[RequestRecord]] = field(default_factory=dict)
    failed_requests: int = 0
    frame: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=REQUEST_COLUMNS))


def exclusion_reason(record: RequestRecord, max_tokens: int) -> str | None:
    """Why a record is left out of the statistics, or None when it is measured."""
    if record.warmup:
        return REASON_WARMUP
    if record.error is not None:
        return REASON_ERROR
    if record.completion_tokens != max_tokens:
        return REASON_TOKENS
    if decode_tps(record) is None:
        return REASON_NO_INTERVAL
    return None


def _sample(record: RequestRecord, run: RunInfo) -> Sample:
    tps = decode_tps(record)
    assert tps is not None  # exclusion_reason guarantees it
    chunks = len(record.chunk_times_s)
    return Sample(
        arm=record.arm,
        restart=record.restart,
        block=run.block,
        workload=record.workload,
        concurrency=record.concurrency,
        seq=record.seq,
        t_send=record.t_send,
        prompt_id=record.prompt_id,
        decode_tps=tps,
        ttft_s=record.ttft_s,
        e2e_s=record.e2e_s,
        tokens_per_chunk=(record.completion_tokens or 0) / chunks,
        tokens=record.completion_tokens or 0,
        draft_tokens=_count(record, "draft_n"),
        accepted_tokens=_count(record, "draft_n_accepted"),
    )


def _count(record: RequestRecord, key: str) -> float | None:
    """A per-request speculation count from the engine's own timings (llama.cpp's
    `draft_n`, `draft_n_accepted`), when it reported one."""
    value = (record.server_timings or {}).get(key)
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        return None
    return float(value)


def load_samples(bundle: Bundle) -> Loaded:
    """Read every run's requests into one table (Loaded.frame: a row per record, with why it
    is left out of the statistics, empty when measured); keep the measured ones as samples.
    A request retried by --resume counts by its last attempt; texts of non-warm-up requests
    without error are kept for the equivalence check."""
    max_tokens = bundle.manifest.plan.max_tokens
    runs = bundle.runs()
    loaded = Loaded(runs=runs, samples=[], exclusions=Exclusions())
    rows: list[dict[str, object]] = []
    for run in runs:
        log = bundle.read_requests(run.arm, run.restart)
        if log.torn_line is not None:
            loaded.exclusions.torn_lines += 1
        loaded.records[(run.arm, run.restart)] = log.records
        latest = {id(r) for r in latest_attempts(log.records)}
        left_out = _left_out(run, [r for r in log.records if id(r) in latest])
        loaded.failed_requests += sum(r.error is not None and not r.warmup for r in log.records)
        if left_out:
            loaded.left_out.append((run_id(run.arm, run.restart), left_out))
        for record in log.records:
            reason = left_out or (
                exclusion_reason(record, max_tokens) if id(record) in latest else REASON_RETRIED
            )
            rows.append(_row(record, run, reason))
            if record.warmup or record.error is not None or id(record) not in latest:
                continue
            loaded.texts.append(record)
            if not reason:
                loaded.samples.append(_sample(record, run))
                loaded.first_chunk_assumed += not record.chunk_tokens
    loaded.frame = pd.DataFrame.from_records(rows, columns=list(REQUEST_COLUMNS))
    _fill_exclusions(loaded.exclusions, loaded.frame)
    return loaded


def _row(record: RequestRecord, run: RunInfo, reason: str | None) -> dict[str, object]:
    row = record.model_dump(include=set(REQUEST_COLUMNS))
    row.update(block=run.block, excluded=reason or "", decode_tps=decode_tps(record))
    return row


def _left_out(run: RunInfo, records: list[RequestRecord]) -> str | None:
    """Why a whole run is out of the figures: it failed, or over 10% of its requests did."""
    if run.status == "failed":
        return REASON_RUN_FAILED
    measured = [r for r in records if not r.warmup]
    failed = sum(r.error is not None for r in measured)
    return REASON_RUN_FAILURES if measured and failed / len(measured) > MAX_FAILED_SHARE else None


def _fill_exclusions(out: Exclusions, frame: pd.DataFrame) -> None:
    """Excluded requests counted per run and reason, and per reason (pandas group counts)."""
    excluded = frame[frame["excluded"] != ""]
    per_run = excluded.groupby(["arm", "restart", "excluded"]).size()
    out.items = [
        Exclusion(arm=str(arm), restart=int(restart), reason=str(reason), count=int(n))
        for (arm, restart, reason), n in per_run.sort_index().items()
    ]
    out.by_reason = {str(k): int(v) for k, v in excluded.groupby("excluded").size().items()}
    out.total = len(excluded)
