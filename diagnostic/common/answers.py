"""A server's answer read as data from outside: bounded in bytes and time, inflated within the
bound (no gzip bomb), JSON parsed without a RecursionError; what cannot be read says why."""

from __future__ import annotations

import contextlib
import itertools
import json
import math
import socket
import threading
import time
import zlib
from collections.abc import AsyncIterator
from typing import Any

import httpx

__all__ = [
    "ACCEPT_ENCODING",
    "BodyDecoder",
    "Deadline",
    "NotJson",
    "Unreadable",
    "aread_body",
    "parse_json",
    "read_body",
    "scalars",
]

# Asked of every server: what BodyDecoder undoes. A server may send another all the same.
ACCEPT_ENCODING = {"Accept-Encoding": "gzip, deflate"}
_GZIP = 16 + zlib.MAX_WBITS


class Unreadable(Exception):
    """An answer diagnose cannot read; str() says why, in words a user can act on."""


class NotJson(Unreadable):
    """Text that is not JSON at all (which an info path may answer, as text)."""


class _Inflater:
    """One Content-Encoding undone a piece at a time, never more than asked at once."""

    def __init__(self, coding: str) -> None:
        self.coding = coding
        wbits = zlib.MAX_WBITS if coding == "deflate" else _GZIP
        self._zlib = zlib.decompressobj(wbits)
        self._raw_fallback = coding == "deflate"  # some servers send raw deflate

    def inflate(self, data: bytes, room: int) -> bytes:
        """Up to room + 1 bytes of output (one more than room says: too large)."""
        try:
            out = self._zlib.decompress(data, room + 1)
        except zlib.error as exc:
            if not self._raw_fallback:
                raise Unreadable(f"not valid {self.coding} data ({exc})") from None
            self._raw_fallback = False
            self._zlib = zlib.decompressobj(-zlib.MAX_WBITS)
            return self.inflate(data, room)
        self._raw_fallback = False
        return out


class BodyDecoder:
    """Raw body bytes in, decoded bytes out: Content-Encoding (gzip, deflate, stacked) undone
    incrementally, and Unreadable once the decoded body passes `limit` bytes, so a bomb costs
    at most about twice `limit` in memory, however far it would inflate."""

    def __init__(self, encoding: str | None, limit: int) -> None:
        codings = [c.strip().lower() for c in (encoding or "").split(",")]
        codings = [c for c in codings if c and c != "identity"]
        for coding in codings:
            if coding not in ("gzip", "x-gzip", "deflate"):
                raise Unreadable(
                    f"the answer is compressed as {coding!r}, which diagnose did not ask for "
                    "(it asks for gzip or deflate)"
                )
        # Codings are listed in the order they were applied: undo the last first.
        self._stages = [_Inflater(c) for c in reversed(codings)]
        self.limit = limit
        self.size = 0

    def feed(self, data: bytes) -> bytes:
        """Decode the next raw bytes."""
        for stage in self._stages:
            data = stage.inflate(data, self.limit - self.size)
        self.size += len(data)
        if self.size > self.limit:
            raise Unreadable(f"the answer is larger than {_size(self.limit)}")
        return data


class Deadline:
    """A hard end for sync httpx requests: past it, the sockets they opened are shut, so a
    server that sends its headers or body a byte at a time (no read timeout ever passes) is
    cut off too. Give `extensions` to each request, on a client that keeps no connection
    alive from before (httpx.Limits(max_keepalive_connections=0)): only connections opened
    under the deadline are watched."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.end = time.monotonic() + seconds
        self.passed = False
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(seconds, self._cut)
        self._timer.daemon = True

    @property
    def extensions(self) -> dict[str, Any]:
        """httpx request extensions that let the deadline see each new connection."""
        return {"trace": self._trace}

    def left(self) -> float:
        """Seconds until the deadline (negative once past)."""
        return self.end - time.monotonic()

    def _trace(self, event: str, info: dict[str, Any]) -> None:
        if event == "connection.connect_tcp.complete":
            sock = info["return_value"].get_extra_info("socket")
            with self._lock:
                if sock is not None:
                    self._sockets.append(sock)
                if self.passed:
                    self._cut_locked()

    def _cut(self) -> None:
        with self._lock:
            self.passed = True
            self._cut_locked()

    def _cut_locked(self) -> None:
        for sock in self._sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def __enter__(self) -> Deadline:
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._timer.cancel()


def read_body(response: httpx.Response, *, limit: int, deadline: float) -> bytes:
    """A streamed response's decoded body, at most `limit` bytes, whole before `deadline`
    (time.monotonic()); Unreadable otherwise. httpx errors pass through."""
    if response.is_stream_consumed:  # a test transport's answer, read and decoded already
        return _whole(response.content, limit)
    decoder = BodyDecoder(response.headers.get("content-encoding"), limit)
    parts = []
    for raw in response.iter_raw():
        parts.append(decoder.feed(raw))
        _check_deadline(deadline)
    return b"".join(parts)


async def aread_body(response: httpx.Response, *, limit: int) -> bytes:
    """read_body for an async response (its caller bounds the time)."""
    if response.is_stream_consumed:
        return _whole(response.content, limit)
    decoder = BodyDecoder(response.headers.get("content-encoding"), limit)
    return b"".join([decoder.feed(data) async for data in response.aiter_raw()])


async def araw(response: httpx.Response) -> AsyncIterator[bytes]:
    """An async response's raw bytes as they arrive; a response whose body was already read
    (a test transport's) gives it whole, decoded, with no Content-Encoding left to undo."""
    if response.is_stream_consumed:
        response.headers.pop("content-encoding", None)
        yield response.content
        return
    async for data in response.aiter_raw():
        yield data


def _whole(content: bytes, limit: int) -> bytes:
    if len(content) > limit:
        raise Unreadable(f"the answer is larger than {_size(limit)}")
    return content


def _check_deadline(deadline: float) -> None:
    if time.monotonic() > deadline:
        raise Unreadable("the answer was still arriving at the timeout (a server that stalls)")


def parse_json(data: bytes | str) -> Any:
    """JSON text → value; Unreadable for text that is not JSON, JSON nested thousands deep
    (json raises RecursionError) or an integer of thousands of digits."""
    try:
        return json.loads(data)
    except RecursionError:
        raise Unreadable("JSON nested too deeply (hundreds of levels)") from None
    except UnicodeDecodeError:
        raise NotJson("not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise NotJson(f"not JSON ({exc.msg} at character {exc.pos})") from None
    except ValueError:  # int() digit limit: "Exceeds the limit (4300 digits)"
        raise Unreadable("a number with thousands of digits") from None


_MAX_SCALAR_TEXT = 200
_MAX_INT = 2**53


def scalars(value: Any, *, keep: int = 64) -> dict[str, Any] | None:
    """The plain entries of a flat JSON object (finite numbers, booleans, short strings), at
    most `keep` of them; None when `value` is not an object. What a server reports beside its
    answer (llama.cpp's `timings`) is kept only in a shape every reader can take."""
    if not isinstance(value, dict):
        return None
    kept: dict[str, Any] = {}
    for key, item in itertools.islice(value.items(), keep):
        if isinstance(item, str):
            item = item[:_MAX_SCALAR_TEXT]
        elif not _plain(item):
            continue
        kept[str(key)[:_MAX_SCALAR_TEXT]] = item
    return kept


def _plain(item: Any) -> bool:
    """A boolean, null, integer JSON readers agree on, or finite number."""
    if item is None or isinstance(item, bool):
        return True
    if isinstance(item, int):
        return abs(item) <= _MAX_INT
    return isinstance(item, float) and math.isfinite(item)


def _size(n: int) -> str:
    return f"{n / 2**20:g} MiB" if n >= 2**20 else f"{n:,} bytes"
