"""Issue 24's attacks through the real collection path, against a real llama-server: URL
credentials, secrets in prompts and prompt ids, a server killed mid-run and resumed."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import free_port

from diagnostic.bundle.store import Bundle
from diagnostic.cli import main
from diagnostic.common.progress import NullReporter
from diagnostic.measure.collect import CollectConfig, collect
from diagnostic.schema.requests import latest_attempts

ROOT = Path(__file__).parents[1]
SCRIPT = ROOT / "scripts" / "real-server"
CORPUS = [
    json.loads(line)
    for line in (ROOT / "tests" / "data" / "secrets" / "corpus.jsonl").read_text().splitlines()
]


def _server(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPT), *args], capture_output=True, text=True, timeout=300, check=False
    )


@pytest.mark.engine
def test_credentials_in_the_url_are_refused_and_never_stored(
    tmp_path: Path, llama_server: str
) -> None:
    url = llama_server.replace("http://", "http://alice:pw-Zq9vXw7Lk3@")
    out = tmp_path / "b"
    result = CliRunner().invoke(main, ["collect", url, "--out", str(out), "--requests", "1"])
    assert result.exit_code == 2 and "Traceback" not in result.output
    text = result.output.strip()
    assert text.startswith("Error: ") and "\n" not in text
    assert "pw-Zq9vXw7Lk3" not in text and llama_server in text and "--api-key-env" in text
    assert not out.exists()


@pytest.mark.engine
def test_secrets_in_prompts_and_ids_reach_no_file_of_the_bundle_or_report(
    tmp_path: Path, llama_server: str
) -> None:
    prompts = tmp_path / "secrets.jsonl"
    lines = [
        {"id": case["text"], "prompt": f"Repeat exactly: {case['text']}\n{case['text']}"}
        for case in CORPUS
    ]
    prompts.write_text("".join(json.dumps(line) + "\n" for line in lines))
    out = tmp_path / "b"
    config = CollectConfig(
        base_url=llama_server,
        out=out,
        prompts=[prompts],
        requests=len(CORPUS),
        warmup=0,
        max_tokens=48,
    )
    assert collect(config, reporter=NullReporter()).status == "ok"
    report = tmp_path / "r.html"
    result = CliRunner().invoke(main, ["report", str(out), "-o", str(report)])
    assert result.exit_code == 0, result.output
    texts = [p.read_bytes().decode("utf-8", "replace") for p in out.rglob("*") if p.is_file()]
    texts.append(report.read_text())
    records = Bundle.open(out).read_requests("baseline", 0).records
    leaked = sorted({c["shape"] for c in CORPUS for t in texts if _found(c["secret"], t)})
    assert leaked == []
    assert all("<redacted>" in r.prompt_id for r in records)


def _found(secret: str, text: str) -> bool:
    """The secret in a file's text. A numeric one must stand as a number of its own: `4321`
    occurs by chance inside the digits of timings such as 1.2432110869995086."""
    if not secret.isdigit():
        return secret in text
    return re.search(rf"(?<![0-9.]){secret}(?![0-9])", text) is not None


class _KillAfter(NullReporter):
    """SIGKILLs the server a moment after the n-th measured record is stored, so it dies in
    the middle of the next stream."""

    def __init__(self, pid: int, records: int) -> None:
        self.pid, self.left = pid, records

    def advance(self, label: str, steps: int = 1, status: str | None = None) -> None:
        if status is not None and "warm-up" not in status and "already" not in status:
            self.left -= steps
            if self.left == 0:
                threading.Timer(0.3, os.kill, (self.pid, signal.SIGKILL)).start()


@pytest.mark.engine
def test_a_server_killed_mid_run_stops_collect_and_resume_retries_the_failures(
    tmp_path: Path,
) -> None:
    port = free_port()
    started = _server("start", "--port", str(port))
    assert started.returncode == 0, started.stderr
    url = started.stdout.strip().splitlines()[-1]
    try:
        found = re.search(r"pid (\d+)", _server("status", "--port", str(port)).stdout)
        assert found, "scripts/real-server status names no pid"
        pid = int(found[1])
        config = CollectConfig(
            base_url=url, out=tmp_path / "b", workloads=["code"], requests=10, max_tokens=96
        )
        first = collect(config, reporter=_KillAfter(pid, 2))
        assert first.status == "failed"
        why = first.failure or ""
        assert "stopped answering" in why and "--resume" in why
        stored = Bundle.open(tmp_path / "b").read_requests("baseline", 0).records
        failed = [r for r in stored if r.error]
        assert failed and len(stored) < 11  # the run stopped: the rest was never fired
        assert (failed[-1].error or "").startswith("cannot connect")

        _server("stop", "--port", str(port))
        assert _server("start", "--port", str(port)).returncode == 0
        again = collect(config.model_copy(update={"resume": True}), reporter=NullReporter())
        assert again.status == "ok", again.failure
        records = Bundle.open(tmp_path / "b").read_requests("baseline", 0).records
        measured = [r for r in latest_attempts(records) if not r.warmup]
        assert len(measured) == 10 and all(r.error is None for r in measured)
        assert sorted(r.seq for r in measured) == list(range(1, 11))
        for r in failed:  # failures stay recorded; each retried as the next attempt
            assert r in records and r.attempt == 1
            if not r.warmup:
                assert any(x.seq == r.seq and x.attempt == 2 and not x.error for x in records)
        warmups = [r for r in records if r.warmup]
        assert max(r.attempt for r in warmups) == 2  # the new process was warmed up
        assert again.workloads[0].requests == 10 and again.workloads[0].failures == 0
    finally:
        _server("stop", "--port", str(port))
