"""A local OpenAI-compatible SSE server that streams tokens at a precisely known, recorded rate.

Usage::

    python benchmarks/paced_server.py [--port 8000] [--rate 2000] [--tpc 1]

POST /v1/completions answers every streamed request with `max_tokens` tokens, `tpc` tokens per
chunk: the first chunk at once, chunk i at t0 + i·tpc/rate on an absolute clock (a late chunk
never delays the ones after it), the last content chunk with finish_reason "length", a usage
chunk {completion_tokens, prompt_tokens} when `stream_options.include_usage` asks for it (usage
in every chunk with `continuous_usage_stats`, as vLLM does), then `data: [DONE]`. A request
may set its own pace with the body fields `pace_rate` (tokens/s) and `pace_tpc`, and a delay
between the response headers and the first chunk with `pace_ttft_s` (default 0: at once).

The server writes down, on its own clock, when each content chunk left (as it was handed to
`sendall`), keyed by the request's prompt: GET /v1/emits returns and forgets them, so a
benchmark can compare what a client measured with what the server actually achieved.

One thread per connection reads requests (HTTP/1.1 keep-alive, chunked transfer, TCP_NODELAY);
one pacer thread sends every stream's chunks from a heap of due times, waiting on a
threading.Condition, which wakes to ~0.1 ms where asyncio's timers round to 1 ms. Stdlib only.
"""

from __future__ import annotations

import argparse
import heapq
import itertools
import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

__all__ = ["Emits", "PacedServer", "decode_rate", "main"]

_MAX_BODY = 1 << 20
_HEADERS = (
    b"HTTP/1.1 200 OK\r\n"
    b"Content-Type: text/event-stream\r\n"
    b"Cache-Control: no-cache\r\n"
    b"Transfer-Encoding: chunked\r\n\r\n"
)


@dataclass
class Emits:
    """When each content chunk of one request left the server, and how many tokens it held."""

    rate: float
    tpc: int
    t0: float = 0.0
    times: list[float] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        """The JSON form GET /v1/emits returns (t0: the schedule's origin, chunk i is due at
        t0 + i·tpc/rate; times: when each chunk was handed to sendall)."""
        return {
            "rate": self.rate,
            "tpc": self.tpc,
            "t0": self.t0,
            "times": self.times,
            "tokens": self.tokens,
        }


def decode_rate(times: list[float], tokens: list[int]) -> float | None:
    """(total tokens − first chunk's tokens) / (last − first chunk time): the documented decode
    throughput, applied to the server's own emit times. None with fewer than two chunks."""
    if len(times) < 2 or times[-1] <= times[0]:
        return None
    return (sum(tokens) - tokens[0]) / (times[-1] - times[0])


def _http_chunk(payload: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(payload), payload)


def _sse(event: dict[str, Any] | str) -> bytes:
    data = event if isinstance(event, str) else json.dumps(event, separators=(",", ":"))
    return _http_chunk(b"data: " + data.encode() + b"\n\n")


def _response(status: str, body: dict[str, Any], keep_alive: bool = True) -> bytes:
    data = json.dumps(body).encode()
    head = (
        f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(data)}\r\nConnection: {'keep-alive' if keep_alive else 'close'}"
        "\r\n\r\n"
    )
    return head.encode() + data


@dataclass(frozen=True)
class _Plan:
    """One streamed answer, every byte built before the first chunk leaves."""

    rid: str
    rate: float
    tpc: int
    ttft: float
    chunks: list[bytes]
    sizes: list[int]
    tail: bytes


def _plan(body: dict[str, Any], rate: float, tpc: int) -> _Plan:
    rid = str(body.get("prompt", ""))
    n_tokens = max(1, int(body.get("max_tokens") or 16))
    rate = float(body.get("pace_rate") or rate)
    tpc = max(1, int(body.get("pace_tpc") or tpc))
    ttft = float(body.get("pace_ttft_s") or 0.0)
    options = body.get("stream_options") or {}
    continuous = bool(options.get("continuous_usage_stats"))
    prompt_tokens = len(rid.split())
    base = {"id": f"cmpl-{rid}", "object": "text_completion", "created": int(time.time())}
    base["model"] = body.get("model") or "paced"
    sizes = [min(tpc, n_tokens - done) for done in range(0, n_tokens, tpc)]
    chunks, total = [], 0
    for i, size in enumerate(sizes):
        total += size
        last = i == len(sizes) - 1
        choice = {"index": 0, "text": " x" * size, "logprobs": None}
        choice["finish_reason"] = "length" if last else None
        event: dict[str, Any] = {**base, "choices": [choice]}
        if continuous:
            event["usage"] = _usage(prompt_tokens, total)
        chunks.append(_sse(event))
    tail = b""
    if options.get("include_usage") or continuous:
        tail += _sse({**base, "choices": [], "usage": _usage(prompt_tokens, n_tokens)})
    tail += _sse("[DONE]") + b"0\r\n\r\n"
    return _Plan(rid, rate, tpc, ttft, chunks, sizes, tail)


def _usage(prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }


@dataclass
class _Stream:
    """One answer being paced: its socket, its plan, the next chunk, when it is done."""

    sock: socket.socket
    plan: _Plan
    emits: Emits
    next: int = 0
    error: OSError | None = None
    done: threading.Event = field(default_factory=threading.Event)


class _Pacer:
    """One thread sends the chunks of every stream, each at t0 + i·tpc/rate on the absolute
    clock (a late chunk never delays the ones after it), stamping each as it goes to `sendall`.

    A thread per stream that sleeps and sends its own chunks does not hold at 1,024 streams:
    the threads queue for the GIL, fall behind, catch up in bursts, and stamp chunks seconds
    after the client had them (benchmarks/README.md, "Many streams"). The connection threads
    here only read requests and wait.
    """

    def __init__(self) -> None:
        self._due: list[tuple[float, int, _Stream]] = []
        self._wake = threading.Condition()
        self._order = itertools.count()  # ties in due time go first come, first served
        threading.Thread(target=self._run, daemon=True).start()

    def stream(self, sock: socket.socket, plan: _Plan) -> Emits:
        """Headers now, then the plan's chunks from the pacer's thread; returns once sent."""
        sock.sendall(_HEADERS)
        if plan.ttft > 0:
            time.sleep(plan.ttft)  # a prefill: headers first, first token later, as vLLM does
        stream = _Stream(sock, plan, Emits(rate=plan.rate, tpc=plan.tpc, tokens=list(plan.sizes)))
        stream.emits.t0 = time.perf_counter()
        self._schedule(stream.emits.t0, stream)
        stream.done.wait()
        if stream.error is not None:
            raise stream.error
        sock.sendall(plan.tail)
        return stream.emits

    def _schedule(self, due: float, stream: _Stream) -> None:
        with self._wake:
            heapq.heappush(self._due, (due, next(self._order), stream))
            self._wake.notify()

    def _run(self) -> None:
        while True:
            with self._wake:
                while not self._due:
                    self._wake.wait()
                due, _, stream = self._due[0]
                wait = due - time.perf_counter()
                if wait > 0:
                    self._wake.wait(wait)  # or sooner, when a new stream comes
                    continue
                heapq.heappop(self._due)
            self._send(stream)

    def _send(self, stream: _Stream) -> None:
        plan, emits = stream.plan, stream.emits
        emits.times.append(time.perf_counter())
        try:
            stream.sock.sendall(plan.chunks[stream.next])
        except OSError as exc:  # the client went away
            stream.error = exc
            stream.done.set()
            return
        stream.next += 1
        if stream.next == len(plan.chunks):
            stream.done.set()
        else:
            self._schedule(emits.t0 + stream.next * plan.tpc / plan.rate, stream)


def _read_request(rfile: BinaryIO) -> tuple[str, str, dict[str, str], bytes] | None:
    """One HTTP/1.1 request (method, path, headers, body); None when the peer closed."""
    line = rfile.readline(65536)
    if not line.strip():
        return None
    method, path, _ = line.decode("latin-1").split(" ", 2)
    headers: dict[str, str] = {}
    while (raw := rfile.readline(65536)) not in (b"\r\n", b"\n", b""):
        name, _, value = raw.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    length = min(int(headers.get("content-length", "0") or 0), _MAX_BODY)
    return method, path, headers, rfile.read(length) if length else b""


class PacedServer:
    """The paced SSE server on a background thread: start(), url, take_emits(), stop()."""

    def __init__(
        self, host: str = "127.0.0.1", port: int = 0, *, rate: float = 1000.0, tpc: int = 1
    ) -> None:
        self.rate, self.tpc = rate, tpc
        # Room for every connection of a 1,024-stream burst: a full accept queue drops SYNs,
        # which the client retries a second later.
        self._listener = socket.create_server((host, port), backlog=4096)
        self._emits: dict[str, Emits] = {}
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._pacer = _Pacer()
        self._thread = threading.Thread(target=self._accept_loop, daemon=True)

    @property
    def url(self) -> str:
        """Base URL, e.g. http://127.0.0.1:40123."""
        host, port = self._listener.getsockname()[:2]
        return f"http://{host}:{port}"

    def start(self) -> PacedServer:
        """Start accepting connections; returns self."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop accepting; open streams end with their connection threads (daemons)."""
        self._stopped.set()
        self._listener.close()

    def __enter__(self) -> PacedServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def take_emits(self) -> dict[str, Emits]:
        """Every request's emit record since the last call, by prompt."""
        with self._lock:
            taken, self._emits = self._emits, {}
        return taken

    def _accept_loop(self) -> None:
        while not self._stopped.is_set():
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return  # listener closed by stop()
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn, conn.makefile("rb") as rfile:
            try:
                for method, path, headers, body in _requests(rfile):
                    self._answer(conn, method, path, body)
                    if headers.get("connection", "").lower() == "close":
                        return
            except (OSError, ValueError):
                return  # peer went away or sent something that is not HTTP

    def _answer(self, conn: socket.socket, method: str, path: str, body: bytes) -> None:
        if method == "POST" and path.startswith("/v1/completions"):
            request = json.loads(body or b"{}")
            if not request.get("stream"):
                conn.sendall(_response("400 Bad Request", {"error": "only stream=true"}))
                return
            emits = self._pacer.stream(conn, plan := _plan(request, self.rate, self.tpc))
            with self._lock:
                self._emits[plan.rid] = emits
        elif method == "GET" and path.startswith("/v1/emits"):
            taken = self.take_emits()
            conn.sendall(_response("200 OK", {k: e.as_json() for k, e in taken.items()}))
        elif method == "GET" and path.startswith("/v1/models"):
            conn.sendall(_response("200 OK", {"object": "list", "data": [{"id": "paced"}]}))
        elif method == "GET" and path.startswith("/health"):
            conn.sendall(_response("200 OK", {"status": "ok"}))
        else:
            conn.sendall(_response("404 Not Found", {"error": f"no route {method} {path}"}))


def _requests(rfile: BinaryIO) -> Iterator[tuple[str, str, dict[str, str], bytes]]:
    while (request := _read_request(rfile)) is not None:
        yield request


def spawn() -> tuple[subprocess.Popen[str], str]:
    """This server in its own process (its own GIL) on a free port; its base URL."""
    proc = subprocess.Popen(
        [sys.executable, str(Path(__file__)), "--port", "0"], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    if not line.startswith("listening on "):
        proc.kill()
        raise SystemExit(f"paced server did not start: {line!r}")
    return proc, line.removeprefix("listening on ")


def main(argv: list[str] | None = None) -> None:
    """Serve until interrupted; prints the base URL on the first line of stdout."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--rate", type=float, default=1000.0, help="default tokens/s")
    parser.add_argument("--tpc", type=int, default=1, help="default tokens per chunk")
    args = parser.parse_args(argv)
    server = PacedServer(args.host, args.port, rate=args.rate, tpc=args.tpc).start()
    print(f"listening on {server.url}", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        server.stop()


if __name__ == "__main__":
    main()
