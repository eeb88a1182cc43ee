"""The request records of a run (requests.jsonl): one streamed request per line; no I/O."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import ConfigDict, Field

from diagnostic.schema.base import Stored
from diagnostic.schema.bundle import TokenSource


class RequestRecord(Stored):
    """One line of requests.jsonl: one streamed request. Names are a contract: add, never rename."""

    arm: str = Field(description="Arm name")
    restart: int = Field(ge=0, description="Restart index")
    seq: int = Field(ge=0, description="Order of the request within (arm, restart, workload)")
    workload: str = Field(description="Prompt set, e.g. code or prose")
    prompt_id: str = Field(description="Stable id of the prompt within its workload")
    warmup: bool = Field(description="Discarded warm-up request")
    t_send: float = Field(description="Send time, seconds since the run began (monotonic)")
    ttft_s: float | None = Field(None, ge=0, description="Time to first content chunk")
    e2e_s: float | None = Field(None, ge=0, description="Send to end of stream")
    chunk_times_s: list[Annotated[float, Field(ge=0)]] = Field(
        default_factory=list, description="Arrival of every chunk that carried output"
    )
    chunk_tokens: list[Annotated[int, Field(ge=0)]] | None = Field(
        None, description="Tokens in each chunk where the server reports them"
    )
    completion_tokens: int | None = Field(
        None, ge=0, description="Output tokens from the API's usage"
    )
    prompt_tokens: int | None = Field(None, ge=0, description="Prompt tokens from the API's usage")
    token_source: TokenSource = Field("usage", description="Where completion_tokens came from")
    finish_reason: str | None = Field(None, description="finish_reason of the last choice")
    text: str = Field("", description="Generated text")
    error: str | None = Field(None, description="Why the request failed; null when ok")
    max_tokens: int | None = Field(None, description="max_tokens requested")
    concurrency: int = Field(1, ge=1, description="Requests in flight at this level")
    server_timings: dict[str, Any] | None = Field(
        None, description="Timings the server itself reported (e.g. llama.cpp `timings`)"
    )
    attempt: int = Field(
        1, ge=1, description="Try of this (workload, seq): a failed request retried by --resume"
    )


def decode_tps(record: RequestRecord) -> float | None:
    """Decode tokens/s of one request, the documented definition: (completion_tokens − tokens of
    the first chunk) / (last − first chunk time). The first chunk's tokens come from
    chunk_tokens when the server reported them, else count as 1. None when there is no
    interval (fewer than 2 chunks, no token count, nothing after the first chunk)."""
    times = record.chunk_times_s
    if record.completion_tokens is None or len(times) < 2 or times[-1] <= times[0]:
        return None
    first = record.chunk_tokens[0] if record.chunk_tokens else 1
    if record.completion_tokens <= first:
        return None
    return (record.completion_tokens - first) / (times[-1] - times[0])


def latest_attempts(records: list[RequestRecord]) -> list[RequestRecord]:
    """The last attempt of each request (workload, seq): a failure retried by --resume counts
    once, by how its retry went."""
    last: dict[tuple[str, int], RequestRecord] = {}
    for r in records:
        key = (r.workload, r.seq)
        if key not in last or r.attempt > last[key].attempt:
            last[key] = r
    return list(last.values())


class LenientRequestRecord(RequestRecord):
    """A RequestRecord that keeps unknown fields (written by a newer minor version)."""

    model_config = ConfigDict(extra="allow")
