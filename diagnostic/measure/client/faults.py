"""Network and HTTP faults → a record's error, in the same words over httpcore and aiohttp."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import httpx

from diagnostic.measure.client.sse import ERROR_BODY_CHARS

if TYPE_CHECKING:
    import aiohttp


_REFUSED = "cannot connect to "


def refused(error: str | None) -> bool:
    """Whether a record's error says nothing listened: the server is gone, not in trouble."""
    return error is not None and error.startswith(_REFUSED)


def http_error(status: int, body: bytes) -> str:
    """The record's error for an HTTP error status: the status and the start of the body."""
    return f"HTTP {status}: {body[:ERROR_BODY_CHARS].decode('utf-8', 'replace').strip()}"


def transport_error(exc: Exception, url: str) -> str:
    """The record's error for a network fault, the same words whichever transport raised it."""
    from_aiohttp = _aiohttp_error(exc, url)
    if from_aiohttp is not None:
        return from_aiohttp
    if isinstance(exc, httpx.ConnectError):
        return f"{_REFUSED}{url}: {exc}"
    if isinstance(exc, httpx.TimeoutException):
        return f"timeout ({type(exc).__name__}) from {url}"
    if isinstance(exc, httpx.RemoteProtocolError | httpx.ReadError):
        return f"connection broken by {url} mid-stream: {exc or type(exc).__name__}"
    return f"{type(exc).__name__} from {url}: {exc}"


def _aiohttp_error(exc: Exception, url: str) -> str | None:
    """Classify an aiohttp fault by its own type: httpx-aiohttp maps a refused connection and a
    server that hangs up to ConnectTimeout, and lets a malformed response through unmapped."""
    cause = _aiohttp_cause(exc)
    if cause is None:
        return None
    import aiohttp  # already loaded: the fault came from it

    if isinstance(cause, aiohttp.ServerTimeoutError):
        return f"timeout ({_timeout_name(cause)}) from {url}"
    if isinstance(cause, aiohttp.ClientConnectorError):
        return f"{_REFUSED}{url}: {cause}"
    # A cut body, a hang-up, a reset, or a response that is not HTTP (httpcore's words too).
    broken = aiohttp.ClientPayloadError, aiohttp.ClientConnectionError, aiohttp.ClientResponseError
    if isinstance(cause, broken):
        return f"connection broken by {url} mid-stream: {cause}"
    return f"{type(cause).__name__} from {url}: {cause}"


def _timeout_name(exc: Exception) -> str:
    """httpx's name for an aiohttp timeout, so records read the same over either transport."""
    import aiohttp

    if isinstance(exc, aiohttp.ConnectionTimeoutError):
        return "ConnectTimeout"
    return "ReadTimeout" if isinstance(exc, aiohttp.SocketTimeoutError) else "TimeoutException"


def stale(exc: Exception) -> bool:
    """Whether a request failed, before any answer, on a kept-alive connection that the server
    had already closed.

    llama-server closes every connection after a stream although its headers say keep-alive.
    A pool can hand that connection to the next request before the event loop has seen the
    close: aiohttp does not look, httpcore polls the socket but can be too early. aiohttp
    itself resends only idempotent methods, not POST. The signs: a hang-up or a socket error
    that is not a failure to connect.
    """
    cause = _aiohttp_cause(exc)
    if cause is not None:  # httpx-aiohttp maps these to ConnectTimeout
        import aiohttp

        hang_up = aiohttp.ServerDisconnectedError | aiohttp.ClientOSError
        return isinstance(cause, hang_up) and not isinstance(cause, aiohttp.ClientConnectorError)
    return isinstance(exc, httpx.ReadError | httpx.WriteError | httpx.RemoteProtocolError)


def _aiohttp_cause(exc: Exception) -> aiohttp.ClientError | None:
    """The aiohttp error that `exc` is or wraps. aiohttp takes 0.2 s to import, so it is not
    imported for this: when nothing has loaded it, no fault can have come from it."""
    if "aiohttp" not in sys.modules:
        return None
    import aiohttp

    for candidate in (exc, exc.__cause__):
        if isinstance(candidate, aiohttp.ClientError):
            return candidate
    return None
