"""client: streamed requests against the real llama-server; faults through MockTransport."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import httpx
import pytest

from diagnostic.measure.client import (
    ClientOptions,
    Job,
    RequestLabel,
    StreamClient,
    build_payload,
    run_pool,
)
from diagnostic.schema.requests import RequestRecord

MAX_TOKENS = 16
PROMPT = "def fibonacci(n):\n    "


def job(seq: int = 0, prompt: str = PROMPT, **kw: Any) -> Job:
    label = RequestLabel(
        arm="a", restart=0, seq=seq, workload="code", prompt_id=f"p{seq}", warmup=False
    )
    return Job(label=label, prompt=prompt, **kw)


def options(base_url: str = "http://test", **kw: Any) -> ClientOptions:
    return ClientOptions(base_url=base_url, max_tokens=MAX_TOKENS, **kw)


def requests(
    opts: ClientOptions, jobs: list[Job], transport: httpx.AsyncBaseTransport | None = None
) -> list[RequestRecord]:
    """The records of `jobs` made one after another on one client (collect at concurrency 1)."""

    async def main() -> list[RequestRecord]:
        async with StreamClient(opts, transport=transport) as client:
            return [await client.request(j, t0=time.perf_counter()) for j in jobs]

    return asyncio.run(main())


# -- the real server -------------------------------------------------------------------------
@pytest.mark.engine
def test_completions_stream_against_the_real_server(llama_server: str) -> None:
    (record,) = requests(options(llama_server), [job()])
    assert record.error is None, record.error
    assert record.token_source == "usage"
    assert record.completion_tokens == MAX_TOKENS  # ignore_eos forces the full length
    assert record.finish_reason == "length"
    assert record.prompt_tokens and record.prompt_tokens > 0
    times = record.chunk_times_s
    assert 2 <= len(times) <= MAX_TOKENS
    assert times == sorted(times) and record.ttft_s == times[0] > 0
    assert record.e2e_s is not None and record.e2e_s >= times[-1]
    assert record.chunk_tokens is None  # llama.cpp reports usage only at the end
    assert record.text
    timings = record.server_timings or {}
    assert timings.get("predicted_n") == MAX_TOKENS and timings.get("predicted_per_second")


@pytest.mark.engine
def test_chat_stream_against_the_real_server(llama_server: str) -> None:
    messages = [{"role": "user", "content": "Name three rivers."}]
    (record,) = requests(options(llama_server, api="chat"), [job(prompt="", messages=messages)])
    assert record.error is None, record.error
    assert record.completion_tokens == MAX_TOKENS and record.token_source == "usage"
    assert 1 <= len(record.chunk_times_s) <= MAX_TOKENS


@pytest.mark.engine
def test_greedy_output_repeats_on_the_real_server(llama_server: str) -> None:
    first, second = requests(options(llama_server), [job(0), job(1)])
    assert first.error is None and second.error is None, (first.error, second.error)
    assert first.text == second.text


@pytest.mark.engine
def test_pool_keeps_several_streams_against_the_real_server(llama_server: str) -> None:
    records: list[RequestRecord] = []

    async def main() -> None:
        async with StreamClient(options(llama_server), concurrency=2) as client:
            jobs = [job(i) for i in range(3)]
            await run_pool(
                client, jobs, concurrency=2, t0=time.perf_counter(), on_record=records.append
            )

    asyncio.run(main())
    assert sorted(r.seq for r in records) == [0, 1, 2]
    assert all(r.error is None and r.completion_tokens == MAX_TOKENS for r in records)


@pytest.mark.engine
def test_tokenizer_count_on_the_real_server(llama_server: str) -> None:
    async def main() -> int | None:
        async with StreamClient(options(llama_server)) as client:
            record = await client.request(job(), t0=0.0)
            return await client.count_tokens(record.text)

    counted = asyncio.run(main())
    # Re-tokenising detokenised text may merge or split a token at the edges.
    assert counted is not None and abs(counted - MAX_TOKENS) <= 2


# -- payload ---------------------------------------------------------------------------------
def test_payload_is_greedy_streamed_and_fixed_length() -> None:
    body = build_payload(options(seed=7, extra_body={"top_k": 1}), job())
    assert body["temperature"] == 0 and body["seed"] == 7 and body["stream"] is True
    assert body["max_tokens"] == body["min_tokens"] == MAX_TOKENS and body["ignore_eos"] is True
    assert body["stream_options"] == {"include_usage": True, "continuous_usage_stats": True}
    assert body["prompt"] == PROMPT and "model" not in body and body["top_k"] == 1
    chat = build_payload(options(api="chat", model="m", force_length=False), job())
    assert chat["messages"] == [{"role": "user", "content": PROMPT}] and chat["model"] == "m"
    assert "ignore_eos" not in chat and "min_tokens" not in chat


# -- faults a real server cannot be made to produce -------------------------------------------
def sse(*events: dict[str, Any] | str) -> list[bytes]:
    """SSE lines, one network read per event."""
    return [f"data: {e if isinstance(e, str) else json.dumps(e)}\n\n".encode() for e in events]


def text_event(text: str, usage: dict[str, int] | None = None) -> dict[str, Any]:
    event: dict[str, Any] = {"choices": [{"index": 0, "text": text, "finish_reason": None}]}
    if usage is not None:
        event["usage"] = usage
    return event


def final_event(tokens: int | None) -> dict[str, Any]:
    event: dict[str, Any] = {"choices": [{"index": 0, "text": "", "finish_reason": "length"}]}
    if tokens is not None:
        event["usage"] = {"prompt_tokens": 5, "completion_tokens": tokens, "total_tokens": 5}
    return event


def mock(
    stream: Callable[[], Iterator[bytes]] | None = None,
    *,
    status: int = 200,
    body: bytes = b"",
    tokenize: Callable[[httpx.Request], httpx.Response] | None = None,
    calls: list[str] | None = None,
) -> httpx.MockTransport:
    def handler(request: httpx.Request) -> httpx.Response:
        if calls is not None:
            calls.append(request.url.path)
        if request.url.path == "/tokenize":
            return tokenize(request) if tokenize else httpx.Response(404)
        if status != 200:
            return httpx.Response(status, content=body)
        assert stream is not None
        return httpx.Response(200, content=_async(stream()))

    return httpx.MockTransport(handler)


async def _async(chunks: Iterator[bytes]) -> AsyncIterator[bytes]:
    """A network read per chunk; what the iterator raises, the stream raises."""
    for chunk in chunks:
        yield chunk
        await asyncio.sleep(0)


def run_one(transport: httpx.MockTransport, **kw: Any) -> RequestRecord:
    return requests(options(**kw), [job()], transport)[0]


def test_vllm_continuous_usage_gives_tokens_per_chunk() -> None:
    # vLLM with continuous_usage_stats: cumulative usage in every chunk, then a usage chunk.
    events: list[dict[str, Any] | str] = [
        text_event(" a", {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6}),
        text_event(" b c d", {"prompt_tokens": 5, "completion_tokens": 4, "total_tokens": 9}),
        text_event(" e f", {"prompt_tokens": 5, "completion_tokens": 6, "total_tokens": 11}),
        {"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 6, "total_tokens": 11}},
        "[DONE]",
    ]
    record = run_one(mock(lambda: iter(sse(*events))))
    assert record.error is None
    assert record.chunk_tokens == [1, 3, 2] and record.completion_tokens == 6
    assert record.text == " a b c d e f" and len(record.chunk_times_s) == 3


def test_event_split_across_network_reads() -> None:
    raw = b"".join(sse(text_event("x"), text_event("y"), final_event(2), "[DONE]"))
    pieces = [raw[i : i + 7] for i in range(0, len(raw), 7)]
    record = run_one(mock(lambda: iter(pieces)))
    assert record.error is None and record.text == "xy" and len(record.chunk_times_s) == 2


def test_connection_refused_is_a_record_not_an_exception() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("[Errno 111] Connection refused", request=request)

    record = run_one(httpx.MockTransport(refuse))
    assert record.error and "cannot connect" in record.error
    assert record.chunk_times_s == [] and record.completion_tokens is None


def test_reset_mid_stream_keeps_what_arrived() -> None:
    def stream() -> Iterator[bytes]:
        yield from sse(text_event("a"), text_event("b"))
        raise httpx.ReadError("[Errno 104] Connection reset by peer")

    record = run_one(mock(stream))
    assert record.error and "broken" in record.error
    assert len(record.chunk_times_s) == 2 and record.text == "ab"


def test_read_timeout_is_an_error() -> None:
    def stream() -> Iterator[bytes]:
        yield from sse(text_event("a"))
        raise httpx.ReadTimeout("timed out")

    record = run_one(mock(stream))
    assert record.error and "timeout" in record.error


@pytest.mark.parametrize("status", [400, 429, 500, 503])
def test_http_errors_carry_status_and_body(status: int) -> None:
    record = run_one(mock(status=status, body=b'{"error": "slow down"}'))
    assert (
        record.error and record.error.startswith(f"HTTP {status}") and "slow down" in record.error
    )


def test_malformed_sse_is_an_error() -> None:
    record = run_one(mock(lambda: iter([*sse(text_event("a")), b"data: {not json\n\n"])))
    assert record.error and "malformed SSE" in record.error


def test_error_event_in_stream_is_an_error() -> None:
    events = sse(text_event("a"), {"error": {"message": "out of memory", "code": 500}})
    record = run_one(mock(lambda: iter(events)))
    assert record.error and "out of memory" in record.error


def test_stream_without_done_is_an_error() -> None:
    record = run_one(mock(lambda: iter(sse(text_event("a"), final_event(1)))))
    assert record.error == "stream ended without [DONE]" and record.completion_tokens == 1


def test_stream_without_output_is_an_error() -> None:
    record = run_one(mock(lambda: iter(sse(final_event(0), "[DONE]"))))
    assert record.error == "stream carried no output"


def test_no_usage_counts_with_the_tokenize_endpoint() -> None:
    calls: list[str] = []

    def tokenize(request: httpx.Request) -> httpx.Response:
        assert json.loads(request.content)["content"] == "ab"
        return httpx.Response(200, json={"tokens": [7, 8, 9]})

    transport = mock(
        lambda: iter(sse(text_event("a"), text_event("b"), final_event(None), "[DONE]")),
        tokenize=tokenize,
        calls=calls,
    )
    record = run_one(transport)
    assert record.error is None
    assert record.token_source == "tokenizer" and record.completion_tokens == 3
    assert calls.count("/tokenize") == 1


def test_no_usage_and_no_tokenizer_counts_chunks_and_asks_once() -> None:
    calls: list[str] = []
    transport = mock(
        lambda: iter(sse(text_event("a"), text_event("b"), final_event(None), "[DONE]")),
        calls=calls,
    )
    records = requests(options(), [job(i) for i in range(3)], transport)
    assert all(r.token_source == "chunks" and r.completion_tokens == 2 for r in records)
    assert calls.count("/tokenize") == 1  # a 404 is remembered


def test_endless_stream_stops_at_the_output_cap() -> None:
    def endless() -> Iterator[bytes]:
        event = sse(text_event("token "))[0]
        while True:
            yield event

    record = run_one(mock(endless), max_output_bytes=64 * 1024)
    assert record.error and "output cap" in record.error
    assert len(record.text) < 64 * 1024


def test_slow_endless_stream_stops_at_the_total_timeout() -> None:
    def trickle() -> Iterator[bytes]:
        while True:
            time.sleep(0.02)
            yield sse(text_event("t"))[0]

    record = run_one(mock(trickle), total_timeout_s=0.3)
    assert record.error and "total timeout" in record.error  # the stream never ends by itself


# -- the async pool --------------------------------------------------------------------------
def test_pool_limits_streams_in_flight_and_keeps_job_order() -> None:
    in_flight, peak, started = 0, 0, []

    async def stream(seq: int) -> AsyncIterator[bytes]:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        for chunk in sse(text_event("a"), text_event("b"), final_event(2)):
            await asyncio.sleep(0.01)
            yield chunk
        in_flight -= 1
        yield sse("[DONE]")[0]

    async def handler(request: httpx.Request) -> httpx.Response:
        seq = json.loads(request.content)["prompt"]
        started.append(int(seq))
        return httpx.Response(200, content=stream(int(seq)))

    records: list[RequestRecord] = []

    async def main() -> None:
        transport = httpx.MockTransport(handler)
        async with StreamClient(options(), concurrency=3, transport=transport) as client:
            jobs = [job(i, prompt=str(i)) for i in range(8)]
            await run_pool(client, jobs, concurrency=3, t0=0.0, on_record=records.append)

    asyncio.run(main())
    assert started == list(range(8)) and peak == 3
    assert sorted(r.seq for r in records) == list(range(8))
    assert all(r.error is None and r.completion_tokens == 2 for r in records)


def test_async_faults_are_records() -> None:
    async def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    async def main() -> RequestRecord:
        transport = httpx.MockTransport(handler)
        async with StreamClient(options(), transport=transport) as client:
            return await client.request(job(), t0=0.0)

    record = asyncio.run(main())
    assert record.error and "cannot connect" in record.error
