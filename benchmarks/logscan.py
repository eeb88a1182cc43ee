"""Benchmark: scan throughput of `diagnose check`'s log reader vs `grep -E` on one synthetic log.

Usage::

    python benchmarks/logscan.py [--size 1G] [--out /tmp/synthetic-vllm.log] [--keep]

Builds a synthetic multi-worker vLLM log (tensor parallel 4) from the real lines in
tests/data/real-runs/h200-vllm-0.26/ngram3/server.log: the start-up once (each worker's lines under
its own `(Worker_TPn pid=N)` prefix in ANSI colour, tqdm bars with `\\r`), then serving traffic
(uvicorn access lines, engine stats, SpecDecoding metrics, an occasional worker warning) up to
the requested size. Then it times, on the same file, in one run:

- the scan `diagnose check` does (`diagnostic.engines.parse_log`: prefilter + regexes, facts);
- `grep -nE` with the regexes the vLLM parser applies, joined into one alternation;

and prints a table with both throughputs and their ratio. The file is deleted unless --keep.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

REAL = ROOT / "tests" / "data" / "real-runs" / "h200-vllm-0.26" / "ngram3" / "server.log"
WORKERS = 4
_CORE_FILES = ("core.py", "kv_cache_utils.py", "vllm.py", "kernel.py")
_PREFIX = re.compile(rb"^\((?P<proc>\w+) pid=(?P<pid>\d+)\) ")
_COLOURS = (b"\x1b[1;36m", b"\x1b[1;33m", b"\x1b[1;35m", b"\x1b[1;32m")


def parse_size(text: str) -> int:
    """'200M', '1G', '4096' -> bytes."""
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    text = text.strip().upper().rstrip("B")
    if text and text[-1] in units:
        return int(float(text[:-1]) * units[text[-1]])
    return int(text)


def _startup(real: list[bytes]) -> list[bytes]:
    """Real start-up lines, the engine core's per-worker ones repeated for every TP worker."""
    out: list[bytes] = []
    for line in real:
        if b"Application startup complete" in line:
            out.append(line)
            break
        m = _PREFIX.match(line)
        is_worker_line = (
            m is not None
            and m["proc"] == b"EngineCore"
            and not any(f"[{name}:".encode() in line for name in _CORE_FILES)
        )
        if not is_worker_line:
            out.append(line.replace(b"tensor_parallel_size=1", b"tensor_parallel_size=4"))
            continue
        rest = line[m.end() :] if m else line
        for rank in range(WORKERS):
            if b"Capturing CUDA graphs" in rest and rank:
                continue  # vLLM draws capture bars on the first rank only
            prefix = b"%s(Worker_TP%d pid=%d)\x1b[0;0m " % (_COLOURS[rank], rank, 3000 + rank)
            out.append(prefix + rest)
    return out


def _traffic_block(rng: random.Random, real: list[bytes], minute: int) -> bytes:
    """~10 s of serving: access lines, one stats line, one SpecDecoding line, maybe a warning."""
    stats = next(line for line in real if b"Avg prompt throughput" in line)
    spec = next(line for line in real if b"SpecDecoding metrics" in line)
    warn = next(line for line in real if b"jit_monitor.py:135" in line)
    stamp = b"11-29 10:%02d:%02d" % (minute // 60 % 60, minute % 60)
    lines = [
        b'(APIServer pid=2565) INFO:     127.0.0.1:%d - "POST /v1/completions HTTP/1.1" 200 OK'
        % rng.randrange(30000, 65000)
        for _ in range(rng.randrange(150, 250))
    ]
    lines.append(re.sub(rb"\d\d-\d\d \d\d:\d\d:\d\d", stamp, stats))
    lines.append(re.sub(rb"\d\d-\d\d \d\d:\d\d:\d\d", stamp, spec))
    if rng.random() < 0.05:
        worker = b"\x1b[1;33m(Worker_TP%d pid=%d)\x1b[0;0m " % (1, 3001)
        lines.append(worker + warn[_PREFIX.match(warn).end() :])  # type: ignore[union-attr]
    return b"\n".join(lines) + b"\n"


def generate(path: Path, size: int, *, seed: int = 0) -> int:
    """Write a synthetic multi-worker vLLM log of at least `size` bytes; return its size."""
    real = REAL.read_bytes().split(b"\n")
    rng = random.Random(seed)
    blocks = [_traffic_block(rng, real, minute) for minute in range(64)]
    written = 0
    with open(path, "wb") as fh:
        head = b"\n".join(_startup(real)) + b"\n"
        fh.write(head)
        written += len(head)
        i = 0
        while written < size:
            fh.write(blocks[i % len(blocks)])
            written += len(blocks[i % len(blocks)])
            i += 1
    return written


# The vLLM parser's regexes (diagnostic/engines/vllm.py), as one ERE per signal: what
# `grep -E` needs to find the same lines. Keep in step with the parser when it learns a signal.
VLLM_ERES: tuple[str, ...] = (
    r"Capturing (CUDA graphs|cudagraphs|the model for CUDA graphs|[a-z -]+ CUDA graphs)",
    r"Graph capturing finished in [0-9]+ secs?",
    r"CUDAGraphMode\.[A-Z_]+ is not supported",
    r"setting cudagraph_mode=[A-Z_]+",
    r"[Oo]verriding cudagraph_mode",
    r"Cudagraph is disabled under eager mode",
    r"Enforce eager set",
    r"Skipping CUDA graph capture",
    r"Profiling CUDA graph memory",
    r"vLLM (API )?server version",
    r"Starting vLLM",
    r"(V[01] |an )LLM engine \(v[^)]+\) with config",
    r"non-default args: \{",
    r"speculative_model=",
    r"Model Runner",
    r"SpecDecoding metrics",
    r"Speculative metrics: Draft",
    r"WARNING",
    r"Using [A-Za-z_. ]+ backend",
)


def grep_pattern() -> str:
    """The regexes the vLLM parser and the vLLM pattern rules apply, as one ERE alternation."""
    from diagnostic.logcheck.rules import load_rules

    rules = [r for r in load_rules() if r.match and (not r.engines or "vllm" in r.engines)]
    literals = [_ere(c) for r in rules if r.match for c in r.match.contains]
    return "|".join([*VLLM_ERES, *literals])


def _ere(literal: str) -> str:
    """A literal as a POSIX ERE (re.escape also escapes spaces, which grep warns about)."""
    return re.sub(r"([.^$*+?()\[\]{}|\\])", r"\\\1", literal)


def time_scan(path: Path) -> tuple[float, float, str]:
    """Seconds for parse_log (with the rules' patterns, as `diagnose check` runs it)."""
    from diagnostic.engines import parse_log
    from diagnostic.logcheck.rules import line_patterns, load_rules

    patterns = line_patterns(load_rules())
    t0, c0 = time.perf_counter(), time.process_time()
    facts = parse_log(path, patterns=patterns)
    elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
    summary = (
        f"{facts.engine} {facts.version}, capture {facts.capture.configured} -> "
        f"{facts.capture.resolved}, {len(facts.workers)} workers, "
        f"{facts.acceptance_summary.samples if facts.acceptance_summary else 0} acceptance lines"
    )
    return elapsed, cpu, summary


def time_grep(path: Path) -> tuple[float, float, int]:
    """Wall and CPU seconds of `grep -naE PATTERN FILE`, and its match count."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(
        ["grep", "-naE", grep_pattern(), str(path)],
        stdout=subprocess.PIPE,
        check=False,
        env={**os.environ, "LC_ALL": "C"},
    )
    elapsed = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return elapsed, cpu, proc.stdout.count(b"\n")


def _warm(path: Path) -> None:
    """Read the file once so both scanners find it in the page cache."""
    with open(path, "rb") as fh:
        while fh.read(8 << 20):
            pass


def main(argv: list[str] | None = None) -> int:
    """Generate, time both scans once each (file already in the page cache), print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="1G", help="synthetic log size, e.g. 200M, 1G")
    parser.add_argument("--out", default="/tmp/synthetic-vllm.log", type=Path)
    parser.add_argument("--keep", action="store_true", help="keep the synthetic log")
    args = parser.parse_args(argv)
    size = generate(args.out, parse_size(args.size))
    try:
        _warm(args.out)
        grep_s, grep_cpu, grep_lines = time_grep(args.out)
        scan_s, scan_cpu, summary = time_scan(args.out)
    finally:
        if not args.keep:
            args.out.unlink(missing_ok=True)
    mb = size / 1e6
    print(f"synthetic log: {mb:,.0f} MB, {WORKERS} workers; scan found: {summary}")
    print(f"{'scanner':<32}{'wall s':>8}{'MB/s':>8}{'CPU s':>8}{'MB/s CPU':>10}")
    for name, wall, cpu in (
        ("grep -naE (equivalent regexes)", grep_s, grep_cpu),
        ("diagnose parse_log", scan_s, scan_cpu),
    ):
        print(f"{name:<32}{wall:>8.2f}{mb / wall:>8.0f}{cpu:>8.2f}{mb / cpu:>10.0f}")
    print(
        f"ratio parse_log / grep: {scan_s / grep_s:.2f}x wall, {scan_cpu / grep_cpu:.2f}x CPU "
        f"({grep_lines} lines matched by grep)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
