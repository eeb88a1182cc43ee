"""The sweep across real SSH: two nodes behind real sshd processes (node2 through a bastion,
ProxyJump), the real llama-server launched, logged, sampled and stopped over ssh; the faults
that come over the wire. The plans are written as a consultant writes them (docs/usage.md
"Clusters"): the system `ssh`, the site's ssh_config (here `-F`, a throw-away one)."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest
from conftest import ROOT, free_port, run_diagnose
from sshd import Cluster, toml_value
from test_sweep import Recorder

from diagnostic.bundle.store import Bundle
from diagnostic.logcheck.stage import check_paths
from diagnostic.measure.launch import port_in_use, run_shell
from diagnostic.measure.plan.spec import Plan, load_plan
from diagnostic.measure.sweep import SweepResult, sweep
from diagnostic.measure.sweep.nodes import check_nodes
from diagnostic.report import render_html, report_context

pytestmark = pytest.mark.engine
TELEMETRY = ROOT / "tests" / "data" / "telemetry" / "nvidia-smi-documented.csv"
FLAGS = "-a gemma --host 127.0.0.1 -t 1 -tb 1 -c 2048 -np 1 --metrics"


def node_dir(cluster: Cluster, node: str, name: str) -> Path:
    """A folder on `node` (the same machine here: a folder per node and test)."""
    path = cluster.root / "nodes" / name / node
    path.mkdir(parents=True, exist_ok=True)
    return path


def ssh_plan(
    cluster: Cluster,
    tmp_path: Path,
    name: str,
    *,
    logs: dict[str, str] | None = None,
    stop: str | None = None,
    secret: str = "",
    **options: object,
) -> Plan:
    """A one-arm plan that launches llama-server on node1 and node2 over ssh (each in the
    background with its pid, appending to its log in the node's folder), waits for both,
    fetches both logs (or runs `logs`, node -> command on the node), samples node1's
    telemetry and stops both over ssh (or runs `stop`). A `secret` goes into the launch as
    HF_TOKEN, both on this machine and on the node."""
    server, model = os.environ["LLAMA_SERVER"], os.environ["MODEL"]
    one, two = node_dir(cluster, "node1", name), node_dir(cluster, "node2", name)

    def on(node: str, command: str) -> str:
        return f"{cluster.ssh(node)} {shlex.quote(command)}"

    token = f"HF_TOKEN={secret} " if secret else ""

    def serve(folder: Path, port: str) -> str:
        return token + on(
            folder.name,
            f"{token}nohup {server} -m {model} {FLAGS} --port {port} >> {folder}/server.log 2>&1 "
            f"< /dev/null & echo $! > {folder}/server.pid",
        )

    settings: dict[str, object] = {
        "restarts": 1,
        "requests": 2,
        "warmup": 1,
        "max_tokens": 16,
        "workloads": ["code"],
        "port": free_port(),
        "health_timeout_s": 300,
        "command_timeout_s": 60,
        "seed": 3,
    }
    settings.update(options)
    health = "curl -sf http://127.0.0.1:{port}/health && curl -sf http://127.0.0.1:{port+1}/health"
    stop = stop or "; ".join(
        on(
            f.name,
            f"kill $(cat {f}/server.pid) && while kill -0 $(cat {f}/server.pid); "
            "do sleep 0.1; done 2>/dev/null",
        )
        for f in (two, one)  # node1 last: its exit status is the stop's
    )
    lines = [f"{k} = {toml_value(v)}" for k, v in settings.items()]
    lines += [
        f"health = {toml_value(health)}",
        f"stop = {toml_value(stop)}",
        "logs = { "
        + ", ".join(
            f"{f.name} = {toml_value(on(f.name, (logs or {}).get(f.name, f'cat {f}/server.log')))}"
            for f in (one, two)
        )
        + " }",
        f"telemetry = {{ node1 = {toml_value(on('node1', f'cat {TELEMETRY}'))} }}",
    ]
    launch = f"{serve(one, '{port}')} && {serve(two, '{port+1}')}"
    arm = f'[[arms]]\nname = "baseline"\nlaunch = {toml_value(launch)}\nspeculative = false\n'
    path = tmp_path / f"{name}.toml"
    path.write_text("[plan]\n" + "\n".join(lines) + "\n\n" + arm)
    return load_plan(path)


# -- the cluster itself -------------------------------------------------------------------------


def test_nodes_answer_over_ssh_and_node2_through_the_bastion(ssh_nodes: Cluster) -> None:
    for host in ("node1", "node2"):
        done = ssh_nodes.run(host, "echo $SSH_CONNECTION")
        assert done.returncode == 0, done.stderr
        # the server's port is the node's own sshd: node2's connection came through the bastion
        assert done.stdout.split()[-1] == str(ssh_nodes.nodes[host].port)


def test_a_changed_host_key_is_refused_and_said(ssh_nodes: Cluster) -> None:
    result = run_shell(f"{ssh_nodes.ssh('rekeyed')} true", env={}, timeout_s=30)
    assert result.returncode == 255
    assert "Host key verification failed" in result.stderr_tail


def test_a_password_prompt_never_hangs_a_plan_command(ssh_nodes: Cluster) -> None:
    # `nokey` offers a key node1 does not accept, with BatchMode off and passwords allowed:
    # a plan command has no terminal to prompt on, so ssh gives up instead of waiting.
    result = run_shell(f"{ssh_nodes.ssh('nokey')} true", env={}, timeout_s=30)
    assert result.returncode == 255
    assert "Permission denied" in result.stderr_tail


# -- a sweep across the nodes -------------------------------------------------------------------


def test_a_sweep_launches_logs_samples_and_stops_both_nodes_over_ssh(
    ssh_nodes: Cluster, tmp_path: Path, real_env: None
) -> None:
    plan = ssh_plan(ssh_nodes, tmp_path, "sweep")
    port = plan.options.port
    out = tmp_path / "b"
    summary = sweep(plan, out=out)
    assert [o.status for o in summary.outcomes] == ["ok"], summary.outcomes
    assert not port_in_use("127.0.0.1", port) and not port_in_use("127.0.0.1", port + 1)

    bundle = Bundle.open(out)
    info = bundle.find_run("baseline", 0)
    assert info is not None and info.status == "ok" and not info.log_errors
    logs = bundle.log_sources(info)
    assert f"listening on http://127.0.0.1:{port}\n" in logs["node1"].read_text()
    assert f"listening on http://127.0.0.1:{port + 1}\n" in logs["node2"].read_text()
    assert logs["node1"].read_text().count("print_timing") >= 3  # taken after the last request
    assert info.telemetry is not None and info.telemetry["node1"].samples > 0

    report = check_paths([out])
    [table] = report.log_sources
    assert [s.source for s in table.sources] == ["node1", "node2"]
    assert not table.differences
    ctx = report_context(bundle, check=report)
    assert ctx.node_table is not None  # the capture chapter's table of nodes
    assert [row[1] for row in ctx.node_table.rows] == ["node1", "node2"]
    html = render_html(ctx)
    assert all(f"<td>{cell}</td>" in html for row in ctx.node_table.rows for cell in row[:2])


# -- faults over the wire -----------------------------------------------------------------------


def test_a_stop_that_leaves_the_server_running_fails_the_run_plainly_and_no_secret_shows(
    ssh_nodes: Cluster, tmp_path: Path, real_env: None
) -> None:
    # the stop command reaches node1 and ends with 0, but stops nothing: the servers answer on
    token, password = "hf_" + "aB3dE5" * 6, "s3cr3t-of-the-site-0042"
    stop = f"{ssh_nodes.ssh('node1')} 'API_KEY={password} true'"
    plan = ssh_plan(ssh_nodes, tmp_path, "nostop", stop=stop, secret=token)
    out = tmp_path / "b"
    recorder = Recorder()
    try:
        [outcome] = sweep(plan, out=out, reporter=recorder, grace_s=2).outcomes
        assert outcome.status == "failed"
        assert outcome.failure == (
            "the stop command failed on node1: it ended with exit 0, but its port "
            f"127.0.0.1:{plan.options.port} still answers 2 s later: the server still runs; "
            "stop it there by hand before the next start: "
            f"{ssh_nodes.ssh('node1')} 'API_KEY=<redacted> true'"
        )
        info = Bundle.open(out).find_run("baseline", 0)
        assert info is not None and info.status == "failed" and info.failure == outcome.failure
        assert info.launch is not None and "HF_TOKEN=<redacted> ssh " in info.launch.command
        assert "'HF_TOKEN=<redacted> nohup " in info.launch.command
        files = [p.read_bytes() for p in out.rglob("*") if p.is_file()]
        said = [*recorder.notes, *recorder.statuses, outcome.failure]
        assert not any(s.encode() in f for s in (token, password) for f in files)
        assert not any(s in line for s in (token, password) for line in said)
    finally:
        for node in ("node1", "node2"):
            ssh_nodes.run(node, f"kill $(cat {node_dir(ssh_nodes, node, 'nostop')}/server.pid)")


def _sweep_until_measuring(plan: Plan, out: Path) -> subprocess.Popen[bytes]:
    """`diagnose sweep PLAN -o OUT` in a child process, returned once its first request is
    recorded: both remote servers run and answer."""
    child = subprocess.Popen(
        [sys.executable, "-m", "diagnostic", "sweep", plan.source, "-o", str(out)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    records = out / "runs" / "baseline-r0" / "requests.jsonl"
    deadline = time.monotonic() + 600  # a hang guard: a loaded CPU serves slowly
    while not (records.is_file() and records.read_text().count("\n") >= 1):
        assert child.poll() is None, "the sweep ended before it measured"
        assert time.monotonic() < deadline, "no request recorded within 600 s"
        time.sleep(0.05)
    return child


def _wait_measuring(out: Path, running: Future[SweepResult]) -> None:
    """Return once the run's first request is recorded (both remote servers answer)."""
    records = out / "runs" / "baseline-r0" / "requests.jsonl"
    deadline = time.monotonic() + 600  # a hang guard: a loaded CPU serves slowly
    while not (records.is_file() and records.read_text().count("\n") >= 1):
        assert not running.done(), f"the sweep ended before it measured: {running.result()}"
        assert time.monotonic() < deadline, "no request recorded within 600 s"
        time.sleep(0.05)


def _alive(pid: int) -> bool:
    """Whether process `pid` runs (a zombie does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _pid(cluster: Cluster, name: str, node: str) -> int:
    return int((node_dir(cluster, node, name) / "server.pid").read_text())


def test_a_sweep_killed_outright_leaves_the_remote_server_and_resume_stops_it_first(
    ssh_nodes: Cluster, tmp_path: Path, real_env: None
) -> None:
    plan = ssh_plan(ssh_nodes, tmp_path, "sigkill")
    out = tmp_path / "b"
    child = _sweep_until_measuring(plan, out)
    child.kill()
    child.wait()
    orphans = [_pid(ssh_nodes, "sigkill", node) for node in ("node1", "node2")]
    # a remote server does not die with the local process: both still run
    assert all(_alive(pid) for pid in orphans)

    recorder = Recorder()
    summary = sweep(plan, out=out, resume=True, reporter=recorder, grace_s=2)
    assert [o.status for o in summary.outcomes] == ["ok"], summary.outcomes
    assert (
        "baseline-r0 was left running: running the plan's stop command before anything "
        "starts" in recorder.notes
    )
    assert not any(_alive(pid) for pid in orphans)
    info = Bundle.open(out).find_run("baseline", 0)
    assert info is not None and info.status == "ok" and info.attempts == 2
    # measured afresh on the new servers; the killed attempt's records kept apart
    assert (out / "runs" / "baseline-r0" / "requests.attempt1.jsonl").is_file()
    assert all(_pid(ssh_nodes, "sigkill", n) not in orphans for n in ("node1", "node2"))


def test_a_sweep_stopped_with_sigterm_runs_the_stop_command_over_ssh(
    ssh_nodes: Cluster, tmp_path: Path, real_env: None
) -> None:
    plan = ssh_plan(ssh_nodes, tmp_path, "sigterm")
    out = tmp_path / "b"
    child = _sweep_until_measuring(plan, out)
    servers = [_pid(ssh_nodes, "sigterm", node) for node in ("node1", "node2")]
    child.send_signal(signal.SIGTERM)
    assert child.wait(timeout=300) != 0
    assert not any(_alive(pid) for pid in servers)
    info = Bundle.open(out).find_run("baseline", 0)
    assert info is not None and info.status == "interrupted"
    assert "SIGTERM" in (info.failure or "")


def test_sshd_killed_mid_run_fails_the_run_naming_node_and_command_and_resume_finishes(
    ssh_nodes: Cluster, tmp_path: Path, real_env: None
) -> None:
    # answers long enough that node1's sshd dies while the run still measures
    plan = ssh_plan(ssh_nodes, tmp_path, "sshd", max_tokens=48)
    out = tmp_path / "b"
    node1 = ssh_nodes.nodes["node1"]
    try:
        with ThreadPoolExecutor(1) as pool:
            running = pool.submit(sweep, plan, out=out, grace_s=2)
            _wait_measuring(out, running)
            node1.kill()
            [outcome] = running.result(timeout=600).outcomes
        assert outcome.status == "failed"
        failure = outcome.failure or ""
        assert failure.startswith("the stop command failed on node2, node1 (exit 255: ")
        assert "Connection refused" in failure and f"{ssh_nodes.ssh('node1')} " in failure
        info = Bundle.open(out).find_run("baseline", 0)
        assert info is not None and info.status == "failed" and info.failure == failure
        assert info.log_errors["node1"].startswith("after the last request: exit 255")
        records = Bundle.open(out).read_requests("baseline", 0).records
        assert len(records) == 3 and all(r.error is None for r in records)  # nothing lost
        orphan = _pid(ssh_nodes, "sshd", "node1")
        assert _alive(orphan)  # the stop never reached node1
    finally:
        node1.start()
    recorder = Recorder()
    summary = sweep(plan, out=out, resume=True, reporter=recorder, grace_s=2)
    assert [o.status for o in summary.outcomes] == ["ok"], summary.outcomes
    assert "baseline-r0 was left failed: running the plan's stop command" in " ".join(
        recorder.notes
    )
    assert not _alive(orphan)
    info = Bundle.open(out).find_run("baseline", 0)
    assert info is not None and info.status == "ok" and info.attempts == 2
    kept = out / "runs" / "baseline-r0" / "requests.attempt1.jsonl"
    assert kept.read_text().count("\n") == 3


def test_a_node_log_of_a_gigabyte_is_cut_to_its_tail_and_a_rotated_one_kept_whole(
    ssh_nodes: Cluster, tmp_path: Path, real_env: None
) -> None:
    # node1's log grows past a gigabyte of an earlier day's lines by the second fetch (made
    # on the fly, not written to disk); node2's is rotated (copytruncate) while the run
    # measures. Only the last MiB of node1's is kept, from a whole line on.
    one, two = node_dir(ssh_nodes, "node1", "big"), node_dir(ssh_nodes, "node2", "big")
    old_day = f"test -e {one}/fetched && yes '0.00.000.000 I a line of an earlier day' | head -c 1G"
    logs = {"node1": f"{old_day}; touch {one}/fetched; cat {one}/server.log"}
    plan = ssh_plan(ssh_nodes, tmp_path, "big", logs=logs, log_keep_bytes=1 << 20, max_tokens=48)
    port = plan.options.port
    out = tmp_path / "b"
    with ThreadPoolExecutor(1) as pool:
        running = pool.submit(sweep, plan, out=out)
        _wait_measuring(out, running)
        rotate = f"cp {two}/server.log {two}/server.log.1 && : > {two}/server.log"
        rotated = ssh_nodes.run("node2", rotate)
        assert rotated.returncode == 0, rotated.stderr
        assert [o.status for o in running.result(timeout=600).outcomes] == ["ok"]

    info = Bundle.open(out).find_run("baseline", 0)
    assert info is not None and info.status == "ok" and not info.log_errors
    big = info.log_notes["node1"]
    assert big.startswith("after the last request: 1.0 GiB printed, only the last ")
    assert big.endswith(" kept (from a whole line on)")
    logs_kept = Bundle.open(out).log_sources(info)
    node1 = logs_kept["node1"].read_text()
    assert len(node1) <= 1 << 20 and node1.startswith("0.00.000.000 I a line of an earlier day\n")
    assert f"listening on http://127.0.0.1:{port}\n" in node1  # the tail that matters
    assert "rotated or truncated in between" in info.log_notes["node2"]
    node2 = logs_kept["node2"].read_text()
    # the start-up lines, copied before the rotation, kept (node2 serves no request: its
    # new file was still empty at the fetch after the last request)
    assert f"listening on http://127.0.0.1:{port + 1}\n" in node2
    assert (two / "server.log.1").read_text().startswith(node2)
    [table] = check_paths([out]).log_sources
    assert [s.source for s in table.sources] == ["node1", "node2"]


# -- before the day: sweep --dry-run checks every node ----------------------------------------


def test_dry_run_checks_every_node_the_plan_reaches(ssh_nodes: Cluster, tmp_path: Path) -> None:
    folder = node_dir(ssh_nodes, "node1", "dry")
    c = ssh_nodes.ssh
    engine = f"{sys.executable} -m http.server {{port}}"  # the engine binary on the node
    launch = (
        f"{c('node1')} 'nohup {engine} >> {folder}/server.log 2>&1 < /dev/null "
        f"& echo $! > {folder}/server.pid'"
    )
    logs = {
        "node1": f"{c('node1')} cat {folder}/server.log",
        "node2": f"{c('node2')} 'tail -n 1000 /var/log/no-such-folder/vllm.log'",
        "old": f"{c('rekeyed')} cat /var/log/vllm.log",
        "stranger": f"{c('nokey')} cat /var/log/vllm.log",
    }
    plan = tmp_path / "dry.toml"
    plan.write_text(
        "\n".join(
            [
                "[plan]",
                f"port = {free_port()}",
                "restarts = 1",
                f"stop = {toml_value(c('node1') + f' kill $(cat {folder}/server.pid)')}",
                "logs = { " + ", ".join(f"{k} = {toml_value(v)}" for k, v in logs.items()) + " }",
                "",
                "[[arms]]",
                'name = "baseline"',
                f"launch = {toml_value(launch)}",
                "",
            ]
        )
    )
    done = run_diagnose("sweep", str(plan), "--dry-run", timeout=300)
    assert done.returncode == 1, done.stdout + done.stderr
    err = " ".join(done.stderr.split())  # rich wraps long lines
    assert "node2: not found there: /var/log/no-such-folder/vllm.log;" in err
    assert "rekeyed: ssh refused the node: its host key is not the one known for it" in err
    assert "nokey: the node accepts no key this machine offers" in err
    assert "node1:" not in err, err

    checks = {n.node: n for n in check_nodes(load_plan(plan))}
    assert list(checks) == ["node1", "node2", "rekeyed", "nokey"]
    node1 = checks["node1"]
    # the engine, the folder its log goes to (the file comes with the first start), the
    # programs of stop and logs
    assert node1.ok
    assert node1.found == [sys.executable, str(folder), "/dev/null", "echo", "kill", "cat"]
    # the same clock (one machine): the offset is within its bound of the round trip
    assert node1.clock_offset_s is not None and node1.clock_bound_s is not None
    assert abs(node1.clock_offset_s) <= node1.clock_bound_s + 0.01
    assert checks["node2"].reached and checks["node2"].missing == [
        "/var/log/no-such-folder/vllm.log"
    ]
    assert not checks["rekeyed"].reached and "Host key verification failed" in (
        checks["rekeyed"].problem or ""
    )
