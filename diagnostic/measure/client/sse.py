"""Incremental parsing of an OpenAI-compatible SSE stream, timestamped chunk by chunk."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from diagnostic.measure.client.options import Api, ClientOptions

ERROR_BODY_CHARS = 300


class StreamFault(Exception):
    """A stream that cannot be measured (cap exceeded, deadline, malformed SSE, error event)."""


@dataclass
class SSEStream:
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
            raise StreamFault(f"stream exceeded the output cap of {self.max_bytes} bytes")
        if now > self.deadline:
            raise StreamFault("stream exceeded the total timeout")
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
            raise StreamFault(
                f"malformed SSE event {self.n_events}: {payload[:80]!r} is not JSON"
            ) from None
        if not isinstance(event, dict):
            raise StreamFault(f"malformed SSE event {self.n_events}: not a JSON object")
        self._event(event, now)

    def _event(self, event: dict[str, Any], now: float) -> None:
        if "error" in event:
            raise StreamFault(f"server error in stream: {_short(event['error'])}")
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
            self.cumulative.append(completion_tokens(usage))

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


def completion_tokens(usage: Any) -> int | None:
    """usage.completion_tokens when the server sent it."""
    if isinstance(usage, dict) and isinstance(usage.get("completion_tokens"), int):
        return int(usage["completion_tokens"])
    return None


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value)
    return text[:ERROR_BODY_CHARS]


def new_stream(options: ClientOptions, t_send: float) -> SSEStream:
    """A parser for a stream sent at `t_send` (perf_counter), with the run's cap and deadline."""
    return SSEStream(
        api=options.api,
        t_send=t_send,
        deadline=t_send + options.total_timeout_s,
        max_bytes=options.max_output_bytes,
    )
