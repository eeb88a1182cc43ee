"""Crash safety against the real engine: SIGKILL `diagnose collect` at 20 random moments,
resume each time, and check that nothing completed is lost and nothing is duplicated."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from diagnostic.bundle.store import Bundle

ROOT = Path(__file__).parents[1]
KILLS = 20
REQUESTS, WARMUP, WORKLOADS = 6, 1, ("code", "prose")


def _collect(url: str, out: Path, *, resume: bool) -> subprocess.Popen[bytes]:
    args = [sys.executable, "-m", "diagnostic", "collect", url, "--out", str(out)]
    args += ["--workloads", ",".join(WORKLOADS), "--requests", str(REQUESTS)]
    args += ["--warmup", str(WARMUP), "--max-tokens", "8"]
    args += ["--resume"] if resume else []
    return subprocess.Popen(args, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _completed(out: Path) -> list[tuple[str, int]]:
    if not (out / "manifest.json").is_file():
        return []
    log = Bundle.open(out).read_requests("baseline", 0)
    return [(r.workload, r.seq) for r in log.records]


def _wait_for_records(out: Path, child: subprocess.Popen[bytes], lines: int) -> None:
    """Until the run's requests.jsonl holds `lines` lines (or collect has ended)."""
    records = out / "runs" / "baseline-r0" / "requests.jsonl"
    deadline = time.monotonic() + 300
    while child.poll() is None and time.monotonic() < deadline:
        if records.is_file() and records.read_bytes().count(b"\n") >= lines:
            return
        time.sleep(0.01)


def _verify_complete(out: Path) -> None:
    records = _completed(out)
    assert all(n == 1 for n in Counter(records).values()), f"{out}: a request recorded twice"
    assert set(records) == {(w, s) for w in WORKLOADS for s in range(WARMUP + REQUESTS)}


@pytest.mark.engine
@pytest.mark.slow
def test_twenty_kills_lose_nothing_and_duplicate_nothing(tmp_path: Path, llama_server: str) -> None:
    rng = random.Random(20261129)
    bundles = [tmp_path / "b0"]
    seen: list[tuple[str, int]] = []
    mid_run = 0  # kills that landed with some but not all requests recorded
    total = len(WORKLOADS) * (WARMUP + REQUESTS)
    for kill in range(KILLS):
        out = bundles[-1]
        child = _collect(llama_server, out, resume=(out / "manifest.json").is_file())
        if kill % 2:  # at a random moment: in start-up, mid-request or mid-write
            time.sleep(rng.uniform(0.3, 4.0))
        else:  # once 1-3 more records are stored: mid-run however slow the machine is
            _wait_for_records(out, child, min(len(seen) + rng.randint(1, 3), total - 1))
        if child.poll() is None:
            os.kill(child.pid, signal.SIGKILL)
        _, err = child.communicate()
        assert child.returncode in (0, -signal.SIGKILL), err.decode(errors="replace")
        done = _completed(out)  # the bundle opens after every kill, torn line or not
        assert set(seen) <= set(done), f"{out}: a completed request was lost"
        seen = done
        mid_run += child.returncode != 0 and 0 < len(done) < total
        if child.returncode == 0:  # finished before the kill: verify, go on with a new one
            _verify_complete(out)
            bundles.append(tmp_path / f"b{len(bundles)}")
            seen = []
    out = bundles[-1]
    final = _collect(llama_server, out, resume=(out / "manifest.json").is_file())
    _, err = final.communicate(timeout=1800)
    assert final.returncode == 0, err.decode(errors="replace")
    _verify_complete(out)
    assert set(seen) <= set(_completed(out))
    assert mid_run >= KILLS // 4, f"only {mid_run} kills landed mid-run: the test proves little"
