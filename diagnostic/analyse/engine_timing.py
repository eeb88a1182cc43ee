"""A run's decode throughput by the engine's own clock beside the client's on the same requests."""

from __future__ import annotations

from collections.abc import Sequence

from diagnostic.engines.metrics import SpecCounters, parse_spec_counters
from diagnostic.schema.analysis import EngineTiming
from diagnostic.schema.requests import RequestRecord, decode_tps

__all__ = ["engine_timing"]

VLLM_SOURCE = "vLLM /metrics: Δ(generation_tokens − requests) / Δrequest_decode_time_seconds"
LLAMACPP_SOURCE = "llama.cpp timings: Σ(predicted_n − 1) / Σ predicted_ms of each answer"


def engine_timing(
    records: Sequence[RequestRecord], after: str | None, before: str | None
) -> EngineTiming | None:
    """vLLM's decode time histogram over the run (the /metrics snapshots bracket every request
    of the run, warm-ups included), else llama.cpp's per-answer timings. None when the engine
    exposes neither or no request has a decode interval."""
    timed = [r for r in records if r.error is None and decode_tps(r) is not None]
    if not timed:
        return None
    return _vllm(timed, after, before) or _llamacpp(timed)


def _timing(
    source: str, engine: float, timed: Sequence[RequestRecord], requests: int, tokens: float
) -> EngineTiming:
    """The engine's figure beside the client's, pooled the same way over the same requests."""
    decoded = time = 0.0
    for r in timed:
        first = r.chunk_tokens[0] if r.chunk_tokens else 1
        decoded += (r.completion_tokens or 0) - first
        time += r.chunk_times_s[-1] - r.chunk_times_s[0]
    client = decoded / time
    return EngineTiming(
        source=source,
        engine_tps=engine,
        client_tps=client,
        ratio=client / engine,
        engine_requests=requests,
        client_requests=len(timed),
        engine_tokens=tokens,
        client_tokens=sum(r.completion_tokens or 0 for r in timed),
    )


def _counters(text: str | None) -> SpecCounters | None:
    if not text:
        return None
    try:
        return parse_spec_counters(text)
    except ValueError:  # not Prometheus text: the report says so elsewhere
        return None


def _vllm(
    timed: Sequence[RequestRecord], after: str | None, before: str | None
) -> EngineTiming | None:
    late, early = _counters(after), _counters(before) or SpecCounters()
    if late is None or late.decode_time_s is None or late.generation_tokens is None:
        return None
    time = late.decode_time_s - (early.decode_time_s or 0.0)
    requests = (late.decode_requests or 0.0) - (early.decode_requests or 0.0)
    tokens = late.generation_tokens - (early.generation_tokens or 0.0)
    if time <= 0 or round(requests) != len(timed):
        # A restart between the snapshots, or requests on one side only (failed, resumed,
        # someone else's): the two figures would not cover the same requests.
        return None
    # vLLM times decode from the first token on: every request's first token is not in it.
    return _timing(VLLM_SOURCE, (tokens - requests) / time, timed, round(requests), tokens)


def _llamacpp(timed: Sequence[RequestRecord]) -> EngineTiming | None:
    pairs = [(r, _predicted(r)) for r in timed]
    both = [(r, p) for r, p in pairs if p is not None]
    if not both:
        return None
    tokens = sum(p[0] for _, p in both)
    # As llama.cpp's own predicted_per_second: the first token came with the prompt.
    engine = (tokens - len(both)) / sum(p[1] / 1000.0 for _, p in both)
    return _timing(LLAMACPP_SOURCE, engine, [r for r, _ in both], len(both), tokens)


def _predicted(record: RequestRecord) -> tuple[float, float] | None:
    timings = record.server_timings or {}
    n, ms = timings.get("predicted_n"), timings.get("predicted_ms")
    if isinstance(n, int | float) and isinstance(ms, int | float) and n > 0 and ms > 0:
        return float(n), float(ms)
    return None
