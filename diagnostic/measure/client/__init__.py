"""Streamed completion requests over httpx → RequestRecords; a pool for concurrency N, in one
process or spread over several."""

from diagnostic.measure.client.options import (
    PATHS,
    Api,
    ClientOptions,
    Job,
    RequestLabel,
    auth_headers,
    build_payload,
    server_url,
)
from diagnostic.measure.client.processes import process_count, run_streams
from diagnostic.measure.client.streams import StreamClient, run_pool

__all__ = [
    "PATHS",
    "Api",
    "ClientOptions",
    "Job",
    "RequestLabel",
    "StreamClient",
    "auth_headers",
    "build_payload",
    "process_count",
    "run_pool",
    "run_streams",
    "server_url",
]
