"""Issue 34: the secret shapes a server prints reach no file of the bundle, through both
paths the issue found them on: a sweep's launch output (redacted line by line as it is
written) and `collect --log` (a whole file copied). The happy path is a real server process:
benchmarks/paced_server.py, started by the sweep's launch command after it prints the shapes."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import sse_server as srv
from click.testing import CliRunner
from conftest import free_port

from diagnostic.cli import main

ROOT = Path(__file__).parents[1]
SHAPES = [
    json.loads(line)
    for line in (ROOT / "tests" / "data" / "secrets" / "shapes.jsonl").read_text().splitlines()
]


def _printed(tmp_path: Path) -> Path:
    """A server log holding every shape, each between ordinary lines, as a server prints it."""
    log = tmp_path / "printed.log"
    lines = []
    for case in SHAPES:
        lines += ["INFO 12-02 12:00:00 [api_server.py:1] starting", case["text"], "INFO ok"]
    log.write_text("\n".join(lines) + "\n")
    return log


def _leaks(bundle: Path) -> list[str]:
    texts = [p.read_bytes().decode("utf-8", "replace") for p in bundle.rglob("*") if p.is_file()]
    return sorted({c["shape"] for c in SHAPES for s in c["secrets"] for t in texts if s in t})


def test_shapes_printed_by_a_sweep_launch_and_copied_by_collect_reach_no_file(
    tmp_path: Path,
) -> None:
    log, port = _printed(tmp_path), free_port()
    server = f"{sys.executable} {ROOT / 'benchmarks' / 'paced_server.py'} --port {{port}}"
    probe = tmp_path / "health.py"  # the paced server streams only: ready when /health is
    probe.write_text(
        "import sys, urllib.request\n"
        "urllib.request.urlopen(f'http://127.0.0.1:{sys.argv[1]}/health', timeout=2)\n"
    )
    plan = tmp_path / "plan.toml"
    plan.write_text(
        "[plan]\nrestarts = 1\nrequests = 1\nwarmup = 0\nmax_tokens = 4\n"
        f'workloads = ["code"]\nport = {port}\nhealth_timeout_s = 60\n'
        f'[[arms]]\nname = "baseline"\nlaunch = "cat {log}; exec {server}"\n'
        f'health = "{sys.executable} {probe} {{port}}"\n'
    )
    swept = tmp_path / "swept"
    result = CliRunner().invoke(main, ["sweep", str(plan), "-o", str(swept)])
    assert result.exit_code == 0, result.output
    server_log = next(swept.rglob("server.log")).read_text()
    assert server_log.count("INFO ok") == len(SHAPES)  # the whole output went through
    assert _leaks(swept) == []

    collected = tmp_path / "collected"
    models = json.dumps({"data": [{"id": "m"}]}).encode()
    routes = {"/v1/models": srv.answer(models), "/v1/completions": srv.normal(4)}
    with srv.serving(srv.routed(routes)) as fake:
        args = [fake.url, "-o", str(collected), "--workloads", "code", "--requests", "1"]
        args += ["--warmup", "0", "--max-tokens", "4", "--log", f"server={log}"]
        result = CliRunner().invoke(main, ["collect", *args])
    assert result.exit_code == 0, result.output
    assert _leaks(collected) == []
