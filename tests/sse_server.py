"""A raw-socket HTTP/1.1 server in a thread whose replies can break the way networks do, and
whose answers, path by path, can be anything a hostile server sends (`routed`)."""

from __future__ import annotations

import gzip
import json
import socket
import struct
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import Any

HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n%s\r\n"
END = b"0\r\n\r\n"

Reply = Callable[[socket.socket, "Server"], bool]
"""Writes one reply on the connection; True keeps the connection for the next request."""


def event(payload: dict[str, Any] | str) -> bytes:
    """One SSE event."""
    text = payload if isinstance(payload, str) else json.dumps(payload)
    return f"data: {text}\n\n".encode()


def chunk(data: bytes) -> bytes:
    """One HTTP/1.1 chunk of a chunked body."""
    return b"%x\r\n%s\r\n" % (len(data), data)


def text(value: str, tokens: int) -> bytes:
    """A completions event of one token chunk, with cumulative usage as vLLM sends it."""
    usage = {"prompt_tokens": 3, "completion_tokens": tokens, "total_tokens": 3 + tokens}
    return event({"choices": [{"index": 0, "text": value, "finish_reason": None}], "usage": usage})


def stream_body(n: int) -> list[bytes]:
    """A whole stream of n one-token chunks: content, a usage chunk, [DONE]."""
    usage = {"prompt_tokens": 3, "completion_tokens": n, "total_tokens": 3 + n}
    return [
        *(text(f"t{i}", i + 1) for i in range(n)),
        event({"choices": [], "usage": usage}),
        event("[DONE]"),
    ]


def normal(n: int = 4, *, keep_alive: bool = True) -> Reply:
    """A complete stream, one network write per event; without keep_alive the server closes
    the connection after it, as llama-server does, though its headers promise keep-alive."""

    def reply(conn: socket.socket, server: Server) -> bool:
        conn.sendall(HEAD % b"")
        for data in stream_body(n):
            conn.sendall(chunk(data))
        conn.sendall(END)
        return keep_alive

    return reply


def gzipped(n: int = 4) -> Reply:
    """A complete stream compressed with Content-Encoding: gzip."""

    def reply(conn: socket.socket, server: Server) -> bool:
        conn.sendall(HEAD % b"Content-Encoding: gzip\r\n")
        conn.sendall(chunk(gzip.compress(b"".join(stream_body(n)))) + END)
        return True

    return reply


def reset_after(n: int) -> Reply:
    """n events, then a TCP reset (SO_LINGER 0: the kernel sends RST, not FIN)."""

    def reply(conn: socket.socket, server: Server) -> bool:
        conn.sendall(HEAD % b"" + b"".join(chunk(text(f"t{i}", i + 1)) for i in range(n)))
        server.stop.wait(0.05)
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        return False

    return reply


def silent_after(n: int, seconds: float = 5.0) -> Reply:
    """n events, then silence (a stalled server) until the test ends."""

    def reply(conn: socket.socket, server: Server) -> bool:
        conn.sendall(HEAD % b"" + b"".join(chunk(text(f"t{i}", i + 1)) for i in range(n)))
        server.stop.wait(seconds)
        return False

    return reply


def raw(data: bytes) -> Reply:
    """Exactly these bytes, then a clean close (b"" hangs up without answering)."""

    def reply(conn: socket.socket, server: Server) -> bool:
        conn.sendall(data)
        return False

    return reply


def endless(conn: socket.socket, server: Server) -> bool:
    """Tokens until the client goes away."""
    conn.sendall(HEAD % b"")
    with suppress(OSError):
        i = 0
        while not server.stop.is_set():
            i += 1
            conn.sendall(chunk(text("token ", i)))
    return False


def error(status: int, body: bytes) -> Reply:
    """An HTTP error with a body."""

    def reply(conn: socket.socket, server: Server) -> bool:
        head = f"HTTP/1.1 {status} Oops\r\nContent-Length: {len(body)}\r\n\r\n".encode()
        conn.sendall(head + body)
        return True

    return reply


def answer(
    body: bytes, *, status: int = 200, headers: bytes = b"", keep_alive: bool = True
) -> Reply:
    """A whole answer with a Content-Length (JSON, text, or anything)."""

    def reply(conn: socket.socket, server: Server) -> bool:
        head = b"HTTP/1.1 %d X\r\nContent-Length: %d\r\n%s\r\n" % (status, len(body), headers)
        conn.sendall(head + body)
        return keep_alive

    return reply


def stream(events: list[bytes], *, headers: bytes = b"") -> Reply:
    """A chunked 200 stream of these SSE events, then the end of the body."""

    def reply(conn: socket.socket, server: Server) -> bool:
        conn.sendall(HEAD % headers + b"".join(chunk(e) for e in events) + END)
        return True

    return reply


def streamed_body(status: int, piece: bytes, total: int, *, headers: bytes = b"") -> Reply:
    """A chunked answer of `total` bytes made of `piece` again and again (a huge error body
    or an answer too large to keep), stopped early when the client hangs up."""

    def reply(conn: socket.socket, server: Server) -> bool:
        conn.sendall(b"HTTP/1.1 %d X\r\nTransfer-Encoding: chunked\r\n%s\r\n" % (status, headers))
        sent = 0
        with suppress(OSError):
            while sent < total and not server.stop.is_set():
                conn.sendall(chunk(piece))
                sent += len(piece)
            conn.sendall(END)
        return False

    return reply


def stall(conn: socket.socket, server: Server) -> bool:
    """Accept the request, then say nothing until the test ends."""
    server.stop.wait()
    return False


def dribble(head: bytes, byte: bytes = b" ", every_s: float = 0.5) -> Reply:
    """`head` (status line, headers, maybe some body), then one byte every `every_s` seconds
    for ever: never silent long enough for a read timeout."""

    def reply(conn: socket.socket, server: Server) -> bool:
        with suppress(OSError):
            conn.sendall(head)
            while not server.stop.wait(every_s):
                conn.sendall(byte)
        return False

    return reply


def routed(routes: dict[str, Reply], default: Reply | None = None) -> Reply:
    """Answer each path with its own reply; others with `default`, else 404."""
    missing = answer(b"not found", status=404)

    def reply(conn: socket.socket, server: Server) -> bool:
        path = getattr(server.current, "path", "/")
        return routes.get(path, default or missing)(conn, server)

    return reply


class Server:
    """Accepts connections on 127.0.0.1; each request gets `reply`, on its own thread."""

    def __init__(self, reply: Reply, port: int = 0) -> None:
        self.reply = reply
        self.stop = threading.Event()
        self.requests: list[dict[str, Any]] = []
        self.paths: list[str] = []
        self.current = threading.local()  # .path: the path of the request being answered
        self._sock = socket.create_server(("127.0.0.1", port))
        self.url = f"http://127.0.0.1:{self._sock.getsockname()[1]}"
        self._conns: list[socket.socket] = []
        self._threads = [threading.Thread(target=self._accept, daemon=True)]
        self._threads[0].start()

    def _accept(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            self._conns.append(conn)
            thread = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            self._threads.append(thread)
            thread.start()

    def _serve(self, conn: socket.socket) -> None:
        with conn, conn.makefile("rb") as reader, suppress(OSError):
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            while (request := _read_request(reader)) is not None:
                path, body = request
                self.paths.append(path)
                self.requests.append(body)
                self.current.path = path
                if not self.reply(conn, self):
                    return

    def close(self) -> None:
        """Stop accepting, wake every stalled reply, wait for the threads."""
        self.stop.set()
        # shutdown, not close alone, wakes a thread blocked in accept() or recv() on Linux.
        for sock in [self._sock, *self._conns]:
            with suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        self._sock.close()
        for thread in self._threads:
            thread.join(timeout=5)


def _read_request(reader: Any) -> tuple[str, dict[str, Any]] | None:
    """One request's path and JSON body (None when the client closed the connection)."""
    length = 0
    line = reader.readline()
    if not line:
        return None
    parts = line.decode("latin-1").split()
    path = parts[1].partition("?")[0] if len(parts) > 1 else "/"
    while (line := reader.readline()) not in (b"\r\n", b""):
        name, _, value = line.decode("latin-1").partition(":")
        if name.strip().lower() == "content-length":
            length = int(value)
    data = reader.read(length) if length else b""
    try:
        return path, json.loads(data) if data else {}
    except ValueError:
        return path, {}


@contextmanager
def serving(reply: Reply) -> Iterator[Server]:
    """A running server for the block."""
    server = Server(reply)
    try:
        yield server
    finally:
        server.close()


@contextmanager
def refusing() -> Iterator[str]:
    """A URL whose port is bound but not listening: every connect is refused at once."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"


@contextmanager
def unanswered() -> Iterator[str]:
    """A URL whose accept queue is full: a new connection's SYN is dropped, so connect times
    out (Linux keeps backlog + 1 completed connections and drops SYNs beyond them)."""
    listener = socket.create_server(("127.0.0.1", 0), backlog=0)
    fillers = []
    try:
        for _ in range(4):
            filler = socket.socket()
            filler.setblocking(False)
            with suppress(BlockingIOError):
                filler.connect(listener.getsockname())
            fillers.append(filler)
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        for filler in fillers:
            filler.close()
        listener.close()
