"""Every wait on the server has a deadline (docs/usage.md, "Deadlines"):

    connect        ClientOptions.connect_timeout_s   the TCP connection
    first token    first_token_timeout_s             from sending a request to its first token
    between tokens token_timeout_s                   from one token to the next
    request        total_timeout_s                   the whole request, however it trickles
    run            RunSettings.run_timeout_s         every request of one run (collect_run)

A request past one of the first four is recorded as failed with the deadline it missed; a
server that misses one has stalled, so the run stops there (ServerStalled), recorded as failed,
and `--resume` tries its failed and missing requests again. A run past its deadline stops the
same way (RunDeadline). The first-token and between-tokens deadlines are kept by one timer per
request that fires only when a deadline could have passed: nothing is done per chunk."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from diagnostic.errors import DiagnosticError

__all__ = ["DEADLINE", "RunDeadline", "ServerStalled", "TokenWatch", "stalled"]

DEADLINE = "deadline: "  # how a record's error for a missed deadline begins
# The transport's own timeouts (faults.transport_error) and the stream's (sse.SSEStream.feed).
_TIMEOUTS = ("timeout (", "stream exceeded the total timeout")


class ServerStalled(DiagnosticError):
    """A request missed a deadline: the server accepted it and stopped answering."""


class RunDeadline(DiagnosticError):
    """The run's deadline passed with requests still to make."""


def stalled(error: str | None) -> bool:
    """Whether a record's error says the server stopped answering within a deadline."""
    return error is not None and error.startswith((DEADLINE, *_TIMEOUTS))


class TokenWatch:
    """The first-token and between-tokens deadlines of one request: `expire` is called once
    the stream (`tokens()` gives the perf_counter time of its last token, None before the
    first) has been silent past its deadline, with the error to record."""

    def __init__(
        self,
        *,
        t_send: float,
        first_token_s: float,
        token_s: float,
        url: str,
        tokens: Callable[[], tuple[int, float | None]],
        expire: Callable[[str], None],
    ) -> None:
        self.t_send, self.first_token_s, self.token_s = t_send, first_token_s, token_s
        self.url, self.tokens, self.expire = url, tokens, expire
        self.missed: str | None = None
        self._handle: asyncio.TimerHandle | None = None
        self._period = min(first_token_s, token_s)

    def start(self) -> None:
        """Arm the timer (in the running event loop). It looks again at least every
        min(first token, between tokens) seconds: a first token may come before the
        first-token deadline, and then the between-tokens one, shorter, applies."""
        self._period = min(self.first_token_s, self.token_s)
        self._arm(self.t_send + self._period)

    def stop(self) -> None:
        """Disarm it: the request ended."""
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def _arm(self, due: float) -> None:
        delay = max(due - time.perf_counter(), 0.0)
        self._handle = asyncio.get_running_loop().call_later(delay, self._check)

    def _check(self) -> None:
        count, last = self.tokens()
        now = time.perf_counter()
        if last is None:
            due = self.t_send + self.first_token_s
            why = (
                f"{DEADLINE}no first token from {self.url} within {self.first_token_s:g} s "
                "of sending the request (the first-token deadline)"
            )
        else:
            due = last + self.token_s
            why = (
                f"{DEADLINE}no token from {self.url} for {self.token_s:g} s after token "
                f"{count} (the between-tokens deadline)"
            )
        if now < due:
            self._arm(min(due, now + self._period))
            return
        self._handle = None
        self.missed = why
        self.expire(why)
