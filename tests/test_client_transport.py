"""client: the default aiohttp transport and httpcore give the same records over real sockets."""

from __future__ import annotations

import asyncio
import gc
import warnings
from typing import Any

import httpx
import pytest
import sse_server as srv
from httpx_aiohttp import AiohttpTransport

from diagnostic.measure.client import ClientOptions, Job, RequestLabel, StreamClient
from diagnostic.measure.client import run_pool as pool
from diagnostic.schema.requests import RequestRecord

TRANSPORTS = ["aiohttp", "httpcore"]


def job(seq: int = 0) -> Job:
    label = RequestLabel(
        arm="a", restart=0, seq=seq, workload="w", prompt_id=f"p{seq}", warmup=False
    )
    return Job(label=label, prompt=f"prompt {seq}")


def options(url: str, **kw: Any) -> ClientOptions:
    return ClientOptions(base_url=url, max_tokens=4, **kw)


def transport(name: str) -> httpx.AsyncBaseTransport | None:
    """None is the client's default (aiohttp); httpcore is the transport it replaced."""
    return None if name == "aiohttp" else httpx.AsyncHTTPTransport()


def request(url: str, name: str, **kw: Any) -> RequestRecord:
    async def main() -> RequestRecord:
        async with StreamClient(options(url, **kw), transport=transport(name)) as client:
            return await client.request(job(), t0=0.0)

    return asyncio.run(main())


def served(reply: srv.Reply, name: str, **kw: Any) -> tuple[RequestRecord, str]:
    """The record of one request to a server answering `reply`; the URL it asked."""
    with srv.serving(reply) as server:
        return request(server.url, name, **kw), server.url + "/v1/completions"


def test_the_default_transport_is_aiohttp() -> None:
    async def main() -> httpx.AsyncBaseTransport:
        async with StreamClient(options("http://127.0.0.1:9")) as client:
            return client._http._transport

    assert isinstance(asyncio.run(main()), AiohttpTransport)


@pytest.mark.parametrize("name", TRANSPORTS)
def test_normal_stream(name: str) -> None:
    record, _ = served(srv.normal(4), name)
    assert record.error is None, record.error
    assert record.text == "t0t1t2t3" and len(record.chunk_times_s) == 4
    assert record.chunk_tokens == [1, 1, 1, 1] and record.completion_tokens == 4
    assert record.token_source == "usage" and record.prompt_tokens == 3
    assert record.chunk_times_s == sorted(record.chunk_times_s)
    assert record.e2e_s is not None and record.e2e_s >= record.chunk_times_s[-1]


def test_pool_over_the_default_transport_reuses_connections() -> None:
    records: list[RequestRecord] = []

    async def main() -> None:
        async with StreamClient(options(server.url), concurrency=2) as client:
            jobs = [job(i) for i in range(6)]
            await pool(client, jobs, concurrency=2, t0=0.0, on_record=records.append)

    with srv.serving(srv.normal(3)) as server:
        asyncio.run(main())
    assert sorted(r.seq for r in records) == list(range(6))
    assert all(r.error is None and r.completion_tokens == 3 for r in records)
    assert sorted(b["prompt"] for b in server.requests) == [f"prompt {i}" for i in range(6)]
    assert len(server._conns) <= 3  # keep-alive: at most concurrency + 1 connections


@pytest.mark.parametrize("name", TRANSPORTS)
def test_server_closing_after_every_stream_fails_no_request(name: str) -> None:
    # llama-server closes each connection after a stream; aiohttp may reuse it before it
    # sees the close, and the request then fails before any answer.
    records: list[RequestRecord] = []

    async def main() -> None:
        client = StreamClient(options(server.url), concurrency=2, transport=transport(name))
        async with client:
            jobs = [job(i) for i in range(12)]
            await pool(client, jobs, concurrency=2, t0=0.0, on_record=records.append)

    with srv.serving(srv.normal(2, keep_alive=False)) as server:
        asyncio.run(main())
    assert [r.error for r in records] == [None] * 12
    assert all(r.completion_tokens == 2 and len(r.chunk_times_s) == 2 for r in records)


@pytest.mark.parametrize("name", TRANSPORTS)
def test_one_stream_survives_a_server_closing_after_every_stream(name: str) -> None:
    async def main(url: str) -> list[RequestRecord]:
        async with StreamClient(options(url), transport=transport(name)) as client:
            return [await client.request(job(i), t0=0.0) for i in range(30)]

    with srv.serving(srv.normal(2, keep_alive=False)) as server:
        records = asyncio.run(main(server.url))
    assert [r.error for r in records] == [None] * 30
    assert all(r.completion_tokens == 2 for r in records)


@pytest.mark.parametrize("name", TRANSPORTS)
def test_reset_mid_stream_keeps_what_arrived(name: str) -> None:
    record, url = served(srv.reset_after(2), name)
    assert record.error and record.error.startswith(f"connection broken by {url} mid-stream")
    assert record.text == "t0t1" and len(record.chunk_times_s) == 2


@pytest.mark.parametrize("name", TRANSPORTS)
def test_read_timeout(name: str) -> None:
    record, url = served(srv.silent_after(1), name, read_timeout_s=0.2)
    assert record.error == f"timeout (ReadTimeout) from {url}"  # the silence never ends
    assert record.text == "t0"


@pytest.mark.parametrize("name", TRANSPORTS)
def test_refused_connection(name: str) -> None:
    with srv.refusing() as base:
        record = request(base, name)
    assert record.error and record.error.startswith(f"cannot connect to {base}/v1/completions")
    assert record.chunk_times_s == [] and record.completion_tokens is None


@pytest.mark.parametrize("name", TRANSPORTS)
def test_connect_timeout(name: str) -> None:
    with srv.unanswered() as base:
        record = request(base, name, connect_timeout_s=0.2)
    assert record.error == f"timeout (ConnectTimeout) from {base}/v1/completions"


HANG_UPS = {
    "hang-up": b"",
    "not-http": b"NOT HTTP AT ALL\r\n\r\n",
    "bad-chunk": srv.HEAD % b"" + b"zz\r\n",
}


@pytest.mark.parametrize("reply", [srv.raw(b) for b in HANG_UPS.values()], ids=list(HANG_UPS))
@pytest.mark.parametrize("name", TRANSPORTS)
def test_hang_up_or_not_http_is_a_broken_connection(name: str, reply: srv.Reply) -> None:
    record, url = served(reply, name)
    assert record.error and record.error.startswith(f"connection broken by {url} mid-stream")


@pytest.mark.parametrize("name", TRANSPORTS)
def test_http_error_carries_status_and_body(name: str) -> None:
    record, _ = served(srv.error(503, b'{"error": "overloaded"}'), name)
    assert record.error == 'HTTP 503: {"error": "overloaded"}'


@pytest.mark.parametrize("name", TRANSPORTS)
def test_malformed_sse(name: str) -> None:
    body = srv.HEAD % b"" + srv.chunk(srv.text("a", 1)) + srv.chunk(b"data: {nope\n\n") + srv.END
    record, _ = served(srv.raw(body), name)
    assert record.error and record.error.startswith("malformed SSE event 2")


@pytest.mark.parametrize("name", TRANSPORTS)
def test_endless_stream_stops_at_the_output_cap(name: str) -> None:
    record, _ = served(srv.endless, name, max_output_bytes=64 * 1024)
    assert record.error == "stream exceeded the output cap of 65536 bytes"
    assert 0 < len(record.text) < 64 * 1024


@pytest.mark.parametrize("name", TRANSPORTS)
def test_gzip_content_encoding_is_decoded(name: str) -> None:
    record, _ = served(srv.gzipped(3), name)
    assert record.error is None and record.text == "t0t1t2" and record.completion_tokens == 3


def test_default_transport_closes_its_session() -> None:
    # aiohttp warns "Unclosed client session/connector" from __del__ when left open.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        served(srv.normal(2), "aiohttp")
        served(srv.endless, "aiohttp", max_output_bytes=4096)  # closed mid-stream
        gc.collect()
    assert [str(w.message) for w in caught] == []
