"""Incremental parsing of an OpenAI-compatible SSE stream, timestamped chunk by chunk.

Every event is data from outside: a field of the wrong type or out of range (a negative,
fractional or 400-digit token count, `choices` that is not a list, `text` that is not text)
makes the request a failed one whose error names the field, never an exception elsewhere."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from diagnostic.common.answers import Unreadable, parse_json, scalars
from diagnostic.measure.client.options import Api, ClientOptions

ERROR_BODY_CHARS = 300
# A token count beyond this is no count (a server's 400-digit number, or 2^63 - 1).
MAX_COUNT = 2**31
_MAX_FINISH = 64  # finish_reason is one word: stop, length, abort, tool_calls


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
    # The start of a line not yet ended, in pieces: joined once its newline arrives, so a line
    # that arrives in many reads costs its length once, not its length squared.
    _pending: list[bytes] = field(default_factory=list)

    def feed(self, data: bytes, now: float) -> None:
        """Take bytes that arrived at `now` (perf_counter) and parse every complete line."""
        self.n_bytes += len(data)
        if self.n_bytes > self.max_bytes:
            raise StreamFault(f"stream exceeded the output cap of {self.max_bytes} bytes")
        if now > self.deadline:
            raise StreamFault("stream exceeded the total timeout")
        if b"\n" not in data:
            self._pending.append(data)
            return
        if self._pending:
            data = b"".join([*self._pending, data])
            self._pending.clear()
        lines = data.split(b"\n")
        tail = lines.pop()
        if tail:
            self._pending.append(tail)
        for line in lines:
            self._line(line.rstrip(b"\r"), now)

    def close(self, now: float) -> None:
        """End of the byte stream: parse a last line without a newline."""
        rest = b"".join(self._pending)
        self._pending.clear()
        if rest.strip():
            self._line(rest.rstrip(b"\r"), now)

    def _line(self, line: bytes, now: float) -> None:
        if not line.startswith(b"data:"):
            return  # blank separators, comments, event:/id:/retry: fields
        payload = line[5:].strip()
        if payload == b"[DONE]":
            self.done = True
            return
        self.n_events += 1
        try:
            event = parse_json(payload)
        except Unreadable as exc:
            raise StreamFault(
                f"malformed SSE event {self.n_events}: {payload[:80]!r}…: {exc}"
            ) from None
        if not isinstance(event, dict):
            raise StreamFault(f"malformed SSE event {self.n_events}: not a JSON object")
        try:
            self._event(event, now)
        except _BadField as exc:
            raise StreamFault(f"malformed SSE event {self.n_events}: {exc}") from None

    def _event(self, event: dict[str, Any], now: float) -> None:
        if "error" in event:
            raise StreamFault(f"server error in stream: {_short(event['error'])}")
        usage = _usage(event.get("usage"))
        if usage is not None:
            self.usage = usage
        timings = scalars(event.get("timings"))
        if timings is not None:
            self.timings = timings
        choices = _of_type(event.get("choices"), list, "choices", "a list") or []
        if not choices:
            return
        choice = _of_type(choices[0], dict, "choices[0]", "an object") or {}
        finish = _of_type(choice.get("finish_reason"), str, "finish_reason", "a word")
        if finish:
            if len(finish) > _MAX_FINISH:
                raise _BadField(f"finish_reason is {len(finish)} characters long, not a word")
            self.finish_reason = finish
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


class _BadField(Exception):
    """A field of an event that is not what the OpenAI API says it is."""


def _type_name(value: Any) -> str:
    names = {dict: "an object", list: "a list", str: "text", bool: "a boolean"}
    return names.get(type(value), "a number")  # JSON has no other types


def _of_type(value: Any, kind: type, name: str, wanted: str) -> Any:
    """`value` when it is None or of `kind`; else _BadField naming the field."""
    if value is None or (isinstance(value, kind) and not isinstance(value, bool)):
        return value
    raise _BadField(f"{name} is {_type_name(value)}, not {wanted}")


def _usage(value: Any) -> dict[str, Any] | None:
    """`usage` with its token counts checked: whole numbers from 0 to MAX_COUNT, or absent."""
    usage = _of_type(value, dict, "usage", "an object")
    for key in ("completion_tokens", "prompt_tokens"):
        count = (usage or {}).get(key)
        if count is None:
            continue
        if not isinstance(count, int) or isinstance(count, bool) or not 0 <= count <= MAX_COUNT:
            shown = json.dumps(count)[:40] if not isinstance(count, int) else str(count)[:40]
            raise _BadField(f"usage.{key} is {shown}, not a token count")
    return usage


def _choice_text(choice: dict[str, Any], api: Api) -> str:
    if api == "completions":
        return _of_type(choice.get("text"), str, "choices[0].text", "text") or ""
    delta = _of_type(choice.get("delta"), dict, "choices[0].delta", "an object") or {}
    # Reasoning models stream thinking in a separate field; it is output all the same.
    parts = ("content", "reasoning_content", "reasoning")
    found = [_of_type(delta.get(k), str, f"choices[0].delta.{k}", "text") for k in parts]
    return (found[0] or "") + (found[1] or found[2] or "")


def completion_tokens(usage: Any) -> int | None:
    """usage.completion_tokens when the server sent it (checked by _usage)."""
    if isinstance(usage, dict) and isinstance(usage.get("completion_tokens"), int):
        return int(usage["completion_tokens"])
    return None


def _short(value: Any) -> str:
    """An error value from a server, as text of bounded length (it may be anything)."""
    if isinstance(value, str):
        return value[:ERROR_BODY_CHARS]
    try:
        text = json.dumps(value)
    except (RecursionError, ValueError):
        return f"({_type_name(value)} nested too deeply to show)"
    return text[:ERROR_BODY_CHARS]


def new_stream(options: ClientOptions, t_send: float) -> SSEStream:
    """A parser for a stream sent at `t_send` (perf_counter), with the run's cap and deadline."""
    return SSEStream(
        api=options.api,
        t_send=t_send,
        deadline=t_send + options.total_timeout_s,
        max_bytes=options.max_output_bytes,
    )
