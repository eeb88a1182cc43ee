"""A sweep with telemetry on a real llama-server (issue 30): the plan's remote command
rendered per start, this machine sampled, the launched server's CPU told apart, the report's
chapter built from it. No timing or rate asserted."""

from __future__ import annotations

import shlex
from pathlib import Path

from test_sweep import SERVER, _arm, _plan

from diagnostic.bundle.store import Bundle
from diagnostic.bundle.telemetry import read_telemetry
from diagnostic.measure.plan.spec import parse_plan
from diagnostic.measure.sweep import sweep
from diagnostic.report.build import report_context

DATA = Path(__file__).parent / "data" / "telemetry"


def test_sweep_records_telemetry_per_start_and_the_report_shows_it(
    tmp_path: Path,
    real_env: None,
) -> None:
    csv = shlex.quote(str(DATA / "nvidia-smi-documented.csv"))
    # the template's {restart} is rendered per start: each run names its own restart
    node = f"cat {csv}; echo restart {{restart}} >&2"
    extra = "telemetry_local = true\ntelemetry_interval_s = 0.2\ntelemetry_quiet_s = 0.5\n"
    extra += f"telemetry = {{node = '{node}'}}"
    _plan(tmp_path, _arm("baseline", SERVER))  # writes plan.toml
    text = (tmp_path / "plan.toml").read_text().replace("[plan]\n", f"[plan]\n{extra}\n", 1)
    plan = parse_plan(text, source=str(tmp_path / "plan.toml"))
    summary = sweep(plan, out=tmp_path / "b")
    assert [o.status for o in summary.outcomes] == ["ok", "ok"]
    bundle = Bundle.open(tmp_path / "b")
    for run in bundle.runs():
        assert set(run.telemetry) == {"nvml", "host", "node"}
        node = run.telemetry["node"]
        assert node.command and f"restart {run.restart}" in node.command
        frames = read_telemetry(bundle.run_dir(run.arm, run.restart), run)
        assert frames["host"].server_cpu_pct.notna().any()  # the launched pid, told apart
        assert len(frames["node"]) == 6
        assert run.seal is not None and "telemetry/host.csv" in run.seal.files
        assert run.quiet is not None and run.quiet.ticks >= 1  # taken before each start's requests
    ctx = report_context(bundle)
    assert ctx.telemetry is not None and ctx.telemetry.windows
