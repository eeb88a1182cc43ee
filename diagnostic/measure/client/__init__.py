"""Streamed completion requests over httpx → RequestRecords; a pool for concurrency N."""

from diagnostic.measure.client.options import (
    ClientOptions,
    Job,
    RequestLabel,
    auth_headers,
    build_payload,
    server_url,
)
from diagnostic.measure.client.streams import StreamClient, run_pool

__all__ = [
    "ClientOptions",
    "Job",
    "RequestLabel",
    "StreamClient",
    "auth_headers",
    "build_payload",
    "run_pool",
    "server_url",
]
