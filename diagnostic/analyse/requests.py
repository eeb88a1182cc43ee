"""Requests of a bundle → per-request decode throughput samples, with exclusions counted."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from diagnostic.bundle.store import Bundle, run_id
from diagnostic.schema.analysis import Exclusion, Exclusions
from diagnostic.schema.bundle import RequestRecord, RunInfo, decode_tps

__all__ = ["Loaded", "Sample", "exclusion_reason", "load_samples"]

REASON_RUN_FAILED = "run failed"
REASON_RUN_FAILURES = "over 10% of the run's requests failed"
MAX_FAILED_SHARE = 0.10
"""A run with a larger share of failed measured requests is left out of every figure."""
REASON_WARMUP = "warmup"
REASON_ERROR = "error"
REASON_TOKENS = "completion_tokens != max_tokens"
REASON_NO_INTERVAL = "no decode interval (< 2 chunks)"


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
    failed_requests: int = 0


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
    """Read every run's requests; keep measured ones as samples, count the rest by reason.
    Texts of non-warm-up requests without error are kept for the equivalence check."""
    max_tokens = bundle.manifest.plan.max_tokens
    runs = bundle.runs()
    loaded = Loaded(runs=runs, samples=[], exclusions=Exclusions())
    counts: Counter[tuple[str, int, str]] = Counter()
    for run in runs:
        log = bundle.read_requests(run.arm, run.restart)
        if log.torn_line is not None:
            loaded.exclusions.torn_lines += 1
        left_out = _left_out(run, log.records)
        measured = [r for r in log.records if not r.warmup]
        loaded.failed_requests += sum(r.error is not None for r in measured)
        if left_out:
            loaded.left_out.append((run_id(run.arm, run.restart), left_out))
        for record in log.records:
            reason = left_out or exclusion_reason(record, max_tokens)
            if not record.warmup and record.error is None:
                loaded.texts.append(record)
            if reason:
                counts[(run.arm, run.restart, reason)] += 1
                continue
            loaded.samples.append(_sample(record, run))
            loaded.first_chunk_assumed += not record.chunk_tokens
    _fill_exclusions(loaded.exclusions, counts)
    return loaded


def _left_out(run: RunInfo, records: list[RequestRecord]) -> str | None:
    """Why a whole run is out of the figures: it failed, or over 10% of its requests did."""
    if run.status == "failed":
        return REASON_RUN_FAILED
    measured = [r for r in records if not r.warmup]
    failed = sum(r.error is not None for r in measured)
    return REASON_RUN_FAILURES if measured and failed / len(measured) > MAX_FAILED_SHARE else None


def _fill_exclusions(out: Exclusions, counts: Counter[tuple[str, int, str]]) -> None:
    by_reason: Counter[str] = Counter()
    for (arm, restart, reason), n in sorted(counts.items()):
        out.items.append(Exclusion(arm=arm, restart=restart, reason=reason, count=n))
        by_reason[reason] += n
    out.by_reason = dict(sorted(by_reason.items()))
    out.total = sum(by_reason.values())
