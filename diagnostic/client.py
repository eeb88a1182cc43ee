"""One streamed completion request over httpx → a RequestRecord; a pool for concurrency N."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

import httpx
from pydantic import BaseModel, ConfigDict, Field

from diagnostic.models import RequestRecord, TokenSource

__all__ = [
    "AsyncStreamClient",
    "ClientOptions",
    "Job",
    "RequestLabel",
    "StreamClient",
    "auth_headers",
    "build_payload",
    "run_pool",
]

Api = Literal["completions", "chat"]
_PATHS: dict[str, str] = {"completions": "/v1/completions", "chat": "/v1/chat/completions"}
_ERROR_BODY_CHARS = 300


class ClientOptions(BaseModel):
    """How every request of a run is made (the same for every arm)."""

    model_config = ConfigDict(extra="forbid")

    base_url: str = Field(description="Server base URL, e.g. http://127.0.0.1:8000")
    api: Api = Field("completions", description="OpenAI API: completions or chat")
    model: str | None = Field(None, description="Model name sent; None leaves it out")
    max_tokens: int = Field(256, ge=1, description="Output length asked of every request")
    seed: int = Field(0, description="Sampler seed (greedy anyway)")
    force_length: bool = Field(
        True, description="Send ignore_eos and min_tokens so every answer has max_tokens tokens"
    )
    extra_body: dict[str, Any] = Field(
        default_factory=dict, description="Extra request fields merged into every payload"
    )
    api_key: str | None = Field(None, exclude=True, repr=False, description="Bearer token")
    connect_timeout_s: float = Field(10.0, gt=0, description="Connect timeout")
    read_timeout_s: float = Field(120.0, gt=0, description="Longest silence between bytes")
    total_timeout_s: float = Field(600.0, gt=0, description="Longest time for one request")
    max_output_bytes: int = Field(
        32 * 1024 * 1024, ge=1024, description="Stream bytes kept per request before giving up"
    )

    def timeout(self) -> httpx.Timeout:
        """httpx timeouts: read is the gap between bytes; the total is checked per chunk."""
        return httpx.Timeout(
            connect=self.connect_timeout_s,
            read=self.read_timeout_s,
            write=self.read_timeout_s,
            pool=self.total_timeout_s,
        )


@dataclass(frozen=True)
class RequestLabel:
    """Where a request belongs: copied into its record."""

    arm: str
    restart: int
    seq: int
    workload: str
    prompt_id: str
    warmup: bool
    concurrency: int = 1


@dataclass(frozen=True)
class Job:
    """One request to make: its label and its prompt (text, or chat messages)."""

    label: RequestLabel
    prompt: str | None = None
    messages: list[dict[str, Any]] | None = None


def auth_headers(api_key: str | None) -> dict[str, str]:
    """The Authorization header for an API key (nothing when there is none)."""
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}


def build_payload(options: ClientOptions, job: Job) -> dict[str, Any]:
    """The JSON body of one greedy, streamed, fixed-length request."""
    body: dict[str, Any] = {
        "max_tokens": options.max_tokens,
        "temperature": 0,
        "seed": options.seed,
        "stream": True,
        # vLLM sends usage in every chunk with continuous_usage_stats: tokens per chunk.
        "stream_options": {"include_usage": True, "continuous_usage_stats": True},
    }
    if options.model is not None:
        body["model"] = options.model
    if options.force_length:
        body["ignore_eos"] = True
        body["min_tokens"] = options.max_tokens
    if options.api == "chat":
        body["messages"] = job.messages or [{"role": "user", "content": job.prompt or ""}]
    else:
        body["prompt"] = job.prompt if job.prompt is not None else _flatten(job.messages)
    body.update(options.extra_body)
    return body


def _flatten(messages: list[dict[str, Any]] | None) -> str:
    return "\n\n".join(str(m.get("content", "")) for m in messages or [])


class _StreamFault(Exception):
    """A stream that cannot be measured (cap exceeded, deadline, malformed SSE, error event)."""


@dataclass
class _Stream:
    """Incremental SSE parser: cheap per-chunk path, no pydantic until the end."""

    api: Api
    t_send: float
    deadline: float
    max_bytes: int
    chunk_times: list[float] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    cumulative: list[int | None] = field(default_factory=list)
    usage: dict[str, Any] | None = None
    timings: dict[str, Any] | None = None
    finish_reason: str | None = None
    done: bool = False
    n_bytes: int = 0
    n_events: int = 0
    _buffer: bytes = b""
    _last_cum: int | None = None

    def feed(self, data: bytes, now: float) -> None:
        """Take bytes that arrived at `now` (perf_counter) and parse every complete line."""
        self.n_bytes += len(data)
        if self.n_bytes > self.max_bytes:
            raise _StreamFault(f"stream exceeded the output cap of {self.max_bytes} bytes")
        if now > self.deadline:
            raise _StreamFault("stream exceeded the total timeout")
        lines = (self._buffer + data).split(b"\n")
        self._buffer = lines.pop()
        for line in lines:
            self._line(line.rstrip(b"\r"), now)

    def close(self, now: float) -> None:
        """End of the byte stream: parse a last line without a newline."""
        if self._buffer.strip():
            self._line(self._buffer.rstrip(b"\r"), now)
        self._buffer = b""

    def _line(self, line: bytes, now: float) -> None:
        if not line.startswith(b"data:"):
            return  # blank separators, comments, event:/id:/retry: fields
        payload = line[5:].strip()
        if payload == b"[DONE]":
            self.done = True
            return
        self.n_events += 1
        try:
            event = json.loads(payload)
        except ValueError:
            raise _StreamFault(
                f"malformed SSE event {self.n_events}: {payload[:80]!r} is not JSON"
            ) from None
        if not isinstance(event, dict):
            raise _StreamFault(f"malformed SSE event {self.n_events}: not a JSON object")
        self._event(event, now)

    def _event(self, event: dict[str, Any], now: float) -> None:
        if "error" in event:
            raise _StreamFault(f"server error in stream: {_short(event['error'])}")
        usage = event.get("usage")
        if isinstance(usage, dict):
            self.usage = usage
        timings = event.get("timings")
        if isinstance(timings, dict):
            self.timings = timings
        choices = event.get("choices") or []
        if not choices:
            return
        choice = choices[0]
        if choice.get("finish_reason"):
            self.finish_reason = choice["finish_reason"]
        text = _choice_text(choice, self.api)
        if text:
            self.chunk_times.append(now - self.t_send)
            self.texts.append(text)
            self.cumulative.append(_completion_tokens(usage))

    def chunk_tokens(self) -> list[int] | None:
        """Tokens per content chunk, when every chunk carried cumulative usage (vLLM)."""
        if not self.cumulative or any(c is None for c in self.cumulative):
            return None
        counts, previous = [], 0
        for cum in self.cumulative:
            assert cum is not None
            counts.append(cum - previous)
            previous = cum
        return counts if all(c >= 0 for c in counts) else None


def _choice_text(choice: dict[str, Any], api: Api) -> str:
    if api == "completions":
        return choice.get("text") or ""
    delta = choice.get("delta") or {}
    # Reasoning models stream thinking in a separate field; it is output all the same.
    return (delta.get("content") or "") + (
        delta.get("reasoning_content") or delta.get("reasoning") or ""
    )


def _completion_tokens(usage: Any) -> int | None:
    if isinstance(usage, dict) and isinstance(usage.get("completion_tokens"), int):
        return int(usage["completion_tokens"])
    return None


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value)
    return text[:_ERROR_BODY_CHARS]


def _http_error(status: int, body: bytes) -> str:
    return f"HTTP {status}: {body[:_ERROR_BODY_CHARS].decode('utf-8', 'replace').strip()}"


def _transport_error(exc: httpx.HTTPError, url: str) -> str:
    if isinstance(exc, httpx.ConnectError):
        return f"cannot connect to {url}: {exc}"
    if isinstance(exc, httpx.TimeoutException):
        return f"timeout ({type(exc).__name__}) from {url}"
    if isinstance(exc, httpx.RemoteProtocolError | httpx.ReadError):
        return f"connection broken by {url} mid-stream: {exc or type(exc).__name__}"
    return f"{type(exc).__name__} from {url}: {exc}"


def _make_record(
    job: Job, options: ClientOptions, t_send: float, stream: _Stream | None, error: str | None
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
            "completion_tokens": _completion_tokens(usage),
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
        error=error,
        **fields,
    )


def _tokenize_body(options: ClientOptions, text: str) -> dict[str, Any]:
    # llama.cpp reads `content`, vLLM reads `prompt`; each ignores the other's key.
    body: dict[str, Any] = {"content": text, "prompt": text, "add_special_tokens": False}
    if options.model is not None:
        body["model"] = options.model
    return body


def _tokenize_count(response: httpx.Response) -> int | None:
    if response.status_code != 200:
        return None
    try:
        data = response.json()
    except ValueError:
        return None
    if isinstance(data, dict):
        if isinstance(data.get("count"), int):
            return int(data["count"])
        if isinstance(data.get("tokens"), list):
            return len(data["tokens"])
    return None


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


class StreamClient:
    """Synchronous client: one request at a time on one keep-alive connection."""

    def __init__(
        self, options: ClientOptions, *, transport: httpx.BaseTransport | None = None
    ) -> None:
        self.options = options
        self._tokenize = _TokenizeState()
        self._http = httpx.Client(
            base_url=options.base_url,
            timeout=options.timeout(),
            headers=auth_headers(options.api_key),
            transport=transport,
        )

    def __enter__(self) -> StreamClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()

    def request(self, job: Job, *, t0: float) -> RequestRecord:
        """Make one streamed request; never raises for server or network faults."""
        opts, url = self.options, _PATHS[self.options.api]
        t_send = time.perf_counter()
        stream: _Stream | None = None
        error: str | None = None
        try:
            with self._http.stream("POST", url, json=build_payload(opts, job)) as response:
                if response.status_code >= 400:
                    error = _http_error(response.status_code, response.read())
                else:
                    stream = _new_stream(opts, t_send)
                    for data in response.iter_bytes():
                        stream.feed(data, time.perf_counter())
                    stream.close(time.perf_counter())
        except _StreamFault as exc:
            error = str(exc)
        except httpx.HTTPError as exc:
            error = _transport_error(exc, opts.base_url + url)
        record = _make_record(job, opts, t_send - t0, stream, error)
        if _needs_count(record):
            self._count_tokens(record)
        return record

    def count_tokens(self, text: str) -> int | None:
        """Tokens in `text` by the server's /tokenize endpoint; None when it has none."""
        try:
            response = self._http.post("/tokenize", json=_tokenize_body(self.options, text))
        except httpx.HTTPError:
            return None
        return _tokenize_count(response)

    def _count_tokens(self, record: RequestRecord) -> None:
        asked = self._tokenize.supported is not False
        _apply_count(record, self.count_tokens(record.text) if asked else None, self._tokenize)


def _new_stream(options: ClientOptions, t_send: float) -> _Stream:
    return _Stream(
        api=options.api,
        t_send=t_send,
        deadline=t_send + options.total_timeout_s,
        max_bytes=options.max_output_bytes,
    )


class AsyncStreamClient:
    """Asynchronous client: several streams in flight on one httpx.AsyncClient."""

    def __init__(
        self,
        options: ClientOptions,
        *,
        concurrency: int = 1,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.options = options
        self._tokenize = _TokenizeState()
        limits = httpx.Limits(
            max_connections=concurrency + 1, max_keepalive_connections=concurrency
        )
        self._http = httpx.AsyncClient(
            base_url=options.base_url,
            timeout=options.timeout(),
            headers=auth_headers(options.api_key),
            transport=transport,
            limits=limits,
        )

    async def __aenter__(self) -> AsyncStreamClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._http.aclose()

    async def request(self, job: Job, *, t0: float) -> RequestRecord:
        """Make one streamed request; never raises for server or network faults."""
        opts, url = self.options, _PATHS[self.options.api]
        t_send = time.perf_counter()
        stream: _Stream | None = None
        error: str | None = None
        try:
            async with self._http.stream("POST", url, json=build_payload(opts, job)) as response:
                if response.status_code >= 400:
                    error = _http_error(response.status_code, await response.aread())
                else:
                    stream = _new_stream(opts, t_send)
                    async for data in response.aiter_bytes():
                        stream.feed(data, time.perf_counter())
                    stream.close(time.perf_counter())
        except _StreamFault as exc:
            error = str(exc)
        except httpx.HTTPError as exc:
            error = _transport_error(exc, opts.base_url + url)
        record = _make_record(job, opts, t_send - t0, stream, error)
        if _needs_count(record):
            await self._count_tokens(record)
        return record

    async def count_tokens(self, text: str) -> int | None:
        """Tokens in `text` by the server's /tokenize endpoint; None when it has none."""
        try:
            body = _tokenize_body(self.options, text)
            response = await self._http.post("/tokenize", json=body)
        except httpx.HTTPError:
            return None
        return _tokenize_count(response)

    async def _count_tokens(self, record: RequestRecord) -> None:
        asked = self._tokenize.supported is not False
        count = await self.count_tokens(record.text) if asked else None
        _apply_count(record, count, self._tokenize)


async def run_pool(
    client: AsyncStreamClient,
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
