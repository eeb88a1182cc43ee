"""Telemetry recording (issue 30): nvidia-smi CSV and DCGM parsing, a plan's remote command
run for a whole run, absent NVML, and the host's psutil samples on a real llama-server collect.
No test asserts a timing or a rate."""

from __future__ import annotations

import http.server
import shlex
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from diagnostic.analyse.telemetry import _window
from diagnostic.analyse.telemetry_rules import apply_rules, load_rules
from diagnostic.bundle.seal import measured_seal
from diagnostic.bundle.store import Bundle
from diagnostic.bundle.telemetry import TelemetryWriter, read_telemetry
from diagnostic.cli import main
from diagnostic.common.progress import NullReporter
from diagnostic.errors import PlanError, TelemetryError
from diagnostic.measure.plan.spec import parse_plan
from diagnostic.measure.schedule import Start
from diagnostic.measure.sweep.runner import StartRunner
from diagnostic.measure.sweep.stage import run_settings
from diagnostic.measure.telemetry import TelemetrySettings, recording
from diagnostic.measure.telemetry.parse import SmiParser, parse_dcgm, parse_smi_file, reason_bits
from diagnostic.schema.bundle import Manifest, RunInfo
from diagnostic.schema.telemetry import GPU_COLUMNS, TelemetrySource

DATA = Path(__file__).parent / "data" / "telemetry"
H200 = DATA / "h200-nvidia-smi.csv"  # recorded by the lead on the H200 (absent until then)


def test_documented_nvidia_smi_csv_is_read_into_our_columns() -> None:
    rows = parse_smi_file(DATA / "nvidia-smi-documented.csv")
    assert len(rows) == 6
    assert [r["gpu"] for r in rows] == [0, 1, 0, 1, 0, 1]  # no index: place within a timestamp
    first = rows[0]
    assert first["sm_clock_mhz"] == 1980.0 and first["power_w"] == 412.37
    assert first["power_limit_w"] == 700.0 and first["memory_used_mib"] == 131072.0
    assert first["source_time"] == "2026/12/03 06:15:01.123"
    assert rows[4]["sm_clock_mhz"] is None and rows[5]["power_w"] is None  # [N/A], unsupported
    assert reason_bits(int(str(rows[2]["clocks_event_reasons"]))) == ["sw_power_cap"]
    assert reason_bits(0x44) == ["sw_power_cap", "hw_thermal_slowdown"]
    assert set(first) <= set(GPU_COLUMNS)


def test_units_in_values_and_the_old_throttle_name_are_read() -> None:
    parser = SmiParser("test")
    parser.feed("index, clocks.sm [MHz], power.draw [W], clocks_throttle_reasons.active")
    row = parser.feed("3, 1755 MHz, 301.5 W, 0x0000000000000020")
    assert row == {"gpu": 3, "sm_clock_mhz": 1755.0, "power_w": 301.5, "clocks_event_reasons": 32}


@pytest.mark.parametrize(
    ("lines", "said"),
    [
        (["1980, 300"], "a value line before nvidia-smi's header"),
        (["timestamp, clocks.sm [MHz]", "2026/12/03, fast"], "sm_clock_mhz: 'fast' is not a"),
        (["timestamp, clocks.sm [MHz]", "2026/12/03, 1, 2"], "3 values for 2 columns"),
        (["timestamp, colour"], "no known nvidia-smi field"),
    ],
)
def test_bad_nvidia_smi_input_names_the_file_and_line(
    tmp_path: Path, lines: list[str], said: str
) -> None:
    path = tmp_path / "smi.csv"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(TelemetryError, match=rf"smi\.csv, line {len(lines)}: .*{said}"):
        parse_smi_file(path)


@pytest.mark.skipif(not H200.is_file(), reason=f"{H200.name} not recorded yet (see README)")
def test_recorded_h200_nvidia_smi_csv_parses() -> None:
    rows = parse_smi_file(H200)
    assert rows and all(set(r) <= set(GPU_COLUMNS) for r in rows)
    clocks = [r["sm_clock_mhz"] for r in rows if r.get("sm_clock_mhz") is not None]
    assert clocks and all(isinstance(c, float) and c > 0 for c in clocks)
    assert any(r.get("power_limit_w") for r in rows)
    assert all(isinstance(r.get("clocks_event_reasons"), int | None) for r in rows)
    # busy samples (utilisation above 0) carry no idle reason; idle ones do
    busy = [r for r in rows if (r.get("utilization_pct") or 0) > 0]
    assert busy and not any(int(str(r["clocks_event_reasons"])) & 0x1 for r in busy)


def test_recorded_h200_samples_summarise_as_a_run_window(tmp_path: Path) -> None:
    """The real recording through the bundle's reader and the analysis' window summary: the
    busy GPU's figures, no cause from the rules."""
    if not H200.is_file():
        pytest.skip(f"{H200.name} not recorded yet (see README)")
    writer = TelemetryWriter(tmp_path, "node", "nvidia-smi")
    writer.write([{**r, "t_s": 0.0} for r in parse_smi_file(H200)])
    writer.close()
    source = TelemetrySource(kind="nvidia-smi", file="telemetry/node.csv", interval_s=0.5)
    run = RunInfo(arm="a", restart=0, telemetry={"node": source})
    frame = read_telemetry(tmp_path, run)["node"]
    assert frame.t_s.is_monotonic_increasing  # placed by the H200's own timestamps
    window = _window(run, "node", "all", frame)
    clock = next(s for s in window.stats if s.variable == "sm_clock_mhz")
    assert clock.worst <= clock.median  # the lowest clock is the worst
    assert apply_rules(load_rules(), window, []) == []  # no throttling, cap or heat in it


def test_dcgm_exporter_text_gives_one_row_per_gpu() -> None:
    rows = parse_dcgm((DATA / "dcgm-exporter.prom").read_text(), "node1")
    assert [r["gpu"] for r in rows] == [0, 1]
    assert rows[1]["sm_clock_mhz"] == 1410.0 and rows[1]["clocks_event_reasons"] == 4
    with pytest.raises(TelemetryError, match="node1: no DCGM_FI_DEV_"):
        parse_dcgm("up 1\n", "node1")


def _record(run_dir: Path, settings: TelemetrySettings, until: Path | None = None) -> dict:
    """Record until `until` holds data (a remote source's first rows), or briefly."""
    with recording(run_dir, settings, origin=time.perf_counter(), server_pid=None) as rec:
        assert rec is not None
        for _ in range(200):
            if until is None or (until.is_file() and len(until.read_text().splitlines()) > 3):
                break
            time.sleep(0.05)
        return rec.stop()


def test_remote_template_runs_a_command_into_the_same_columns(tmp_path: Path) -> None:
    csv = DATA / "nvidia-smi-documented.csv"
    # a "node" whose nvidia-smi prints the documented CSV, then loops as -lms does
    command = f"cat {shlex.quote(str(csv))}; sleep 600"
    settings = TelemetrySettings(local=False, interval_s=0.1, remote={"node": command})
    out = tmp_path / "run"
    found = _record(out, settings, until=out / "telemetry" / "node.csv")
    node = found["node"]
    assert node.kind == "nvidia-smi" and node.absent is None and node.samples == 6
    assert node.command == command and node.file == "telemetry/node.csv"
    text = (out / "telemetry" / "node.csv").read_text().splitlines()
    assert text[0] == "# diagnose-telemetry/1 kind=nvidia-smi"
    assert text[1] == ",".join(GPU_COLUMNS)


def test_a_failing_remote_command_is_recorded_never_fatal(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    command = f"echo 'ssh: no route' >&2; touch {shlex.quote(str(marker))}; exit 255"
    settings = TelemetrySettings(local=False, interval_s=0.1, remote={"node": command})
    with recording(tmp_path / "run", settings, origin=time.perf_counter(), server_pid=None) as rec:
        assert rec is not None
        while not marker.exists():  # the command has run (it exits right after)
            time.sleep(0.05)
        time.sleep(0.5)
        found = rec.stop()
    node = found["node"]
    assert node.samples == 0 and node.absent and "no sample arrived" in node.absent
    assert "status 255" in node.absent and "no route" in node.absent


def test_dcgm_url_is_scraped(tmp_path: Path) -> None:
    body = (DATA / "dcgm-exporter.prom").read_bytes()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/metrics"
        settings = TelemetrySettings(local=False, interval_s=0.1, remote={"dcgm": url})
        out = tmp_path / "run"
        found = _record(out, settings, until=out / "telemetry" / "dcgm.csv")
    finally:
        server.shutdown()
        server.server_close()
    assert found["dcgm"].kind == "dcgm" and found["dcgm"].samples >= 2


def test_no_nvml_here_is_said_and_the_host_is_still_sampled(tmp_path: Path) -> None:
    pytest.importorskip("psutil")
    found = _record(tmp_path / "run", TelemetrySettings(interval_s=0.1))
    nvml, host = found["nvml"], found["host"]
    try:
        import pynvml

        pynvml.nvmlInit()
        has_nvml = True
    except Exception:
        has_nvml = False
    if not has_nvml:
        assert nvml.absent and "NVML" in nvml.absent and nvml.file is None
    assert host.absent is None and host.samples >= 1


def test_reserved_and_bad_source_names_are_refused() -> None:
    with pytest.raises(ValueError, match="local source's name"):
        TelemetrySettings(remote={"host": "true"})
    with pytest.raises(ValueError, match="cannot name a file"):
        TelemetrySettings(remote={"../x": "true"})


@pytest.fixture
def collected(tmp_path: Path, llama_server: str) -> Iterator[Path]:
    out = tmp_path / "b"
    args = ["collect", llama_server, "-o", str(out), "--workloads", "code", "--requests", "2"]
    args += ["--warmup", "1", "--max-tokens", "8", "--telemetry", "--telemetry-interval", "0.1"]
    args += ["--telemetry-quiet", "0.5"]
    args += ["--telemetry-node", f"node=cat {shlex.quote(str(DATA / 'nvidia-smi-documented.csv'))}"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    yield out


def test_collect_samples_the_host_on_a_real_llama_server(collected: Path) -> None:
    bundle = Bundle.open(collected)
    [run] = bundle.runs()
    assert set(run.telemetry) == {"nvml", "host", "node"}
    host = run.telemetry["host"]
    assert host.absent is None and host.samples >= 2  # before the warm-up and after the last
    frames = read_telemetry(bundle.run_dir(run.arm, run.restart), run)
    frame = frames["host"]
    assert frame.cores.iloc[0] >= 1 and frame.cpu_pct.between(0, 100).all()
    records = bundle.read_requests(run.arm, run.restart).records
    first = min(r.t_send for r in records)
    last = max(r.t_send + (r.e2e_s or 0) for r in records)
    assert frame.t_s.min() <= first and frame.t_s.max() >= last  # the whole run is covered
    # the server runs on this machine: its process is found and measured apart from ours
    assert frame.server_cpu_pct.notna().any()
    # how often another task took the server's core: a rate from the second sample on
    preempt = frame.server_preempt_per_s.dropna()
    assert len(preempt) and (preempt >= 0).all()
    assert frame.steal_pct.dropna().between(0, 100).all()  # empty where the OS does not say
    assert len(frames["node"]) == 6
    # the quiet window before the first request: the arm-free covariate, in run.json
    assert run.quiet is not None and run.quiet.ticks >= 1
    assert (run.quiet.steal_cores is None) == (run.quiet.steal_since_boot_s is None)
    # ... and the same probe during the run, in the recorder: from the second sample on
    assert frame.probe_late_ms.dropna().ge(0).all() and frame.probe_share.notna().any()
    assert frame.probe_share.dropna().between(0, 1).all()
    # sealed with the run: every telemetry file is in the seal, and the seal holds
    assert run.seal is not None
    assert {"telemetry/host.csv", "telemetry/node.csv"} <= set(run.seal.files)
    again = measured_seal(bundle, run, bundle_id=bundle.manifest.bundle_id, like=run.seal)
    assert again.digest == run.seal.digest


PLAN = """
[plan]
restarts = 2
workloads = ["code"]
telemetry = {node = "ssh gpu{restart} nvidia-smi --format=csv -lms 500 # {arm} {port}"}
telemetry_interval_s = 0.5

[[arms]]
name = "baseline"
launch = "llama-server --port {port}"
"""


def test_plan_telemetry_templates_are_rendered_per_start() -> None:
    plan = parse_plan(PLAN, source="plan.toml")
    rendered = plan.arm("baseline").commands.at(1).telemetry
    assert rendered == {"node": "ssh gpu1 nvidia-smi --format=csv -lms 500 # baseline 8000"}
    settings = run_settings(plan, api_key=None, timeout_s=None).telemetry
    assert settings is not None and not settings.local and settings.interval_s == 0.5
    local = run_settings(plan, api_key=None, timeout_s=None, telemetry=True).telemetry
    assert local is not None and local.local  # sweep --telemetry


def test_plan_with_a_bad_telemetry_template_is_refused_at_load() -> None:
    with pytest.raises(PlanError, match=r"plan\.toml: .*unknown placeholder \{nope\}"):
        parse_plan(PLAN.replace("{restart}", "{nope}"), source="plan.toml")


def test_a_remote_commands_bursts_are_placed_by_its_own_timestamps(tmp_path: Path) -> None:
    """Lines that arrived together (a pipe's buffer) are spread by nvidia-smi's timestamps,
    on the run's clock by the smallest arrival delay."""
    rows = parse_smi_file(DATA / "nvidia-smi-documented.csv")
    writer = TelemetryWriter(tmp_path, "node", "nvidia-smi")
    writer.write([{**r, "t_s": 5.0} for r in rows])  # all six arrived at once
    writer.close()
    source = TelemetrySource(kind="nvidia-smi", file="telemetry/node.csv", interval_s=0.2)
    run = RunInfo(arm="a", restart=0, telemetry={"node": source})
    frame = read_telemetry(tmp_path, run)["node"]
    assert list(frame.t_arrival_s) == [5.0] * 6
    assert [round(t, 3) for t in frame.t_s] == [4.596, 4.596, 4.798, 4.798, 5.0, 5.0]


def test_a_new_attempt_sets_the_earlier_processes_telemetry_aside(tmp_path: Path) -> None:
    """A restart measured afresh on a new server process: the failed attempt's samples (on
    its own clock) are kept as *.attempt1.csv, never appended to."""
    plan = parse_plan(PLAN, source="plan.toml")
    settings = run_settings(plan, api_key=None, timeout_s=None, telemetry=True)
    bundle = Bundle.create(tmp_path / "b", Manifest(tool_version="t"))
    runner = StartRunner(bundle, plan, settings, NullReporter(), grace_s=1.0)
    failed = RunInfo(arm="baseline", restart=0, status="failed", logs=["logs/server.log"])
    bundle.write_run(failed)
    writer = TelemetryWriter(bundle.run_dir("baseline", 0), "host", "host")
    writer.write([{"t_s": 1.0, "cpu_pct": 5.0, "cores": 2}])
    writer.close()
    start = Start(index=0, block=0, arm="baseline", restart=0)
    runner._keep_attempt(start, failed)
    folder = bundle.run_dir("baseline", 0) / "telemetry"
    assert sorted(p.name for p in folder.iterdir()) == ["host.attempt1.csv"]


def test_a_recorder_that_dies_is_said_for_every_source_never_fatal(tmp_path: Path) -> None:
    blocked = tmp_path / "run"
    blocked.write_text("a file where the run folder should be\n")  # the CSV cannot be made
    settings = TelemetrySettings(interval_s=0.1)
    found = _record(blocked, settings)
    assert set(found) == {"nvml", "host"}
    host = found["host"].absent
    assert host and "recorder ended without a result" in host and "Error" in host
