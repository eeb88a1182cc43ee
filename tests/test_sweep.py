"""The sweep: real llama-server starts per arm in interleaved blocks, faults, Ctrl-C, resume."""

from __future__ import annotations

import json
import os
import re
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from analyse_bundles import REAL_RUNS, synthetic_record
from conftest import ROOT, free_port

from diagnostic.analyse.core import analyse
from diagnostic.bundle.store import Bundle
from diagnostic.common.progress import NullReporter
from diagnostic.errors import BundleError, DiagnosticError
from diagnostic.logcheck.stage import check_paths
from diagnostic.measure.launch import port_in_use, start_server
from diagnostic.measure.plan.spec import Plan, load_plan, parse_plan
from diagnostic.measure.schedule import Start, build_schedule
from diagnostic.measure.sweep import OVERALL, SweepResult, adaptive_looks, capture_facts, sweep
from diagnostic.report.chapters.methodology import design_rows
from diagnostic.schema.bundle import RunInfo

SERVER = (
    "$LLAMA_SERVER -m $MODEL -a gemma --host 127.0.0.1 --port {port} -t 1 -tb 1 -c 2048 -np 1"
    " --metrics"
)
NGRAM = " --spec-type ngram-simple --spec-ngram-simple-size-n 2 --spec-ngram-simple-size-m {k}"


class Recorder:
    """A reporter that keeps what it was told."""

    def __init__(self) -> None:
        self.totals: dict[str, int | None] = {}
        self.steps: dict[str, int] = {}
        self.statuses: list[str] = []
        self.notes: list[str] = []

    def start(self, label: str, total: int | None) -> None:
        self.totals[label] = total
        self.steps.setdefault(label, 0)

    def advance(self, label: str, steps: int = 1, status: str | None = None) -> None:
        self.steps[label] = self.steps.get(label, 0) + steps
        if status and label == OVERALL:
            self.statuses.append(status)

    def note(self, message: str) -> None:
        self.notes.append(message)


def _plan(tmp_path: Path, arms: str, **options: object) -> Plan:
    settings = {
        "restarts": 2,
        "requests": 2,
        "warmup": 1,
        "max_tokens": 16,
        "workloads": ["code"],
        "port": free_port(),
        "health_timeout_s": 300,  # llama-server is up in seconds when idle, slower loaded
        "seed": 3,
    }
    settings.update(options)
    lines = [f"{k} = {_toml(v)}" for k, v in settings.items()]
    path = tmp_path / "plan.toml"
    path.write_text("[plan]\n" + "\n".join(lines) + "\n\n" + arms)
    return load_plan(path)


def _toml(value: object) -> str:
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return str(value)


def _arm(name: str, launch: str, extra: str = "") -> str:
    return f'[[arms]]\nname = "{name}"\nlaunch = "{launch}"\n{extra}\n'


def _runs(bundle: Path) -> dict[str, RunInfo]:
    return {f"{r.arm}-r{r.restart}": r for r in Bundle.open(bundle).runs()}


def _counter(prom: str, name: str) -> float:
    match = re.search(rf"^llamacpp:{name}(?:_total)?\s+(\S+)$", prom, re.M)
    assert match, f"{name} missing from /metrics"
    return float(match.group(1))


def _group_gone(pid: int) -> bool:
    try:
        os.killpg(pid, 0)
    except ProcessLookupError:
        return True
    return False


# -- without a server: dry run, preflight, failures ------------------------------------------


def test_dry_run_prints_the_schedule_and_touches_nothing(tmp_path: Path) -> None:
    plan = load_plan(ROOT / "samples" / "plans" / "llamacpp-cpu.toml")
    summary = sweep(plan, out=tmp_path / "b", dry_run=True)
    assert not (tmp_path / "b").exists()
    assert len(summary.schedule) == 9 * 3
    assert summary.count("planned") == 27
    first_block = [s.arm for s in summary.schedule if s.block == 0]
    assert sorted(first_block) == sorted(a.name for a in plan.arms)
    e = summary.estimate
    assert e.requests == 27 * 2 * 16
    assert e.total_s == pytest.approx(27 * e.per_start_s)


def test_unset_shell_variables_fail_before_any_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("NO_SUCH_SERVER_VAR", raising=False)
    plan = _plan(tmp_path, _arm("baseline", "$NO_SUCH_SERVER_VAR --port {port}"))
    with pytest.raises(DiagnosticError, match=r"\$NO_SUCH_SERVER_VAR \(arms baseline\)"):
        sweep(plan, out=tmp_path / "b")
    assert not (tmp_path / "b").exists()


def test_a_missing_prompt_file_fails_before_any_start(tmp_path: Path) -> None:
    plan = _plan(tmp_path, _arm("baseline", "true --port {port}"), workloads=["mine.jsonl"])
    with pytest.raises(DiagnosticError, match=r"mine\.jsonl"):
        sweep(plan, out=tmp_path / "b")
    assert not (tmp_path / "b").exists()


def test_prompt_files_are_found_beside_the_plan(tmp_path: Path) -> None:
    (tmp_path / "mine.jsonl").write_text('{"prompt": "def f(x):"}\n')
    plan = _plan(
        tmp_path, _arm("baseline", "exit 1 # {port}"), workloads=["mine.jsonl"], restarts=1
    )
    summary = sweep(plan, out=tmp_path / "b")
    assert summary.count("failed") == 1
    assert Bundle.open(tmp_path / "b").manifest.plan.workloads == ["mine"]


def test_starts_that_exit_at_once_are_recorded_failed_and_the_sweep_goes_on(tmp_path: Path) -> None:
    plan = _plan(
        tmp_path,
        _arm("baseline", "echo cannot load model >&2; exit 7 # {port}")
        + _arm("hang", "echo loading; exec sleep 60 # {port}"),
        health_timeout_s=1,
    )
    recorder = Recorder()
    summary = sweep(plan, out=tmp_path / "b", reporter=recorder, grace_s=5)
    assert summary.count("failed") == 4
    runs = _runs(tmp_path / "b")
    for name in ("baseline-r0", "baseline-r1"):
        assert runs[name].status == "failed"
        assert "exited with status 7 during start-up" in (runs[name].failure or "")
        assert "cannot load model" in (runs[name].failure or "")
        assert runs[name].launch is not None and runs[name].launch.exit_code == 7
    for name in ("hang-r0", "hang-r1"):
        assert "did not become healthy within 1 s" in (runs[name].failure or "")
        assert runs[name].launch is not None and runs[name].launch.exit_code == -15
    assert recorder.steps[OVERALL] == recorder.totals[OVERALL] == 4 * 3
    sealed = [n for n in recorder.notes if n.startswith("sealed ")]  # each run, as it ends
    assert len(sealed) == 4 and all("(failed): 1 files, seal sha256 " in n for n in sealed)
    assert len([n for n in recorder.notes if "failed" in n and n not in sealed]) == 4


def test_stop_on_failure_stops_after_the_first_failure(tmp_path: Path) -> None:
    plan = _plan(tmp_path, _arm("baseline", "exit 1 # {port}") + _arm("other", "exit 1 # {port}"))
    summary = sweep(plan, out=tmp_path / "b", stop_on_failure=True)
    assert summary.stopped_early and len(summary.outcomes) == 1
    assert len(Bundle.open(tmp_path / "b").runs()) == 1


def test_an_existing_bundle_needs_resume_or_force(tmp_path: Path) -> None:
    plan = _plan(tmp_path, _arm("baseline", "exit 1 # {port}"), restarts=1)
    sweep(plan, out=tmp_path / "b")
    with pytest.raises(BundleError, match="--resume"):
        sweep(plan, out=tmp_path / "b")
    summary = sweep(plan, out=tmp_path / "b", force=True)
    assert summary.count("failed") == 1


def test_resume_refuses_a_different_plan(tmp_path: Path) -> None:
    plan = _plan(tmp_path, _arm("baseline", "exit 1 # {port}"), restarts=1)
    sweep(plan, out=tmp_path / "b")
    other = parse_plan(
        (tmp_path / "plan.toml").read_text().replace("max_tokens = 16", "max_tokens = 32"),
        source="other.toml",
    )
    with pytest.raises(BundleError, match=r"plan differs .*\(max_tokens\)"):
        sweep(other, out=tmp_path / "b", resume=True)


def test_a_port_held_by_another_process_fails_the_start(tmp_path: Path) -> None:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        plan = _plan(tmp_path, _arm("baseline", "exit 0 # {port}"), restarts=1, port=port)
        summary = sweep(plan, out=tmp_path / "b", grace_s=0.5)
    assert summary.count("failed") == 1
    assert f"port {port} is in use" in (summary.outcomes[0].failure or "")


# -- the real engine ---------------------------------------------------------------------


def _watch(bundle: Path, run: str, action: Callable[[RunInfo], None]) -> threading.Thread:
    """Once `run` has a measured record, call action(run.json) from a thread."""

    def loop() -> None:
        deadline = time.monotonic() + 900
        path = bundle / "runs" / run / "requests.jsonl"
        while time.monotonic() < deadline:
            # bytes: a read racing an append may cut a UTF-8 character in two
            if path.is_file() and b'"warmup":false' in path.read_bytes():
                action(
                    Bundle.open(bundle).find_run(
                        *run.rsplit("-r", 1)[:1], int(run.rsplit("-r", 1)[1])
                    )
                )  # type: ignore[arg-type]
                return
            time.sleep(0.05)

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    return thread


@pytest.mark.engine
def test_a_small_plan_runs_end_to_end_and_resumes_without_duplicates(
    tmp_path: Path, real_env: None
) -> None:
    plan = _plan(
        tmp_path,
        _arm("baseline", SERVER) + _arm("ngram-k{k}", SERVER + NGRAM, "sweep = { k = [2, 4] }"),
    )
    recorder = Recorder()
    summary = sweep(plan, out=tmp_path / "b", reporter=recorder)
    assert [o.status for o in summary.outcomes] == ["ok"] * 6, summary.outcomes
    bundle = Bundle.open(tmp_path / "b")
    assert [a.name for a in bundle.manifest.plan.arms] == ["baseline", "ngram-k2", "ngram-k4"]
    assert bundle.manifest.plan.order == "blocks" and bundle.manifest.plan.restarts == 2

    expected = build_schedule(["baseline", "ngram-k2", "ngram-k4"], restarts=2, seed=3)
    runs = sorted(bundle.runs(), key=lambda r: r.started_at)
    assert [(r.arm, r.restart, r.block) for r in runs] == [
        (s.arm, s.restart, s.block) for s in expected
    ]
    for run in runs:
        assert run.status == "ok" and run.engine.name == "llamacpp"
        assert run.launch is not None and run.launch.pid and run.launch.exit_code is not None
        assert run.launch.startup_s is not None and 0 < run.launch.startup_s < 60
        assert "$LLAMA_SERVER" in run.launch.command  # the template, not the expanded path
        records = bundle.read_requests(run.arm, run.restart).records
        assert len(records) == 3
        assert len({(r.workload, r.seq) for r in records}) == 3
        bad = [r for r in records if r.error is not None or r.completion_tokens != 16]
        assert not bad, bad
        log = bundle.log_sources(run)["server"].read_text()
        assert "listening on" in log
        after = bundle.run_file(run.arm, run.restart, "metrics_after.prom").read_text()
        if run.arm == "baseline":
            assert "draft acceptance" not in log
        else:
            k = int(run.arm.removeprefix("ngram-k"))
            assert "draft acceptance" in log
            drafts = _counter(after, "spec_decode_num_drafts")
            tokens = _counter(after, "spec_decode_num_draft_tokens")
            assert drafts > 0 and tokens / drafts <= k  # the {k} reached the server
    assert not port_in_use("127.0.0.1", plan.options.port)
    assert recorder.steps[OVERALL] == recorder.totals[OVERALL] == 6 * 3
    assert any("tok/s" in s and "code" in s for s in recorder.statuses)

    again = sweep(plan, out=tmp_path / "b", resume=True)
    assert again.count("skipped") == 6
    for run in Bundle.open(tmp_path / "b").runs():
        assert len(bundle.read_requests(run.arm, run.restart).records) == 3


@pytest.mark.engine
def test_a_server_killed_mid_run_fails_that_run_only_and_resume_redoes_it(
    tmp_path: Path, real_env: None
) -> None:
    plan = _plan(
        tmp_path,
        _arm("baseline", SERVER) + _arm("broken", "echo no such flag >&2; exit 2 # {port}"),
        requests=3,
        order="sequential",
    )

    def kill(run: RunInfo) -> None:
        assert run.launch is not None and run.launch.pid
        os.killpg(run.launch.pid, signal.SIGKILL)

    watcher = _watch(tmp_path / "b", "baseline-r0", kill)
    summary = sweep(plan, out=tmp_path / "b")
    watcher.join(timeout=5)
    assert [(o.start.arm, o.start.restart, o.status) for o in summary.outcomes] == [
        ("baseline", 0, "failed"),
        ("baseline", 1, "ok"),
        ("broken", 0, "failed"),
        ("broken", 1, "failed"),
    ]
    runs = _runs(tmp_path / "b")
    killed = runs["baseline-r0"]
    assert "exited with status -9 during the measurement" in (killed.failure or "")
    assert killed.launch is not None and killed.launch.exit_code == -9
    assert "exited with status 2 during start-up" in (runs["broken-r0"].failure or "")

    resumed = sweep(plan, out=tmp_path / "b", resume=True)
    assert [o.status for o in resumed.outcomes] == ["ok", "skipped", "failed", "failed"]
    bundle = Bundle.open(tmp_path / "b")
    redone = bundle.find_run("baseline", 0)
    assert redone is not None and redone.status == "ok" and redone.failure is None
    assert redone.logs == ["logs/server.attempt1.log", "logs/server.log"]
    folder = bundle.run_dir("baseline", 0)
    assert (folder / "requests.attempt1.jsonl").is_file()  # the failed attempt, kept aside
    records = bundle.read_requests("baseline", 0).records
    assert len(records) == 4 and all(r.error is None for r in records)
    assert len({r.seq for r in records}) == 4


class _CtrlCAfter(NullReporter):
    """Raises KeyboardInterrupt in the main thread, as Ctrl-C does, at the n-th progress step
    (a request just stored), so the interrupt lands mid-measurement deterministically."""

    def __init__(self, steps: int) -> None:
        self.left = steps

    def advance(self, label: str, steps: int = 1, status: str | None = None) -> None:
        self.left -= steps
        if self.left == 0:
            raise KeyboardInterrupt


@pytest.mark.engine
def test_ctrl_c_stops_the_server_and_resume_measures_the_restart_afresh(
    tmp_path: Path, real_env: None
) -> None:
    plan = _plan(tmp_path, _arm("baseline", SERVER), requests=12, restarts=2)
    with pytest.raises(KeyboardInterrupt):
        sweep(plan, out=tmp_path / "b", reporter=_CtrlCAfter(3))
    bundle = Bundle.open(tmp_path / "b")
    run = bundle.find_run("baseline", 0)
    assert run is not None and run.status == "interrupted"
    assert run.launch is not None and run.launch.pid and _group_gone(run.launch.pid)
    assert not port_in_use("127.0.0.1", plan.options.port)
    assert bundle.find_run("baseline", 1) is None
    before = bundle.read_requests("baseline", 0).records
    assert 1 <= len(before) < 13

    summary: SweepResult = sweep(plan, out=tmp_path / "b", resume=True)
    assert [o.status for o in summary.outcomes] == ["ok", "ok"]
    # A restart is one server process: the resumed one is measured afresh, warm-up first, and
    # the interrupted process's records are kept apart, not mixed in (issue 24, item 12).
    bundle = Bundle.open(tmp_path / "b")
    after = bundle.read_requests("baseline", 0).records
    assert len(after) == 13 and len({r.seq for r in after}) == 13 and after[0].warmup
    kept = bundle.run_file("baseline", 0, "requests.attempt1.jsonl").read_text().splitlines()
    assert [json.loads(line) for line in kept] == [r.model_dump(mode="json") for r in before]
    run = bundle.find_run("baseline", 0)
    assert run is not None and run.attempts == 2 and run.logs[0] == "logs/server.attempt1.log"


# -- capture facts and --adaptive (offline) ----------------------------------------------


def test_capture_facts_come_from_the_check_parsers() -> None:
    log = REAL_RUNS / "h200-vllm-0.26-mla" / "mla-triton-ngram3" / "server.log"
    facts = capture_facts(log)
    assert facts is not None
    assert facts["configured"] == "FULL_AND_PIECEWISE" and facts["resolved"] == "PIECEWISE"
    assert capture_facts(Path("/nonexistent/server.log")) is None


def test_adaptive_looks_follow_the_restarts(tmp_path: Path) -> None:
    arms = _arm("baseline", "exit 1 # {port}")
    assert adaptive_looks(_plan(tmp_path, arms, restarts=2)) == [2]
    assert adaptive_looks(_plan(tmp_path, arms, restarts=7)) == [7]  # no interim look
    assert adaptive_looks(_plan(tmp_path, arms, restarts=8)) == [4, 8]
    assert adaptive_looks(_plan(tmp_path, arms, restarts=12)) == [4, 8, 12]
    assert adaptive_looks(_plan(tmp_path, arms, restarts=20)) == [5, 10, 15, 20]
    with pytest.raises(DiagnosticError, match="order"):
        adaptive_looks(_plan(tmp_path, arms, restarts=5, order="sequential"))


def test_adaptive_warns_when_the_plan_is_too_short_for_an_interim_look(tmp_path: Path) -> None:
    arms = _arm("baseline", "exit 1 # {port}")
    short = sweep(_plan(tmp_path, arms, restarts=5), out=None, dry_run=True, adaptive=True)
    assert short.looks == [5] and any("no interim look" in w for w in short.warnings)
    long = sweep(_plan(tmp_path, arms, restarts=16), out=None, dry_run=True, adaptive=True)
    assert long.looks == [4, 8, 12, 16] and not any("interim" in w for w in long.warnings)
    # No A/A arm: said, since one would join the reference and shorten the sweep.
    assert any('no A/A arm (aa_of = "baseline")' in w for w in long.warnings)
    with_aa = arms + '[[arms]]\nname = "baseline-aa"\naa_of = "baseline"\n\n'
    paired = sweep(_plan(tmp_path, with_aa, restarts=16), out=None, dry_run=True, adaptive=True)
    assert not any("A/A" in w for w in paired.warnings)


@pytest.mark.parametrize(("spread", "decided"), [(0.005, True), (0.3, False)])
def test_adaptive_stops_at_the_first_look_where_everything_is_decided(
    tmp_path: Path, spread: float, decided: bool
) -> None:
    arms = (
        _arm("baseline", "exit 1 # {port}")
        + '[[arms]]\nname = "baseline-aa"\naa_of = "baseline"\n\n'
        + _arm("spec", "exit 1 # {port} --spec-type ngram-simple", "speculative = true")
    )
    plan = _plan(tmp_path, arms, restarts=8, requests=15, max_tokens=256)
    out = tmp_path / "b"
    # Creates the bundle (first start fails); the manifest records the adaptive design.
    sweep(plan, out=out, stop_on_failure=True, adaptive=True)
    bundle = Bundle.open(out)
    assert bundle.manifest.plan.design.kind == "adaptive"
    assert bundle.manifest.plan.design.looks == [4, 8]
    # The plan's target (default +10%) for the futility stop; the A/A arm joins the reference.
    assert bundle.manifest.plan.design.target == 0.10 and bundle.manifest.plan.design.pool_aa
    # Four blocks already measured: spec 1.5x faster, tight restart-to-restart noise.
    for start in build_schedule([a.name for a in plan.arms], restarts=8, seed=3)[:12]:
        tps = 150.0 if start.arm == "spec" else 100.0
        tps *= 1 + spread * (start.restart - 1) * (1 if start.arm == "spec" else -1)
        _measured(bundle, start, tps)
    recorder = Recorder()
    summary = sweep(plan, out=out, resume=True, adaptive=True, reporter=recorder)
    assert summary.looks == [4, 8]
    if decided:
        assert summary.stopped_at_look == 4
        assert [o.status for o in summary.outcomes] == ["skipped"] * 12
        assert any("every comparison decided" in n for n in recorder.notes)
    else:  # it goes on to the next blocks (whose starts fail here: `exit 1`)
        assert summary.stopped_at_look is None and len(summary.outcomes) == 24
        assert any("no arm decided yet" in n for n in recorder.notes)


def test_adaptive_stops_each_arm_once_its_comparisons_are_decided(tmp_path: Path) -> None:
    """Per-comparison stopping: after look 1 (4 blocks), the arm that is 1.5x faster with
    tight noise is decided (WIN) and gets no more restarts; the arm at 1.0x with 3% noise is
    undecided but futile (+10% rejected: one-sided p < 2.5%) and stops too; the noisy arm,
    the baseline and the A/A arm go on (their starts fail here: `exit 1`). The manifest
    records it."""
    arms = (
        _arm("baseline", "exit 1 # {port}")
        + '[[arms]]\nname = "baseline-aa"\naa_of = "baseline"\n\n'
        + _arm("fast", "exit 1 # {port} --spec-type ngram-simple", "speculative = true")
        + _arm("same", "exit 1 # {port} --spec-type ngram-mod", "speculative = true")
        + _arm("flat", "exit 1 # {port} --spec-type ngram-map-k", "speculative = true")
    )
    plan = _plan(tmp_path, arms, restarts=8, requests=15, max_tokens=256)
    out = tmp_path / "b"
    sweep(plan, out=out, stop_on_failure=True, adaptive=True)
    bundle = Bundle.open(out)
    level = {"fast": 1.5, "same": 1.0, "flat": 1.0, "baseline": 1.0, "baseline-aa": 1.0}
    spread = {"fast": 0.005, "same": 0.3, "flat": 0.03, "baseline": 0.005, "baseline-aa": 0.005}
    for start in build_schedule([a.name for a in plan.arms], restarts=8, seed=3)[:20]:
        tps = 100.0 * level[start.arm] * (1 + spread[start.arm] * (-1) ** start.restart)
        _measured(bundle, start, tps)
    recorder = Recorder()
    summary = sweep(plan, out=out, resume=True, adaptive=True, reporter=recorder)
    later = summary.outcomes[20:]
    assert [o.status for o in summary.outcomes[:20]] == ["skipped"] * 20
    assert {o.status for o in later if o.start.arm in ("fast", "flat")} == {"decided"}
    assert {o.status for o in later if o.start.arm not in ("fast", "flat")} == {"failed"}
    assert len(later) == 20 and summary.stopped_at_look is None
    assert any("fast stopped at look 1 (WIN)" in n for n in recorder.notes)
    assert any("verdicts decided 1/3 · 1 futile" in s for s in recorder.statuses)
    time_plan = Bundle.open(out).manifest.time_plan
    assert time_plan is not None and time_plan.design == "adaptive"
    assert time_plan.stopped["fast"] == "stopped at look 1 (WIN)"
    assert time_plan.stopped["flat"] == "stopped at look 1 (futility stop on code, against +10%)"
    assert time_plan.restarts == {
        "baseline": 4,
        "baseline-aa": 4,
        "fast": 4,
        "same": 4,
        "flat": 4,
    }
    # The report's methodology says which design ran, what each arm got and why.
    final = Bundle.open(out)
    rows = {r.key: r.value for r in design_rows(final.manifest, analyse(final))}
    assert rows["Design"].startswith("adaptive (group-sequential): looks after blocks 4, 8")
    assert "fast 4 (stopped at look 1 (WIN))" in rows["Restarts per arm (run)"]
    assert rows["Wall-clock: planned against taken"].startswith("planned ")


def test_a_fixed_sweep_cannot_be_resumed_as_an_adaptive_one(tmp_path: Path) -> None:
    """Choosing to stop early after seeing data is not a planned design: refused."""
    plan = _plan(tmp_path, _arm("baseline", "exit 1 # {port}"), restarts=8)
    out = tmp_path / "b"
    sweep(plan, out=out, stop_on_failure=True)
    with pytest.raises(BundleError, match="design"):
        sweep(plan, out=out, resume=True, adaptive=True)


def test_resume_stops_a_server_left_running_by_a_killed_sweep(tmp_path: Path) -> None:
    root = tmp_path / "www"
    root.mkdir()
    plan = _plan(tmp_path, _arm("baseline", "exit 5 # {port}"), restarts=1)
    out = tmp_path / "b"
    sweep(plan, out=out)
    # What a SIGKILLed sweep leaves: run.json "running" and its server still on the port.
    port = plan.options.port
    leftover = start_server(
        f"exec {sys.executable} -m http.server {port} --bind 127.0.0.1 --directory {root}",
        env={},
        log_path=tmp_path / "leftover.log",
        marker=f"{out.resolve()}:baseline-r0",
    )
    deadline = time.monotonic() + 30
    while not port_in_use("127.0.0.1", port):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    bundle = Bundle.open(out)
    run = bundle.find_run("baseline", 0)
    assert run is not None and run.launch is not None
    run.status = "running"
    run.launch.pid = leftover.pid
    bundle.write_run(run)
    recorder = Recorder()
    summary = sweep(plan, out=out, resume=True, reporter=recorder, grace_s=5)
    assert leftover.popen.wait(timeout=5) == -15
    leftover.stop(grace_s=1)
    assert any(f"pid {leftover.pid}" in n for n in recorder.notes)
    # the start then went ahead (and failed on its own account, not on a busy port)
    assert "exited with status 5" in (summary.outcomes[0].failure or "")


@pytest.mark.engine
def test_a_launch_that_returns_after_the_server_answers_is_no_death(
    tmp_path: Path, real_env: None
) -> None:
    # `ssh node 'nohup server & ...'` returns when ssh lets go, which may be after the health
    # check passed: with a stop command that is a server in the background, not one that died.
    # This launch returns once the warm-up's tokens were generated, while the run measures.
    pid = tmp_path / "server.pid"
    metrics = "curl -s http://127.0.0.1:{port}/metrics"
    warmed = f"{metrics} | grep -q '^llamacpp:tokens_predicted_total [1-9][0-9]'"
    launch = f"nohup {SERVER} & echo $! > {pid}; until {warmed}; do sleep 0.1; done; exit 0"
    stop = f'stop = "kill $(cat {pid})"'
    plan = _plan(tmp_path, _arm("baseline", launch, stop), restarts=1, max_tokens=32)
    summary = sweep(plan, out=tmp_path / "b", grace_s=5)
    assert [o.status for o in summary.outcomes] == ["ok"], summary.outcomes
    run = _runs(tmp_path / "b")["baseline-r0"]
    assert run.launch is not None and run.launch.exit_code == 0
    assert not port_in_use("127.0.0.1", plan.options.port)


# -- a cluster: launch, health, logs and stop as shell templates -------------------------------

NODE = "$LLAMA_SERVER -m $MODEL -a gemma --host 127.0.0.1 -t 1 -tb 1 -c 2048 -np 1 --metrics"
DRAFTS = " -md $MODEL --spec-type draft-simple --spec-draft-n-max 4"  # a flag one node got


@pytest.mark.engine
def test_templates_drive_two_nodes_and_check_finds_that_they_disagree(
    tmp_path: Path, real_env: None
) -> None:
    # Two llama-servers stand for two nodes of one server: node1 answers the requests, node2
    # was started with a drafter the other node lacks (the patch that reached one node only).
    # The launch starts both (as an ssh to each node would), `health` asks both, `logs`
    # fetches each node's log, `stop` ends them; a log command that fails is recorded.
    d = tmp_path / "nodes"
    d.mkdir()
    run = f"{d}/{{arm}}-r{{restart}}"
    launch = (
        f"{NODE} --port {{port}} > {run}-node1.log 2>&1 & echo $! > {run}.pids; "
        f"{NODE}{DRAFTS} --port {{port+1}} > {run}-node2.log 2>&1 & echo $! >> {run}.pids; wait"
    )
    extra = "\n".join(
        [
            'health = "curl -sf http://127.0.0.1:{port}/health'
            ' && curl -sf http://127.0.0.1:{port+1}/health"',
            f'stop = "kill $(cat {run}.pids) && echo stopped > {run}.stopped"',
            f'logs = {{ node1 = "cat {run}-node1.log", node2 = "cat {run}-node2.log",'
            ' node3 = "echo ssh: connect to host node3: No route to host >&2; exit 255" }',
        ]
    )
    plan = _plan(tmp_path, _arm("baseline", launch, extra), restarts=1, health_timeout_s=120)
    port = plan.options.port
    recorder = Recorder()
    summary = sweep(plan, out=tmp_path / "b", reporter=recorder)
    assert [o.status for o in summary.outcomes] == ["ok"], summary.outcomes
    assert (d / "baseline-r0.stopped").read_text() == "stopped\n"  # the stop template ran
    assert not port_in_use("127.0.0.1", port) and not port_in_use("127.0.0.1", port + 1)

    bundle = Bundle.open(tmp_path / "b")
    info = bundle.find_run("baseline", 0)
    assert info is not None and info.status == "ok" and info.launch is not None
    assert f"--port {port + 1}" in info.launch.command and "{restart}" not in info.launch.command
    assert bundle.manifest.plan.arms[0].logs["node1"] == f"cat {d}/baseline-r{{restart}}-node1.log"
    assert set(info.sources) == {"server", "node1", "node2"}
    logs = bundle.log_sources(info)
    assert f"listening on http://127.0.0.1:{port}" in logs["node1"].read_text()
    assert "loading draft model" in logs["node2"].read_text()
    # node1's copy was taken after the last request: it holds every measured answer
    records = bundle.read_requests("baseline", 0).records
    assert len(records) == 3 and all(r.error is None for r in records)
    assert logs["node1"].read_text().count("print_timing") >= 4 * len(records)
    assert info.log_errors["node3"].startswith("after the last request: exit 255: ssh: connect")
    assert any("'node3' failed after start-up" in n for n in recorder.notes)

    report = check_paths([tmp_path / "b"])
    [table] = report.log_sources
    assert [(s.source, s.spec.enabled) for s in table.sources] == [
        ("node1", False),
        ("node2", True),
    ]
    assert table.differences == ["speculation: node1 off, node2 draft"]
    [nodes] = [f for f in report.findings if f.rule == "nodes-disagree"]
    assert nodes.severity == "error" and "baseline-r0" in nodes.message
    assert report.exit_code() == 1


def _measured(bundle: Bundle, start: Start, tps: float) -> None:
    """A start recorded as measured: its run and 1 warm-up + 15 requests at `tps`."""
    bundle.write_run(RunInfo(arm=start.arm, restart=start.restart, block=start.block, status="ok"))
    for seq in range(16):
        bundle.append_request(synthetic_record(start.arm, start.restart, seq, tps, warmup=seq == 0))
