"""Which process on this machine is the server measured (its CPU is the host's `server`)."""

from __future__ import annotations

import contextlib
from urllib.parse import urlsplit

import psutil

from diagnostic.schema.bundle import RunInfo

__all__ = ["server_pid"]

_LOCAL = ("127.0.0.1", "localhost", "::1", "0.0.0.0")


def server_pid(run: RunInfo, base_url: str) -> int | None:
    """The server's pid: the one sweep launched, else the local process listening on the
    URL's port (psutil; None when the server is elsewhere or not ours to see)."""
    if run.launch is not None and run.launch.pid is not None:
        return run.launch.pid
    parts = urlsplit(base_url)
    if parts.hostname not in _LOCAL or parts.port is None:
        return None
    with contextlib.suppress(psutil.Error, OSError):
        for conn in psutil.net_connections(kind="tcp"):
            if conn.status == psutil.CONN_LISTEN and conn.laddr and conn.laddr.port == parts.port:
                return conn.pid
    return None
