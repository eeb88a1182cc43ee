"""The quiet window before a run's first request (issue 45): the host's VM steal and a probe
thread's share, measured on this machine, recorded in run.json by collect and sweep, and said
honestly where the host does not report steal. No test asserts a timing or a rate."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from pydantic import ValidationError

from diagnostic.measure.plan.spec import parse_plan
from diagnostic.measure.sweep.stage import run_settings
from diagnostic.measure.telemetry import TelemetrySettings
from diagnostic.measure.telemetry.quiet import IdleProbe, quiet_window, steal_seconds
from diagnostic.schema.bundle import RunInfo
from diagnostic.schema.telemetry import QuietWindow, steal_reported

SAMPLES = Path(__file__).parents[1] / "samples"


def test_the_window_measures_this_machine() -> None:
    window = quiet_window(0.2)
    assert window.ticks >= 1 and window.cores >= 1 and 0 <= window.spin_share <= 1
    # the host's steal as it is: a figure where the OS has the counter, else None
    counter = steal_seconds()
    assert (window.steal_cores is None) == (counter is None)
    assert (window.steal_since_boot_s is None) == (counter is None)
    again = QuietWindow.model_validate(window.model_dump())  # what run.json stores reads back
    assert again == window


def test_the_idle_probe_reports_only_what_it_measured() -> None:
    probe = IdleProbe(tick_s=0.001, spin_s=0.0005, spin_every=2)
    try:
        deadline = time.monotonic() + 30  # until it has ticked and spun (never a timing)
        late, share = None, None
        while (late is None or share is None) and time.monotonic() < deadline:
            time.sleep(0.05)
            late, share = probe.take()
        assert late is not None and late >= 0 and share is not None and 0 <= share <= 1
    finally:
        probe.close()
    probe.take()  # what it measured before it stopped
    assert probe.take() == (None, None)  # stopped: nothing new


def _window(since_boot: float | None, steal: float | None = 0.0) -> QuietWindow:
    return QuietWindow(
        seconds=4.0,
        cores=16,
        steal_cores=steal,
        steal_since_boot_s=since_boot,
        spin_share=1.0,
        tick_s=0.005,
        ticks=400,
        tick_late_ms=0.1,
    )


def test_a_counter_that_never_moved_or_is_missing_is_not_available() -> None:
    # an H200 VM just booted reads 0 in its first runs and moves later: available
    assert steal_reported([_window(0.0), _window(0.25, 0.05)]) is None
    never = steal_reported([_window(0.0), _window(0.0)])
    assert never is not None and "never moved since boot" in never
    missing = steal_reported([_window(None, None), _window(0.3)])
    assert missing is not None and "no VM steal counter" in missing
    assert steal_reported([]) is not None


def test_run_json_keeps_the_window_and_older_runs_read_without_one() -> None:
    window = quiet_window(0.1)
    run = RunInfo(arm="base", restart=0, quiet=window)
    assert RunInfo.model_validate_json(run.model_dump_json()).quiet == window
    for path in sorted(SAMPLES.glob("*/runs/*/run.json"))[:3]:  # recorded before the window
        assert RunInfo.model_validate_json(path.read_text()).quiet is None
    with pytest.raises(ValidationError):
        QuietWindow.model_validate({**window.model_dump(), "spin_share": 1.5})


PLAN = """
[plan]
restarts = 1
workloads = ["code"]
telemetry_local = true
{quiet}

[[arms]]
name = "baseline"
launch = "llama-server --port {{port}}"
"""


def test_the_plan_sets_the_window_and_zero_turns_it_off() -> None:
    plan = parse_plan(PLAN.format(quiet="telemetry_quiet_s = 1.5"), source="plan.toml")
    settings = run_settings(plan, api_key=None, timeout_s=None)
    assert settings.telemetry is not None and settings.telemetry.quiet_s == 1.5
    plan = parse_plan(PLAN.format(quiet=""), source="plan.toml")
    default = run_settings(plan, api_key=None, timeout_s=None).telemetry
    assert default is not None and default.quiet_s == TelemetrySettings().quiet_s > 0
    with pytest.raises(Exception, match="telemetry_quiet_s"):
        parse_plan(PLAN.format(quiet="telemetry_quiet_s = -1"), source="plan.toml")
