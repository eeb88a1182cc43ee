"""One streamed request → a RequestRecord: the client and its pool of streams in flight."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx

from diagnostic.common.answers import (
    ACCEPT_ENCODING,
    BodyDecoder,
    Unreadable,
    araw,
    aread_body,
    parse_json,
)
from diagnostic.measure.client.deadlines import DEADLINE, TokenWatch
from diagnostic.measure.client.faults import http_error, stale, transport_error
from diagnostic.measure.client.options import PATHS, ClientOptions, Job, auth_headers, build_payload
from diagnostic.measure.client.sse import (
    MAX_COUNT,
    SSEStream,
    StreamFault,
    completion_tokens,
    new_stream,
)
from diagnostic.schema.bundle import TokenSource
from diagnostic.schema.requests import RequestRecord


def _make_record(
    job: Job, options: ClientOptions, t_send: float, stream: SSEStream | None, error: str | None
) -> RequestRecord:
    """The record of a finished request; `t_send` is relative to the run's start."""
    label, end = job.label, time.perf_counter()
    fields: dict[str, Any] = {}
    if stream is not None:
        usage = stream.usage or {}
        fields = {
            "e2e_s": end - stream.t_send,
            "ttft_s": stream.chunk_times[0] if stream.chunk_times else None,
            "chunk_times_s": stream.chunk_times,
            "chunk_tokens": stream.chunk_tokens(),
            "completion_tokens": completion_tokens(usage),
            "prompt_tokens": usage.get("prompt_tokens"),
            "finish_reason": stream.finish_reason,
            "text": "".join(stream.texts),
            "server_timings": stream.timings,
        }
        if error is None and not stream.done:
            error = "stream ended without [DONE]"
        elif error is None and not stream.chunk_times:
            error = "stream carried no output"
    return RequestRecord(
        arm=label.arm,
        restart=label.restart,
        seq=label.seq,
        workload=label.workload,
        prompt_id=label.prompt_id,
        warmup=label.warmup,
        t_send=t_send,
        max_tokens=options.max_tokens,
        concurrency=label.concurrency,
        attempt=label.attempt,
        error=error[:_MAX_ERROR] if error else error,
        **fields,
    )


def _tokenize_body(options: ClientOptions, text: str) -> dict[str, Any]:
    # llama.cpp reads `content`, vLLM reads `prompt`; each ignores the other's key.
    body: dict[str, Any] = {"content": text, "prompt": text, "add_special_tokens": False}
    if options.model is not None:
        body["model"] = options.model
    return body


def _tokenize_count(body: bytes) -> int | None:
    """The count a /tokenize answer gives (llama.cpp: tokens, vLLM: count), if it is one."""
    try:
        data = parse_json(body)
    except Unreadable:
        return None
    if isinstance(data, dict):
        count = data.get("count")
        if isinstance(count, int) and not isinstance(count, bool) and 0 <= count <= MAX_COUNT:
            return count
        if isinstance(data.get("tokens"), list):
            return len(data["tokens"])
    return None


_MAX_ERROR = 1000  # characters of a record's error: the fault, not a server's whole answer
_TOKENIZE_BYTES = 16 * 2**20  # a /tokenize answer of max_tokens ids: a few hundred KB
_ERROR_BYTES = 4096  # of an error answer's body, enough for its message


async def _error_body(response: httpx.Response) -> bytes:
    """The start of an error answer's body: the message, not the 300 MB a server may send."""
    kept = b""
    try:
        decoder = BodyDecoder(response.headers.get("content-encoding"), 16 * _ERROR_BYTES)
        async for data in araw(response):
            kept += decoder.feed(data)[: _ERROR_BYTES - len(kept)]
            if len(kept) >= _ERROR_BYTES:
                break
    except Unreadable as exc:
        return kept or f"(a body diagnose cannot read: {exc})".encode()
    return kept


@dataclass
class _TokenizeState:
    """Whether the server has a tokenize endpoint (asked once per client)."""

    supported: bool | None = None


def _apply_count(record: RequestRecord, count: int | None, state: _TokenizeState) -> None:
    source: TokenSource
    if count is not None:
        state.supported, source = True, "tokenizer"
    else:
        state.supported = False if state.supported is None else state.supported
        count, source = len(record.chunk_times_s), "chunks"
    record.completion_tokens, record.token_source = count, source


def _needs_count(record: RequestRecord) -> bool:
    return record.error is None and record.completion_tokens is None


@dataclass
class _Attempt:
    """One try at a streamed request, and whether it met a stale connection."""

    t_send: float
    stream: SSEStream | None = None
    error: str | None = None
    answered: bool = False
    stale: bool = False

    def last_token(self) -> tuple[int, float | None]:
        """Tokens (content chunks) so far and the perf_counter time of the last one."""
        stream = self.stream
        if stream is None or not stream.chunk_times:
            return 0, None
        return len(stream.chunk_times), stream.t_send + stream.chunk_times[-1]


async def _body(response: httpx.Response, limit: int) -> AsyncIterator[bytes]:
    """The body as read, past httpx's decoder and chunker (0.2 µs a chunk); a Content-Encoding
    is undone here, within `limit` bytes (httpx's decoder would inflate a bomb whole)."""
    raw = araw(response)
    encoding = response.headers.get("content-encoding")
    if not encoding:
        async for data in raw:
            yield data
        return
    decoder = BodyDecoder(encoding, limit)
    async for data in raw:
        yield decoder.feed(data)


class StreamClient:
    """The client: one or several streams in flight on one httpx.AsyncClient. One stream
    runs here too: it times the first chunk closer than httpx's synchronous client, whose
    response set-up delays it (+0.5% decode tok/s at 5,000 tok/s; benchmarks/README.md)."""

    def __init__(
        self,
        options: ClientOptions,
        *,
        concurrency: int = 1,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        # httpcore's read path and pool cost 145-266 µs of CPU per chunk, enough to queue
        # chunks at 64 streams; aiohttp's costs 66-91 (benchmarks/README.md, section 1).
        # Imported here: aiohttp adds 0.2 s to every command's start otherwise.
        import aiohttp
        from httpx_aiohttp import HttpxAiohttpClient

        self.options = options
        self._tokenize = _TokenizeState()
        # httpx-aiohttp lets a malformed status line or chunk header through as aiohttp's own.
        self._faults: tuple[type[Exception], ...] = (httpx.HTTPError, aiohttp.ClientError)
        limits = httpx.Limits(
            max_connections=concurrency + 1, max_keepalive_connections=concurrency
        )
        self._attempts = concurrency + 2  # every pooled connection stale, then a new one
        # The aiohttp transport unless one is given (fault tests); proxies from the
        # environment get aiohttp transports too, as httpx.AsyncClient would give them its own.
        self._http: httpx.AsyncClient = HttpxAiohttpClient(
            base_url=options.base_url,
            timeout=options.timeout(),
            headers={**ACCEPT_ENCODING, **auth_headers(options.api_key)},
            transport=transport,
            limits=limits,
        )

    async def __aenter__(self) -> StreamClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._http.aclose()

    async def request(self, job: Job, *, t0: float) -> RequestRecord:
        """Make one streamed request; never raises for server or network faults."""
        payload = build_payload(self.options, job)
        for _ in range(self._attempts):
            # No answer on a kept-alive connection the server had closed (see faults.stale): send
            # again, timed afresh. Each failure drops one stale connection from the pool.
            attempt = await self._attempt(payload)
            if not attempt.stale:
                break
        t_send = attempt.t_send - t0
        record = _make_record(job, self.options, t_send, attempt.stream, attempt.error)
        if _needs_count(record):
            await self._count_tokens(record)
        return record

    async def _attempt(self, payload: dict[str, Any]) -> _Attempt:
        opts, url = self.options, PATHS[self.options.api]
        attempt = _Attempt(t_send=time.perf_counter())
        watch = TokenWatch(
            t_send=attempt.t_send,
            first_token_s=opts.first_token_timeout_s,
            token_s=opts.token_timeout_s,
            url=opts.base_url + url,
            tokens=attempt.last_token,
            expire=lambda _why: tokens.reschedule(asyncio.get_running_loop().time()),
        )
        try:
            # The total timeout bounds the whole request, the watch the first token and each
            # next one: a server that accepts and then says nothing, or a byte at a time, or
            # keeps the stream alive without a token, ends here and not never.
            async with asyncio.timeout(opts.total_timeout_s), asyncio.timeout(None) as tokens:
                watch.start()
                try:
                    await self._exchange(url, payload, attempt)
                finally:
                    watch.stop()
        except (StreamFault, Unreadable) as exc:
            attempt.error = str(exc)
        except TimeoutError:
            attempt.error = watch.missed or (
                f"{DEADLINE}no complete answer from {opts.base_url + url} within the "
                f"request's total timeout of {opts.total_timeout_s:g} s (the request deadline)"
            )
        except self._faults as exc:
            attempt.error = transport_error(exc, opts.base_url + url)
            attempt.stale = not attempt.answered and stale(exc)
        return attempt

    async def _exchange(self, url: str, payload: dict[str, Any], attempt: _Attempt) -> None:
        opts = self.options
        async with self._http.stream("POST", url, json=payload) as response:
            attempt.answered = True
            if response.status_code >= 400:
                attempt.error = http_error(response.status_code, await _error_body(response))
                return
            stream = attempt.stream = new_stream(opts, attempt.t_send)
            async for data in _body(response, opts.max_output_bytes):
                stream.feed(data, time.perf_counter())
            stream.close(time.perf_counter())

    async def count_tokens(self, text: str) -> int | None:
        """Tokens in `text` by the server's /tokenize endpoint; None when it has none (or its
        answer cannot be read, or does not come within the request timeout)."""
        body = _tokenize_body(self.options, text)
        for _ in range(self._attempts):
            try:
                async with asyncio.timeout(self.options.total_timeout_s):
                    return await self._ask_tokenize(body)
            except (Unreadable, TimeoutError):
                return None
            except self._faults as exc:
                if not stale(exc):
                    return None
        return None

    async def _ask_tokenize(self, body: dict[str, Any]) -> int | None:
        async with self._http.stream("POST", "/tokenize", json=body) as response:
            if response.status_code != 200:
                return None
            return _tokenize_count(await aread_body(response, limit=_TOKENIZE_BYTES))

    async def _count_tokens(self, record: RequestRecord) -> None:
        asked = self._tokenize.supported is not False
        count = await self.count_tokens(record.text) if asked else None
        _apply_count(record, count, self._tokenize)


async def run_pool(
    client: StreamClient,
    jobs: Iterable[Job],
    *,
    concurrency: int,
    t0: float,
    on_record: Callable[[RequestRecord], Awaitable[None] | None],
) -> None:
    """Keep `concurrency` requests in flight, taking jobs in their fixed order.

    `on_record` runs as each request ends (in completion order), so records are stored as soon
    as they exist; with concurrency 1 this is exactly the sequential order.
    """
    iterator: Iterator[Job] = iter(jobs)

    async def worker() -> None:
        # One shared iterator: each worker takes the next job when it is free (fixed order).
        for job in iterator:
            result = on_record(await client.request(job, t0=t0))
            if result is not None:
                await result

    await asyncio.gather(*(worker() for _ in range(max(1, concurrency))))
