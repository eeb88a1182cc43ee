"""A server a sweep can launch that stalls on purpose: tests/sse_server.py's OpenAI-like answers
on 127.0.0.1:PORT, its first AFTER completions whole, then, while the file FAULT exists, every
completion stalled as --fault says (accepted and never answered; or frozen after two tokens).
Runs until it is signalled.

    python tests/attacks/fault_server.py --port 8123 --fault stall --after 1 --while FILE
"""

from __future__ import annotations

import argparse
import json
import signal
import socket
import sys
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import sse_server as srv

MODELS = json.dumps({"object": "list", "data": [{"id": "m", "owned_by": "vllm"}]}).encode()


def completions(fault: str, after: int, flag: Path) -> srv.Reply:
    faults = {"stall": srv.stall, "freeze": srv.silent_after(2, 3600)}
    lock, seen = threading.Lock(), [0]

    def reply(conn: socket.socket, server: srv.Server) -> bool:
        with lock:
            seen[0] += 1
            late = seen[0] > after
        if late and flag.exists():
            return faults[fault](conn, server)
        return srv.normal(4)(conn, server)

    return reply


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--fault", choices=["stall", "freeze"], default="stall")
    parser.add_argument("--after", type=int, default=1, help="completions answered whole first")
    parser.add_argument("--while", dest="flag", type=Path, required=True)
    args = parser.parse_args()
    routes = {
        "/health": srv.answer(b""),
        "/v1/models": srv.answer(MODELS, headers=b"Content-Type: application/json\r\n"),
        "/v1/completions": completions(args.fault, args.after, args.flag),
    }
    server = srv.Server(srv.routed(routes), port=args.port)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    stop.wait()
    server.close()


if __name__ == "__main__":
    main()
