"""Telemetry in the analysis (issue 30): windows, outlier restarts beside their telemetry,
causes from checklists/telemetry/causes.yaml on synthetic runs, the association table."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from analyse_bundles import synthetic_bundle

from diagnostic.analyse.core import analyse
from diagnostic.analyse.telemetry_rules import load_rules
from diagnostic.bundle.store import Bundle
from diagnostic.bundle.telemetry import TelemetryWriter, read_telemetry
from diagnostic.errors import BundleError, TelemetryError
from diagnostic.schema.telemetry import TelemetrySource, telemetry_file

N = 15  # requests per restart: the synthetic runs send one a second from t = 1 s
POWER_CAP = 0x4
HW_THERMAL = 0x40


def gpu_rows(
    clock: float, *, power: float = 500.0, reasons: int = 0, capped: float = 0.0, procs: int = 1
) -> list[dict[str, object]]:
    """Samples every 0.25 s over the run; the first `capped` share carries `reasons`."""
    n = 100
    return [
        {
            "t_s": i * 0.25,
            "gpu": 0,
            "sm_clock_mhz": clock,
            "mem_clock_mhz": 2619.0,
            "power_w": power,
            "power_limit_w": 700.0,
            "temperature_c": 60.0,
            "utilization_pct": 95.0,
            "memory_used_mib": 70000.0,
            "clocks_event_reasons": reasons if i < capped * n else 0,
            "processes": procs,
        }
        for i in range(n)
    ]


def host_rows(
    cpu: float, other: float = 5.0, client: float = 20.0, steal: float = 0.0
) -> list[dict[str, object]]:
    return [
        {
            "t_s": i * 0.5,
            "cpu_pct": cpu,
            "cores": 16,
            "load1": 1.0,
            "freq_mhz": 3000.0,
            "steal_pct": steal,
            "client_cpu_pct": client,
            "server_cpu_pct": 100.0,
            "other_cpu_pct": other,
            "top_other": "stress 4242 180; sshd 7 1",
        }
        for i in range(50)
    ]


def add_telemetry(bundle: Bundle, arm: str, restart: int, source: str, rows: list) -> None:
    kind = "host" if source == "host" else "nvml"
    run_dir = bundle.run_dir(arm, restart)
    writer = TelemetryWriter(run_dir, source, kind)
    writer.write(rows)
    writer.close()
    info = bundle.find_run(arm, restart)
    assert info is not None
    entry = TelemetrySource(
        kind=kind, file=telemetry_file(source), interval_s=0.25, samples=len(rows)
    )
    bundle.write_run(info.model_copy(update={"telemetry": {**info.telemetry, source: entry}}))


def restarts(means: list[float]) -> list[list[float]]:
    return [[m * (1 + 0.001 * (j % 3)) for j in range(N)] for m in means]


@pytest.fixture
def throttled(tmp_path: Path) -> Bundle:
    """base: 5 restarts, r4 30% slow with its SM clock held down by the power cap."""
    bundle = synthetic_bundle(tmp_path / "b", {"base": restarts([100, 101, 99, 100.5, 70])})
    for r in range(5):
        slow = r == 4
        rows = gpu_rows(1410.0 if slow else 1980.0, reasons=POWER_CAP, capped=0.64 if slow else 0)
        add_telemetry(bundle, "base", r, "nvml", rows)
        add_telemetry(bundle, "base", r, "host", host_rows(30.0))
    return bundle


def test_bundle_without_telemetry_has_no_telemetry_chapter(tmp_path: Path) -> None:
    bundle = synthetic_bundle(tmp_path / "b", {"base": restarts([100, 101, 99, 100.5, 70])})
    assert analyse(bundle).telemetry is None


def test_windows_give_median_and_worst_per_run_and_workload(throttled: Bundle) -> None:
    tele = analyse(throttled).telemetry
    assert tele is not None
    code = [w for w in tele.windows if w.window == "code" and w.source == "nvml"]
    assert sorted(w.restart for w in code) == [0, 1, 2, 3, 4]
    slow = next(w for w in code if w.restart == 4)
    clock = next(s for s in slow.stats if s.variable == "sm_clock_mhz")
    assert (clock.median, clock.worst) == (1410.0, 1410.0)
    # the code window (t 1 s .. last end) leaves out samples before the first measured request
    whole = next(w for w in tele.windows if (w.restart, w.window, w.source) == (4, "all", "nvml"))
    assert clock.samples < whole.stats[0].samples


def test_outlier_restart_is_set_beside_its_telemetry(throttled: Bundle) -> None:
    tele = analyse(throttled).telemetry
    assert tele is not None
    [out] = tele.restart_outliers
    assert (out.arm, out.restart, out.workload, out.side) == ("base", 4, "code", "low")
    text = " | ".join(out.evidence)
    assert "SM clock (MHz) 1,410 median vs 1,980 in the other restarts" in text
    assert "sw power cap reason active" in text
    assert {"gpu-clock-low", "gpu-power-cap"} <= set(out.causes)


def test_causes_name_the_run_with_evidence_and_advice(throttled: Bundle) -> None:
    tele = analyse(throttled).telemetry
    assert tele is not None
    found = {(c.rule, c.restart) for c in tele.causes}
    assert ("gpu-power-cap", 4) in found and ("gpu-clock-low", 4) in found
    assert not any(r != 4 for _, r in found)
    cap = next(c for c in tele.causes if c.rule == "gpu-power-cap")
    assert cap.outlier and "power limit" in cap.advice
    assert cap.evidence.startswith("nvml: power cap reason active")


@pytest.mark.parametrize(
    ("source", "rows", "rule"),
    [
        ("nvml", gpu_rows(1980.0, reasons=HW_THERMAL, capped=0.5), "gpu-thermal"),
        ("nvml", gpu_rows(1980.0, procs=2), "gpu-other-process"),
        ("host", host_rows(97.0), "host-cpu-saturated"),
        ("host", host_rows(30.0, other=180.0), "host-other-load"),
        ("host", host_rows(30.0, client=99.0), "client-cpu-saturated"),
        ("host", host_rows(30.0, steal=12.0), "host-cpu-steal"),
    ],
)
def test_each_cause_on_a_synthetic_run(tmp_path: Path, source: str, rows: list, rule: str) -> None:
    bundle = synthetic_bundle(tmp_path / "b", {"base": restarts([100, 101, 99])})
    for r in range(3):
        quiet = gpu_rows(1980.0) if source == "nvml" else host_rows(30.0)
        add_telemetry(bundle, "base", r, source, rows if r == 1 else quiet)
    tele = analyse(bundle).telemetry
    assert tele is not None
    assert {(c.rule, c.restart) for c in tele.causes} == {(rule, 1)}
    if source == "host" and rule in ("host-cpu-saturated", "host-other-load"):
        assert "stress 4242" in tele.causes[0].evidence


def test_variance_table_is_an_association_with_the_clock(tmp_path: Path) -> None:
    means = [100.0, 95.0, 90.0, 85.0, 80.0]
    bundle = synthetic_bundle(tmp_path / "b", {"base": restarts(means)})
    for r, m in enumerate(means):
        add_telemetry(bundle, "base", r, "nvml", gpu_rows(1980.0 * m / 100))
    tele = analyse(bundle).telemetry
    assert tele is not None
    row = next(v for v in tele.variance if v.variable == "nvml.sm_clock_mhz")
    assert row.restarts == 5 and row.r > 0.99 and row.share == pytest.approx(row.r**2)
    # constant variables carry no association at all: no row
    assert not any(v.variable == "nvml.power_limit_w" for v in tele.variance)


def test_absent_nvml_is_said_never_fatal(tmp_path: Path) -> None:
    bundle = synthetic_bundle(tmp_path / "b", {"base": restarts([100, 101, 99])})
    info = bundle.find_run("base", 0)
    assert info is not None
    absent = TelemetrySource(kind="nvml", interval_s=0.25, absent="NVML is not available")
    bundle.write_run(info.model_copy(update={"telemetry": {"nvml": absent}}))
    tele = analyse(bundle).telemetry
    assert tele is not None and tele.absent == {"base-r0/nvml": "NVML is not available"}
    assert tele.windows == []


def test_a_telemetry_file_that_is_not_one_is_named(throttled: Bundle) -> None:
    path = throttled.run_dir("base", 0) / telemetry_file("nvml")
    path.write_text("t_s,gpu\n1,0\n")
    info = throttled.find_run("base", 0)
    assert info is not None
    with pytest.raises(BundleError, match=r"nvml\.csv: not a diagnose-telemetry/1"):
        read_telemetry(throttled.run_dir("base", 0), info)
    path.write_text("# diagnose-telemetry/1 kind=nvml\nt_s,gpu\n1,0\n")
    with pytest.raises(BundleError, match=r"nvml\.csv: telemetry CSV without column"):
        read_telemetry(throttled.run_dir("base", 0), info)


def test_a_broken_rule_file_is_named(tmp_path: Path) -> None:
    bad = tmp_path / "causes.yaml"
    bad.write_text("format: diagnose-telemetry-rules/1\nrules:\n  - id: x\n    title: t\n")
    with pytest.raises(TelemetryError, match=r"causes\.yaml: rules\.0\.when"):
        load_rules(bad)
    assert len(load_rules()) >= 6


def test_a_host_file_from_before_steal_time_reads_it_as_empty() -> None:
    """The recorded H200 sweep's host CSVs predate the steal_pct column: they read, with the
    column empty, and no steal cause is made from nothing."""
    from diagnostic.bundle.telemetry import read_telemetry

    bundle = Bundle.open(Path(__file__).resolve().parents[1] / "samples" / "vllm-h200-mla-remedy")
    run = bundle.find_run("triton-base", 0)
    assert run is not None
    run_dir = bundle.run_dir("triton-base", 0)
    host = read_telemetry(run_dir, run)["host"]
    header = (run_dir / "telemetry" / "host.csv").read_text().splitlines()[1]
    assert "server_cpu_pct" in header and "steal_pct" not in header
    assert host["steal_pct"].isna().all() and host["server_cpu_pct"].notna().all()
    tele = analyse(bundle).telemetry
    assert tele is not None and not any(c.rule == "host-cpu-steal" for c in tele.causes)


def test_steal_is_set_against_the_busy_cpu_time(tmp_path: Path) -> None:
    """A vCPU loses only time it wanted, so 1% of 16 vCPUs stolen while the machine is 10%
    busy is a tenth of the busy time (the H200 VM's episodes: requests 20% slower). The
    other processes' CPU, which the OS's busy time held the steal in, is without it."""
    bundle = synthetic_bundle(tmp_path / "b", {"base": restarts([100, 101, 99])})
    for r, steal in enumerate([0.0, 1.0, 0.3]):
        add_telemetry(bundle, "base", r, "host", host_rows(10.0, other=40.0, steal=steal))
    tele = analyse(bundle).telemetry
    assert tele is not None
    steal = next(c for c in tele.causes if c.rule == "host-cpu-steal")
    assert (steal.restart, steal.variable) == (1, "host.steal_busy_pct")
    assert "10% of the busy CPU time went to other guests" in steal.evidence
    assert [c.restart for c in tele.causes if c.rule == "host-cpu-steal"] == [1]  # 3%: not
    other = {
        w.restart: next(s.median for s in w.stats if s.variable == "other_cpu_pct")
        for w in tele.windows
        if w.window == "code"
    }
    assert other == {0: 40.0, 1: pytest.approx(24.0), 2: pytest.approx(35.2)}


def test_the_recorded_steal_episodes_explain_the_h200_noise_on_page_one() -> None:
    """The Gemma 3 noise sweep on the H200 (issue 30, item 4): VM steal took 6-16% of the
    busy CPU time in half the restarts; the slow outlier restart is one of them, and the
    restart means go with the steal share. Page 1 says both, as a sensitivity and as an
    association; the other processes' CPU, once the steal is out of it, does not."""
    from diagnostic.report import render_html
    from diagnostic.report.build import report_context

    sample = Path(__file__).resolve().parents[1] / "samples" / "vllm-h200-gemma3-noise"
    bundle = Bundle.open(sample)
    tele = analyse(bundle).telemetry
    assert tele is not None
    [outlier] = tele.restart_outliers
    assert (outlier.arm, outlier.restart, outlier.causes) == ("base-aa", 3, ["host-cpu-steal"])
    shares = {v.workload: v for v in tele.variance if v.variable == "host.steal_busy_pct"}
    assert set(shares) == {"code", "prose"}
    assert all(v.r < 0 and v.share > 0.5 for v in shares.values())
    others = [v for v in tele.variance if v.variable == "host.other_cpu_pct"]
    assert all(v.share < 0.2 for v in others)
    ctx = report_context(bundle)
    line = ctx.summary.telemetry_line
    assert "base-aa-r3 on code ran at 388.3 tok/s against 455.5" in line
    assert re.search(r"VM steal\) in 5 of 10 runs, and it goes with \d+% on code, \d+% on", line)
    assert ctx.telemetry is not None  # one cause in 8 windows: its advice is given once
    advice = [c.advice for c in ctx.telemetry.causes]
    assert len(advice) == 8 and advice[1:] == ["As above."] * 7 and "bare-metal" in advice[0]
    # a noise study: page 1 says what its noise leaves a day with one speculative arm added
    day = [c for c in ctx.summary.caveats if "with one speculative arm added" in c]
    assert len(day) == 1 and re.match(
        r"At the restart-to-restart variation this bundle measured \(1\d%\), with one "
        r"speculative arm "
        r"added, a 6 h day holds \d+ blocks of the 3 arms \(2 comparisons\)",
        day[0],
    ), ctx.summary.caveats
    assert "Its A/A repeat measures the restart noise" in ctx.summary.missing
    # neither arm speculates: the A/A's greedy differences are not put down to verify
    html = render_html(ctx)
    assert "numerics of a restart" in html and "batched verify" not in html
