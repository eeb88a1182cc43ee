"""The Ray plan of docs/usage.md ("Ray across two nodes", samples/plans/vllm-ray-two-nodes.toml)
run for real on the loopback nodes of tests/sshd.py: Ray's head started on node1 and a worker
on node2 over ssh (node2 through the bastion), the server on the head in the foreground over
ssh (its output the run's `server` log), the worker node's Ray logs fetched over ssh, and
vLLM then Ray stopped on both nodes. The server is the real llama-server on the CPU, not vLLM
with tensor parallel over Ray (docs/remote.md says why). `ray stop --force` ends every Ray
process of this machine: both "nodes" are one machine."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest
from conftest import free_port
from sshd import Cluster, toml_value

from diagnostic.bundle.store import Bundle
from diagnostic.logcheck.stage import check_paths
from diagnostic.measure.launch import port_in_use
from diagnostic.measure.plan.spec import load_plan
from diagnostic.measure.sweep import sweep

pytestmark = pytest.mark.engine
RAY = Path(sys.executable).with_name("ray")  # scripts/setup --dev installs it into .venv
FLAGS = "-a gemma --host 127.0.0.1 -t 1 -tb 1 -c 2048 -np 1 --metrics"


def _ray_processes(gcs_port: int) -> list[int]:
    """Pids of the Ray processes of the cluster whose GCS listens on `gcs_port`."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            argv = cmdline.read_bytes()
        except OSError:
            continue
        if b"ray" in argv and f"{gcs_port}".encode() in argv:
            found.append(int(cmdline.parent.name))
    return found


def test_the_ray_plan_runs_on_two_loopback_nodes(
    ssh_nodes: Cluster, tmp_path: Path, real_env: None
) -> None:
    assert RAY.is_file(), f"{RAY} missing: run scripts/setup --dev (it installs ray)"
    assert shutil.which("ssh")
    c = ssh_nodes.ssh
    gcs = free_port()
    server, model = os.environ["LLAMA_SERVER"], os.environ["MODEL"]
    quiet = "RAY_USAGE_STATS_ENABLED=0"
    common = "--node-ip-address=127.0.0.1 --num-cpus=1 --disable-usage-stats"
    launch = (
        f"{c('node1')} '{quiet} {RAY} start --head --port={gcs} {common} "
        "--include-dashboard=false' && "
        f"{c('node2')} '{quiet} {RAY} start --address=127.0.0.1:{gcs} {common}' && "
        f"{c('node1')} 'RAY_DEDUP_LOGS=0 exec {server} -m {model} {FLAGS} --port {{port}}'"
    )
    # [l] keeps pkill from matching the remote shell that runs this very command line
    stop = (
        f"{c('node1')} 'pkill -f \"[l]lama-server .*--port {{port}}\"; {RAY} stop --force'; "
        f"{c('node2')} '{RAY} stop --force'"
    )
    logs = {"gpu2": f"{c('node2')} 'cat /tmp/ray/session_latest/logs/raylet*.out'"}
    plan_file = tmp_path / "ray.toml"
    plan_file.write_text(
        "\n".join(
            [
                "[plan]",
                "restarts = 1",
                "requests = 2",
                "warmup = 1",
                "max_tokens = 16",
                'workloads = ["code"]',
                f"port = {free_port()}",
                "health_timeout_s = 300",
                "command_timeout_s = 120",
                "seed = 3",
                f"health = {toml_value('curl -sf http://127.0.0.1:{port}/health')}",
                "logs = { " + ", ".join(f"{k} = {toml_value(v)}" for k, v in logs.items()) + " }",
                f"stop = {toml_value(stop)}",
                "",
                "[[arms]]",
                'name = "baseline"',
                f"launch = {toml_value(launch)}",
                "speculative = false",
                "",
            ]
        )
    )
    plan = load_plan(plan_file)
    port = plan.options.port
    out = tmp_path / "b"
    try:
        summary = sweep(plan, out=out)
    finally:
        leftover = _ray_processes(gcs)
    assert [o.status for o in summary.outcomes] == ["ok"], summary.outcomes
    assert not leftover, f"Ray processes left running: {leftover}"
    assert not port_in_use("127.0.0.1", port)

    bundle = Bundle.open(out)
    info = bundle.find_run("baseline", 0)
    assert info is not None and info.status == "ok" and not info.log_errors
    logs_kept = bundle.log_sources(info)
    assert set(logs_kept) == {"server", "gpu2"}
    server_log = logs_kept["server"].read_text()
    assert "Ray runtime started" in server_log  # the head's ray start, over ssh
    assert f"listening on http://127.0.0.1:{port}\n" in server_log
    assert logs_kept["gpu2"].read_text().strip()  # the worker node's raylet log
    report = check_paths([out])
    engines = {r.source: r.engine for r in report.runs}
    assert engines["server"] == "llamacpp"  # the server's output, through ray's own lines
