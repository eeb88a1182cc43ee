"""Benchmark: does telemetry sampling disturb the measurement? Client error with and without it.

Usage::

    python benchmarks/telemetry_overhead.py [--reps 3] [--requests 10] [--tokens 256]
                                            [--interval 0.1] [--json out.json]

Starts benchmarks/paced_server.py (a local OpenAI-compatible SSE server that records when each
chunk left) in its own process, then for each point (one stream at 500 and 2,000 tok/s, 16
streams at 100 tok/s each) and repetition runs `collect_run` — the code `diagnose collect`
and `sweep` run — twice into fresh bundles, telemetry off and on (NVML, where there is one,
and the host's psutil sampler, at --interval; the order alternates between repetitions). For
every request the client's decode tok/s (diagnostic.schema.requests.decode_tps on the stored
record) is compared with the server's own (the same formula on its emit times): the error is
client / server − 1. The table gives, per point and mode, the median over repetitions of the
median |error|, of the 90th percentile |error|, the collect process' CPU (% of one core over
the run) and, with telemetry on, the recorder process' CPU (% of one core over the run, its
start-up included) and its samples. Last, the recorder alone: the CPU of a start and stop,
and what sampling costs per second beyond it (20 s of sampling).
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).parent))

from paced_server import decode_rate, spawn  # noqa: E402

from diagnostic.bundle.store import Bundle  # noqa: E402
from diagnostic.common.progress import NullReporter  # noqa: E402
from diagnostic.measure.collect import RunSettings, collect_run  # noqa: E402
from diagnostic.measure.telemetry import TelemetrySettings, recording  # noqa: E402
from diagnostic.schema.bundle import Manifest, RunInfo  # noqa: E402
from diagnostic.schema.requests import decode_tps  # noqa: E402

POINTS = ((500.0, 1), (2000.0, 1), (100.0, 16))  # (tok/s per stream, streams)


@dataclass
class Result:
    """One run: a point, a mode, its errors and CPU."""

    rate: float
    streams: int
    telemetry: bool
    rep: int
    median_abs_error: float
    p90_abs_error: float
    requests: int
    client_cpu_pct: float  # collect's process, % of one core over the run's wall-clock
    recorder_cpu_pct: float  # the telemetry recorder process (a reaped child), % of one core
    samples: int  # telemetry rows written (0: off)
    wall_s: float


def run_once(
    url: str, rate: float, streams: int, on: bool, rep: int, args: argparse.Namespace
) -> Result:
    """One collect_run into a fresh bundle; errors against the server's emit times."""
    tag = f"r{rate:g}-c{streams}-{'on' if on else 'off'}-{rep}"
    n = args.requests * streams
    prompts = [f"{tag} prompt {i}" for i in range(n + 1)]  # unique: emits are keyed by prompt
    settings = RunSettings(
        base_url=url,
        workloads=[("bench", prompts)],
        requests=n,
        warmup=1,
        max_tokens=args.tokens,
        concurrency=streams,
        extra_body={"pace_rate": rate, "pace_tpc": 1},
        telemetry=TelemetrySettings(interval_s=args.interval) if on else None,
    )
    httpx.get(url + "/v1/emits", timeout=30)  # forget earlier runs' emits
    with tempfile.TemporaryDirectory() as tmp:
        bundle = Bundle.create(Path(tmp) / "b", Manifest(tool_version="bench"))
        self0, kids0 = resource.getrusage(resource.RUSAGE_SELF), _children()
        t0 = time.perf_counter()
        run = collect_run(bundle, RunInfo(arm="a", restart=0), settings, reporter=NullReporter())
        wall = time.perf_counter() - t0
        self1, kids1 = resource.getrusage(resource.RUSAGE_SELF), _children()
        records = [r for r in bundle.read_requests("a", 0).records if not r.warmup]
    emits = httpx.get(url + "/v1/emits", timeout=30).json()
    errors = []
    for record in records:
        e = emits.get(prompts[int(record.prompt_id.rsplit("-", 1)[1])])
        truth = decode_rate(e["times"], e["tokens"]) if e else None
        measured = decode_tps(record)
        if truth and measured:
            errors.append(abs(measured / truth - 1))
    cpu = (self1.ru_utime + self1.ru_stime) - (self0.ru_utime + self0.ru_stime)
    return Result(
        rate=rate,
        streams=streams,
        telemetry=on,
        rep=rep,
        median_abs_error=statistics.median(errors),
        p90_abs_error=statistics.quantiles(errors, n=10)[-1],
        requests=len(errors),
        client_cpu_pct=100 * cpu / wall,
        recorder_cpu_pct=100 * (kids1 - kids0) / wall,
        samples=sum(s.samples for s in run.telemetry.values()),
        wall_s=wall,
    )


def _children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def recorder_alone(interval_s: float, seconds: float) -> tuple[float, float, int]:
    """The recorder by itself: CPU seconds of a start and stop (no sampling time), and CPU %
    of one core while it samples for `seconds` beyond that; samples taken then."""
    settings = TelemetrySettings(interval_s=interval_s)
    costs = []
    samples = 0
    for hold in (0.0, seconds):
        with tempfile.TemporaryDirectory() as tmp:
            before = _children()
            with recording(Path(tmp), settings, origin=time.perf_counter(), server_pid=None) as rec:
                time.sleep(hold)
                assert rec is not None
                found = rec.stop()
            costs.append(_children() - before)
            samples = sum(s.samples for s in found.values())
    return costs[0], 100 * max(0.0, costs[1] - costs[0]) / seconds, samples


def table(results: list[Result]) -> str:
    """Median over repetitions per point and mode."""
    lines = [
        "| point | telemetry | median abs error | p90 abs error | collect CPU | recorder CPU "
        "| samples/run |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for rate, streams in dict.fromkeys([*POINTS, *((r.rate, r.streams) for r in results)]):
        for on in (False, True):
            rs = [r for r in results if (r.rate, r.streams, r.telemetry) == (rate, streams, on)]
            if not rs:
                continue

            def med(field: str, rs: list[Result] = rs) -> float:
                return statistics.median(getattr(r, field) for r in rs)

            lines.append(
                f"| {streams} × {rate:g} tok/s | {'on' if on else 'off'} "
                f"| {med('median_abs_error'):.3%} | {med('p90_abs_error'):.3%} "
                f"| {med('client_cpu_pct'):.1f}% | {med('recorder_cpu_pct'):.1f}% "
                f"| {med('samples'):.0f} |"
            )
    return "\n".join(lines)


def main() -> None:
    """Run the grid and print the table (and --json the raw results)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--requests", type=int, default=10, help="per stream")
    parser.add_argument("--tokens", type=int, default=256)
    parser.add_argument("--interval", type=float, default=0.1, help="seconds between samples")
    parser.add_argument("--json", type=Path)
    parser.add_argument(
        "--point", action="append", metavar="RATE:STREAMS", help="only these points (repeatable)"
    )
    args = parser.parse_args()
    proc, url = spawn()
    results = []
    try:
        points = [tuple(map(float, p.split(":"))) for p in args.point] if args.point else POINTS
        for rate, streams in ((r, int(c)) for r, c in points):
            for rep in range(args.reps):
                for on in (rep % 2 == 1, rep % 2 == 0):  # alternate which goes first
                    results.append(run_once(url, rate, streams, on, rep, args))
                    print(asdict(results[-1]), file=sys.stderr, flush=True)
    finally:
        proc.kill()
        proc.wait()
    print(table(results))
    start, steady, samples = recorder_alone(args.interval, 20.0)
    print(
        f"\nrecorder alone (interval {args.interval:g} s): start and stop {start:.2f} CPU s; "
        f"sampling {steady:.2f}% of one core ({samples} rows in 20 s)"
    )
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in results], indent=1))


if __name__ == "__main__":
    main()
