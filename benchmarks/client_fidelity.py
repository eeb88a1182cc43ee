"""Benchmark: decode tok/s as `diagnose collect`'s client measures it vs the paced server's truth.

Usage::

    python benchmarks/client_fidelity.py [--reps 5] [--tokens 256] [--ttft-ms 0] [--httpcore]
                                         [--stress] [--only REGEX] [--json out.json]
                                         [--many 256 1024] [--many-rates 10] [--processes N ...]

Starts benchmarks/paced_server.py in its own process, then for every point (single stream at
100, 500, 2,000 and 5,000 tok/s; 16 and 64 concurrent streams at 100 tok/s each; 256 and
1,024 streams at 10 tok/s each, --many and --many-rates; tokens per chunk 1 and 4) runs, side
by side in the same run and on the same server:

- diagnose: the request path `diagnose collect` uses (diagnostic.measure.collect.run._run_jobs:
  StreamClient + run_pool over its default aiohttp transport, for one stream too, spread over
  worker processes as collect spreads them), decode tok/s by diagnostic.schema.requests.decode_tps
  (what collect and analyse use) on the RequestRecord;
- aiohttp: a plain aiohttp client written the way `vllm bench serve` makes requests (one
  shared ClientSession, a semaphore for concurrency, `response.content.iter_any()`, SSE
  messages split on blank lines, `data: ` stripped, time.perf_counter() per token message),
  always in one process;
- with --processes N …, at several streams: collect's path with its process count forced to
  N (diagnose×N), to compare one process with several;
- with --httpcore, at several streams: collect's async pool over httpx's own httpcore
  transport, the client before it moved to aiohttp (benchmarks/README.md says why): before and
  after side by side.

Both send the same payload, so the server streams identically; both compute decode tok/s the
same way: (completion_tokens − first chunk's tokens) / (last − first chunk time). The truth
is that formula on the server's own emit times, per request. Each point runs --reps times
(the clients take turns going first); the table shows, per client, the median over
repetitions of the median per-request error, the 90th percentile of |error|, the per-chunk
lag (client arrival − server emit), the client's CPU time per chunk (its worker processes
included), and where the CPU went: % of one core for the client's parent process, its
workers, and the paced server.
"""

from __future__ import annotations

import argparse
import asyncio
import codecs
import json
import os
import re
import resource
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from paced_server import decode_rate, spawn  # noqa: E402

from diagnostic.measure.client import (  # noqa: E402
    ClientOptions,
    Job,
    RequestLabel,
    StreamClient,
    build_payload,
    run_pool,
)
from diagnostic.measure.collect.run import _run_jobs  # noqa: E402  (exactly what collect runs)
from diagnostic.schema.requests import RequestRecord, decode_tps  # noqa: E402

CLIENTS = ("diagnose", "aiohttp")
HTTPCORE = "diagnose+httpcore"
# The issues' goals in percent: median error, and p90 |error| where one is set.
GOALS: dict[tuple[str, float], tuple[float, float | None]] = {
    ("single", 2000.0): (0.5, None),
    ("multi", 64): (1.0, None),
    ("multi", 1024): (1.0, 2.0),
}
MANY = (256, 1024)  # streams where collect may spread its load over processes


@dataclass(frozen=True)
class Point:
    """One measured setting: per-stream rate, tokens per chunk, streams in flight."""

    rate: float
    tpc: int
    concurrency: int
    ttft_s: float = 0.0  # the server's wait between response headers and the first chunk

    @property
    def key(self) -> str:
        """Short unique name, used in prompts (the server keys its emit records by prompt)."""
        return f"r{self.rate:g}-t{self.tpc}-c{self.concurrency}"

    def goal(self) -> tuple[float, float | None] | None:
        """The issues' goals in percent (median error, p90 |error|), where they set one."""
        if self.concurrency == 1:
            return GOALS.get(("single", self.rate))
        return GOALS.get(("multi", self.concurrency))


@dataclass(frozen=True)
class Measured:
    """What a client saw of one request: decode tok/s and when each content chunk arrived
    (absolute time.perf_counter(): CLOCK_MONOTONIC, the clock the server process reads too)."""

    tps: float
    arrivals: list[float]


@dataclass
class RepResult:
    """One client's repetition at one point: per-request true and measured decode tok/s, and
    per-chunk lag (client arrival − server emit, ms) where both saw the same chunks."""

    client: str
    true: list[float] = field(default_factory=list)
    measured: list[float] = field(default_factory=list)
    lags_ms: list[float] = field(default_factory=list)
    failed: int = 0
    cpu_us_per_chunk: float = 0.0
    cpu: CpuShare | None = None

    def errors(self) -> list[float]:
        """Per-request relative error measured/true − 1."""
        return [m / t - 1 for m, t in zip(self.measured, self.true, strict=True)]


@dataclass(frozen=True)
class CpuShare:
    """Where one repetition's CPU went, in % of one core over its wall time: the client's
    parent process, its worker processes, and the paced server (its own process)."""

    parent: float
    workers: float
    server: float


def grid(
    stress: bool,
    ttft_s: float = 0.0,
    many_rates: Sequence[float] = (10.0,),
    many: Sequence[int] = MANY,
) -> list[Point]:
    """The issue's points; --stress adds 500 tok/s per stream at 16 and 64 streams. At 256 and
    1,024 streams each stream runs at `many_rates` (a server decoding for 1,024 streams gives
    each a few tok/s to a few tens; 2 cores cannot carry 1,024 × 100 chunks/s in Python)."""
    single = (100.0, 500.0, 2000.0, 5000.0)
    points = [Point(r, tpc, 1, ttft_s) for r in single for tpc in (1, 4)]
    per_stream = (100.0, 500.0) if stress else (100.0,)
    points += [Point(r, t, c, ttft_s) for c in (16, 64) for r in per_stream for t in (1, 4)]
    points += [Point(r, t, c, ttft_s) for c in many for r in many_rates for t in (1, 4)]
    return points


def _payload_options(url: str, point: Point, tokens: int) -> ClientOptions:
    extra = {"pace_rate": point.rate, "pace_tpc": point.tpc, "pace_ttft_s": point.ttft_s}
    return ClientOptions(base_url=url, max_tokens=tokens, extra_body=extra)


def run_diagnose(
    url: str, point: Point, prompts: list[str], tokens: int, processes: int | None = None
) -> dict[str, Measured]:
    """diagnose's own request path, over as many processes as collect picks (or `processes`);
    prompt → what it measured (failed requests left out)."""
    options = _payload_options(url, point, tokens)
    jobs = [_job(p, i, point.concurrency) for i, p in enumerate(prompts)]
    records: list[RequestRecord] = []
    origin = time.perf_counter()
    _run_jobs(jobs, options, point.concurrency, origin, records.append, processes)
    return _as_measured(records, origin)


def _as_measured(records: list[RequestRecord], origin: float) -> dict[str, Measured]:
    out = {}
    for record in records:
        value = decode_tps(record) if record.error is None else None
        if value is not None:
            start = origin + record.t_send
            out[record.prompt_id] = Measured(value, [start + t for t in record.chunk_times_s])
    return out


def _job(prompt: str, seq: int, concurrency: int) -> Job:
    label = RequestLabel(
        arm="fidelity",
        restart=0,
        seq=seq,
        workload="paced",
        prompt_id=prompt,
        warmup=False,
        concurrency=concurrency,
    )
    return Job(label=label, prompt=prompt)


class _SSEMessages:
    """Bytes → complete SSE messages, the way vLLM's StreamedResponseHandler splits them."""

    def __init__(self) -> None:
        self.buffer = ""
        self._decoder = codecs.getincrementaldecoder("utf-8")()

    def add(self, data: bytes) -> list[str]:
        self.buffer += self._decoder.decode(data)
        messages = []
        while "\n\n" in self.buffer:
            message, self.buffer = self.buffer.split("\n\n", 1)
            if message.strip():
                messages.append(message.strip())
        # vLLM strips each read, so a message's own "\n\n" may be gone: a remainder that is
        # already valid JSON (or [DONE]) counts as complete.
        rest = self.buffer.removeprefix("data: ").strip()
        if self.buffer.startswith("data: ") and rest:
            try:
                if rest != "[DONE]":
                    json.loads(rest)
                messages.append(self.buffer.strip())
                self.buffer = ""
            except json.JSONDecodeError:
                pass
        return messages


async def _aiohttp_request(
    session: aiohttp.ClientSession, url: str, payload: dict[str, Any]
) -> Measured | None:
    """One streamed request as vllm bench serve makes it; None when it failed."""
    times: list[float] = []
    first_tokens: int | None = None
    completion: int | None = None
    async with session.post(url, json=payload) as response:
        if response.status != 200:
            return None
        messages = _SSEMessages()
        async for data in response.content.iter_any():
            data = data.strip()
            if not data:
                continue
            for message in messages.add(data):
                if message.startswith(":"):
                    continue
                chunk = message.removeprefix("data: ")
                if chunk == "[DONE]":
                    continue
                event = json.loads(chunk)
                usage = event.get("usage") or {}
                if event.get("choices"):
                    times.append(time.perf_counter())
                    if first_tokens is None:
                        first_tokens = usage.get("completion_tokens", 1)
                if usage:
                    completion = usage.get("completion_tokens")
    if completion is None or first_tokens is None or len(times) < 2:
        return None
    return Measured((completion - first_tokens) / (times[-1] - times[0]), times)


async def _aiohttp_pool(
    url: str, payloads: list[dict[str, Any]], concurrency: int
) -> list[Measured | None]:
    connector = aiohttp.TCPConnector(limit=concurrency, keepalive_timeout=60)
    timeout = aiohttp.ClientTimeout(total=6 * 60 * 60)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        semaphore = asyncio.Semaphore(concurrency)

        async def limited(payload: dict[str, Any]) -> Measured | None:
            async with semaphore:
                return await _aiohttp_request(session, url, payload)

        return await asyncio.gather(*(limited(p) for p in payloads))


def run_aiohttp(url: str, point: Point, prompts: list[str], tokens: int) -> dict[str, Measured]:
    """The vLLM-style aiohttp client, same payload as diagnose; prompt → what it measured."""
    options = _payload_options(url, point, tokens)
    payloads = [build_payload(options, _job(p, i, 1)) for i, p in enumerate(prompts)]
    results = asyncio.run(_aiohttp_pool(url + "/v1/completions", payloads, point.concurrency))
    return {p: v for p, v in zip(prompts, results, strict=True) if v is not None}


def run_httpcore(url: str, point: Point, prompts: list[str], tokens: int) -> dict[str, Measured]:
    """The async client before: collect's pool (StreamClient + run_pool) over httpx's
    httpcore transport instead of its default aiohttp one; only for several streams."""
    options = _payload_options(url, point, tokens)
    jobs = [_job(p, i, point.concurrency) for i, p in enumerate(prompts)]
    records: list[RequestRecord] = []
    origin = time.perf_counter()

    async def pool() -> None:
        c = point.concurrency
        limits = httpx.Limits(max_connections=c + 1, max_keepalive_connections=c)
        transport = httpx.AsyncHTTPTransport(limits=limits)
        async with StreamClient(options, concurrency=c, transport=transport) as client:
            await run_pool(client, jobs, concurrency=c, t0=origin, on_record=records.append)

    asyncio.run(pool())
    return _as_measured(records, origin)


Runner = Callable[[str, Point, list[str], int], dict[str, Measured]]
RUNNERS: dict[str, Runner] = {
    "diagnose": run_diagnose,
    "aiohttp": run_aiohttp,
    HTTPCORE: run_httpcore,
}
FORCED = "diagnose×"  # "diagnose×2": collect's path with its process count forced to 2


def runner(client: str) -> Runner:
    """The function that measures with `client` (a RUNNERS name or diagnose×N)."""
    if not client.startswith(FORCED):
        return RUNNERS[client]
    count = int(client.removeprefix(FORCED))

    def forced(url: str, point: Point, prompts: list[str], tokens: int) -> dict[str, Measured]:
        return run_diagnose(url, point, prompts, tokens, processes=count)

    return forced


def server_truth(url: str) -> dict[str, Measured]:
    """prompt → decode tok/s on the server's own emit times, and those times (the server
    forgets them once read)."""
    emits = httpx.get(url + "/v1/emits", timeout=30).json()
    out = {}
    for prompt, e in emits.items():
        rate = decode_rate(e["times"], e["tokens"])
        if rate is not None:
            out[prompt] = Measured(rate, e["times"])
    return out


def _cpu_s(who: int) -> float:
    # This process runs only the client (the server has its own), so its CPU is the client's;
    # RUSAGE_CHILDREN adds the worker processes once joined (the server child never is).
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def _process_cpu_s(pid: int | None) -> float:
    """CPU seconds of another process so far (Linux /proc); 0 when unknown."""
    if pid is None:
        return 0.0
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(
    url: str,
    point: Point,
    client: str,
    rep: int,
    n: int,
    tokens: int,
    server_pid: int | None = None,
) -> RepResult:
    """One client's repetition at one point, matched request by request with the truth."""
    prompts = [f"{client}-{point.key}-{rep}-{i}" for i in range(n)]
    who = (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
    cpu0, server0, wall0 = [_cpu_s(w) for w in who], _process_cpu_s(server_pid), time.time()
    measured = runner(client)(url, point, prompts, tokens)
    parent, workers = (_cpu_s(w) - c for w, c in zip(who, cpu0, strict=True))
    wall = time.time() - wall0
    server = _process_cpu_s(server_pid) - server0
    truth = server_truth(url)
    chunks = n * -(-tokens // point.tpc)
    share = CpuShare(100 * parent / wall, 100 * workers / wall, 100 * server / wall)
    result = RepResult(client, cpu_us_per_chunk=(parent + workers) / chunks * 1e6, cpu=share)
    for prompt in prompts:
        seen, true = measured.get(prompt), truth.get(prompt)
        if seen is None or true is None:
            result.failed += 1
            continue
        result.true.append(true.tps)
        result.measured.append(seen.tps)
        if len(seen.arrivals) == len(true.arrivals):
            lags = zip(seen.arrivals, true.arrivals, strict=True)
            result.lags_ms += [(a - e) * 1e3 for a, e in lags]
    return result


@dataclass
class ClientRow:
    """One client's figures at one point: medians over repetitions of each repetition's median
    (what `collect` summarises per workload); p90 |error| and lag over all requests pooled."""

    tps: float
    error: float
    error_vs_nominal: float
    p90_abs_error: float
    lag_p50_ms: float
    lag_p99_ms: float
    cpu_us_per_chunk: float
    cpu: CpuShare | None
    failed: int


@dataclass
class Row:
    """One point of the table."""

    point: Point
    true: float
    true_vs_nominal: float
    clients: dict[str, ClientRow]


def _client_row(point: Point, reps: list[RepResult]) -> ClientRow:
    ok = [r for r in reps if r.true]
    errors = sorted(abs(e) for r in ok for e in r.errors())
    lags = sorted(lag for r in ok for lag in r.lags_ms)
    nan = float("nan")
    return ClientRow(
        tps=statistics.median(statistics.fmean(r.measured) for r in ok) if ok else nan,
        error=statistics.median(statistics.median(r.errors()) for r in ok) if ok else nan,
        error_vs_nominal=statistics.median(
            statistics.fmean(r.measured) / point.rate - 1 for r in ok
        )
        if ok
        else nan,
        p90_abs_error=errors[int(len(errors) * 0.9)] if errors else nan,
        lag_p50_ms=lags[len(lags) // 2] if lags else nan,
        lag_p99_ms=lags[int(len(lags) * 0.99)] if lags else nan,
        cpu_us_per_chunk=statistics.median(r.cpu_us_per_chunk for r in reps) if reps else nan,
        cpu=_median_share([r.cpu for r in reps if r.cpu is not None]),
        failed=sum(r.failed for r in reps),
    )


def _median_share(shares: list[CpuShare]) -> CpuShare | None:
    if not shares:
        return None
    return CpuShare(
        statistics.median(s.parent for s in shares),
        statistics.median(s.workers for s in shares),
        statistics.median(s.server for s in shares),
    )


def summarise(point: Point, reps: list[RepResult]) -> Row:
    """The row of one point: true rate = median over repetitions of the mean server rate."""
    true = statistics.median(statistics.fmean(r.true) for r in reps if r.true)
    names = list(dict.fromkeys(r.client for r in reps))
    clients = {c: _client_row(point, [r for r in reps if r.client == c]) for c in names}
    return Row(point, true, true / point.rate - 1, clients)


def table(rows: list[Row], clients: Sequence[str] = CLIENTS) -> str:
    """Markdown table; errors signed (+: the client saw a faster server than the truth)."""
    cols = [
        f"{c} tok/s (err; vs nominal) | {c} p90 abs err | {c} lag p50/p99 ms | {c} CPU µs/chunk"
        f" | {c} CPU % parent/workers/server"
        for c in clients
    ]
    head = "| tok/s per stream | tpc | streams | true tok/s (vs nominal) | " + " | ".join(cols)
    lines = [head + " | goal (diagnose) |", "|---:" * (4 + 5 * len(clients)) + "|---|"]
    for r in rows:
        cells = [
            f"{r.point.rate:g}",
            str(r.point.tpc),
            str(r.point.concurrency),
            f"{r.true:.1f} ({r.true_vs_nominal:+.2%})",
        ]
        for c in clients:
            cells += _client_cells(r.clients.get(c))
        lines.append("| " + " | ".join([*cells, _verdict(r)]) + " |")
    return "\n".join(lines)


def _verdict(row: Row) -> str:
    """The goal of the point against the diagnose column: median error, then p90 |error|."""
    goal, ours = row.point.goal(), row.clients.get("diagnose")
    if goal is None or ours is None:
        return ""
    median, p90 = goal
    met = abs(ours.error) * 100 < median and (p90 is None or ours.p90_abs_error * 100 < p90)
    text = f"< {median}%" + (f", p90 < {p90}%" if p90 is not None else "")
    return f"{text}: " + ("met" if met else "MISSED")


def _client_cells(x: ClientRow | None) -> list[str]:
    if x is None:
        return ["—"] * 5
    fail = f", {x.failed} failed" if x.failed else ""
    cpu = "—" if x.cpu is None else f"{x.cpu.parent:.0f} / {x.cpu.workers:.0f} / {x.cpu.server:.0f}"
    return [
        f"{x.tps:.1f} ({x.error:+.2%}; {x.error_vs_nominal:+.2%}{fail})",
        f"{x.p90_abs_error:.2%}",
        f"{x.lag_p50_ms:.2f} / {x.lag_p99_ms:.2f}",
        f"{x.cpu_us_per_chunk:.0f}",
        cpu,
    ]


def run_grid(
    server: tuple[int, str], points: list[Point], clients: Sequence[str], args: argparse.Namespace
) -> list[Row]:
    """Every point, every repetition, every client (the order rotates between repetitions);
    httpcore and forced process counts run only where there are several streams."""
    pid, url = server
    rows = []
    for point in points:
        n = args.requests if point.concurrency == 1 else args.waves * point.concurrency
        here = [c for c in clients if c in CLIENTS or point.concurrency > 1]
        reps: list[RepResult] = []
        for rep in range(args.reps):
            order = here[rep % len(here) :] + here[: rep % len(here)]
            reps += [measure(url, point, c, rep, n, args.tokens, pid) for c in order]
        rows.append(summarise(point, reps))
        print(table(rows[-1:], clients).splitlines()[-1], file=sys.stderr, flush=True)
        if args.json:
            raw = [asdict(r) for r in reps]
            _append_json(args.json, {"point": asdict(point), "reps": raw})
    return rows


def _append_json(path: Path, item: dict[str, Any]) -> None:
    data = json.loads(path.read_text()) if path.exists() else []
    data.append(item)
    path.write_text(json.dumps(data, indent=1))


def main(argv: list[str] | None = None) -> None:
    """Run the grid and print the table with the machine's load before and after."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--reps", type=int, default=5, help="repetitions per point")
    parser.add_argument("--tokens", type=int, default=256, help="max_tokens per request")
    parser.add_argument("--requests", type=int, default=3, help="requests per rep, 1 stream")
    parser.add_argument("--waves", type=int, default=2, help="requests per stream per rep")
    parser.add_argument("--stress", action="store_true", help="add 500 tok/s per stream")
    parser.add_argument("--only", default="", help="regex on point keys, e.g. 'c64$'")
    parser.add_argument("--json", type=Path, help="append raw per-request results here")
    parser.add_argument(
        "--ttft-ms", type=float, default=0.0, help="server wait between headers and 1st chunk"
    )
    parser.add_argument(
        "--httpcore", action="store_true", help=f"also measure {HTTPCORE} (the client before)"
    )
    parser.add_argument(
        "--processes",
        type=int,
        nargs="*",
        default=[],
        help=f"also measure collect's path with its process count forced ({FORCED}N)",
    )
    parser.add_argument(
        "--many-rates",
        type=float,
        nargs="+",
        default=[10.0],
        help="tok/s per stream at the many-stream points (--many)",
    )
    parser.add_argument(
        "--many", type=int, nargs="+", default=list(MANY), help="the many-stream counts"
    )
    args = parser.parse_args(argv)
    every = grid(args.stress, args.ttft_ms / 1000, args.many_rates, args.many)
    points = [p for p in every if re.search(args.only, p.key)]
    extra = [HTTPCORE] if args.httpcore else []
    clients = [*CLIENTS, *extra, *(f"{FORCED}{n}" for n in args.processes)]
    proc, url = spawn()
    try:
        for client in clients:  # warm-up: lazy imports of the sync and async paths
            for concurrency in (1, 2) if client in CLIENTS else (2,):
                measure(url, Point(1000.0, 1, concurrency), client, -concurrency, 2, 32)
        load0, t0 = os.getloadavg(), time.time()
        rows = run_grid((proc.pid, url), points, clients, args)
        load1 = os.getloadavg()
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    print(table(rows, clients))
    print(
        f"\n{len(points)} points x {args.reps} reps, {args.tokens} tokens/request, "
        f"first chunk {args.ttft_ms:g} ms after the headers, "
        f"{time.time() - t0:.0f} s; cores: {os.cpu_count()}; load average (1/5/15 min) "
        f"before {load0[0]:.2f}/{load0[1]:.2f}/{load0[2]:.2f}, "
        f"after {load1[0]:.2f}/{load1[1]:.2f}/{load1[2]:.2f}"
    )


if __name__ == "__main__":
    main()
