"""Issue 46: every place a launch command, an environment or a server's text enters a bundle,
and the report made from it, keeps no secret. A real sweep launches a real server process
(benchmarks/paced_server.py) with secrets as the values of options no engine lists and of
environment variables no list names; a collect measures a server whose /metrics labels, info
answers and 500 error bodies quote secrets. The secrets are plain words: only the structure
says they are secrets, so only redaction by construction masks them."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import sse_server as srv
from click.testing import CliRunner
from conftest import free_port

from diagnostic.cli import main

ROOT = Path(__file__).parents[1]
SERVER = f"{sys.executable} {ROOT / 'benchmarks' / 'paced_server.py'} --port {{port}}"


def _files_holding(folder: Path, secrets: list[str]) -> list[str]:
    found = []
    for path in folder.rglob("*"):
        if path.is_file():
            text = path.read_bytes().decode("utf-8", "replace")
            found += [f"{path.relative_to(folder)}: {s}" for s in secrets if s in text]
    return found


def _first_then(first: srv.Reply, then: srv.Reply) -> srv.Reply:
    """The first request answered by `first` (the pre-flight probe), the others by `then`."""
    calls = [0]

    def reply(conn: Any, server: srv.Server) -> bool:
        calls[0] += 1
        return (first if calls[0] == 1 else then)(conn, server)

    return reply


def test_a_sweeps_launch_and_environment_keep_no_secret(tmp_path: Path) -> None:
    secrets = ["quillmarchdune", "harborfoxglove", "lanternmoss", "velvetquarry"]
    port = free_port()
    probe = tmp_path / "health.py"
    probe.write_text(
        "import sys, urllib.request\n"
        "urllib.request.urlopen(f'http://127.0.0.1:{sys.argv[1]}/health', timeout=2)\n"
    )
    launch = (
        f"true --license {secrets[0]} --deploy-thing={secrets[1]}; "
        f"LOCAL_SETTING={secrets[2]} exec {SERVER}"
    )
    plan = tmp_path / "plan.toml"
    plan.write_text(
        "[plan]\nrestarts = 1\nrequests = 1\nwarmup = 0\nmax_tokens = 4\n"
        f'workloads = ["code"]\nport = {port}\nhealth_timeout_s = 60\n'
        f'[[arms]]\nname = "baseline"\nlaunch = "{launch}"\n'
        f'env = {{ MY_SERVICE_VALUE = "{secrets[3]}", CUDA_VISIBLE_DEVICES = "0" }}\n'
        f'health = "{sys.executable} {probe} {{port}}"\n'
    )
    swept = tmp_path / "swept"
    result = CliRunner().invoke(main, ["sweep", str(plan), "-o", str(swept)])
    assert result.exit_code == 0, result.output
    manifest = json.loads((swept / "manifest.json").read_text())
    arm = manifest["plan"]["arms"][0]
    assert arm["env"] == {"MY_SERVICE_VALUE": "<redacted>", "CUDA_VISIBLE_DEVICES": "0"}
    assert "--license <redacted>" in arm["launch"] and "--port" in arm["launch"]
    report = tmp_path / "report.html"
    result = CliRunner().invoke(main, ["report", str(swept), "-o", str(report), "--format", "html"])
    assert report.is_file(), result.output
    assert _files_holding(swept, secrets) == []
    assert _files_holding(tmp_path / "report.html", secrets) == [] or not report.is_file()
    assert not [s for s in secrets if s in report.read_text()]


def test_metrics_labels_info_answers_and_error_bodies_keep_no_secret(tmp_path: Path) -> None:
    key, token, password = "Zx9Kq2vB7mN4pL8wR3tYc5", "sk-proj-Qm4Lk8Jh2Gf6Ds1Ap9Zx7Cv", "h4rb0rF0x!"
    metrics = (
        "# TYPE vllm:cache_config_info gauge\n"
        f'vllm:cache_config_info{{api_key="{key}",block_size="16"}} 1.0\n'
        f'vllm:server_info{{args="--api-key \\"{token}\\" --port 8000"}} 1.0\n'
    ).encode()
    info = json.dumps(
        {
            "server_args": f"vllm serve m --api-key {key} --port 8000",
            "config": json.dumps({"db_url": f"postgres://app:{password}@db:5432/x"}),
        }
    ).encode()
    error = json.dumps({"error": {"message": f"Incorrect API key provided: {token}"}}).encode()
    models = json.dumps({"data": [{"id": "m"}]}).encode()
    routes = {
        "/v1/models": srv.answer(models),
        "/metrics": srv.answer(metrics),
        "/get_server_info": srv.answer(info),
        "/v1/completions": _first_then(srv.normal(4), srv.error(500, error)),
    }
    collected = tmp_path / "collected"
    with srv.serving(srv.routed(routes)) as fake:
        args = [fake.url, "-o", str(collected), "--workloads", "code", "--requests", "1"]
        args += ["--warmup", "0", "--max-tokens", "4"]
        CliRunner().invoke(main, ["collect", *args])
    assert (collected / "manifest.json").is_file()
    texts = "".join(p.read_text(errors="replace") for p in collected.rglob("*") if p.is_file())
    assert "cache_config_info" in texts or "get_server_info" in texts  # the answers were kept
    assert _files_holding(collected, [key, token, password]) == []
