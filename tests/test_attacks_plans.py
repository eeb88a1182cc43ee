"""Issue 34: plans and commands a careless or hostile user writes. Absurd values are refused at
load naming the limit; a launch that daemonises, a health or stop command that never returns
end within the timeouts the plan states (with defaults), and say which."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import free_port

from diagnostic import defaults
from diagnostic.cli import main
from diagnostic.errors import LaunchError, PlanError
from diagnostic.measure.health import wait_command, wait_healthy
from diagnostic.measure.launch import run_shell, start_server
from diagnostic.measure.plan.spec import load_plan, parse_plan

ARM = '[[arms]]\nname = "baseline"\nlaunch = "s --port {port}"\n'


@pytest.mark.parametrize(
    ("line", "says"),
    [
        ("requests = 1000000000000", f"less than or equal to {defaults.LIMIT_REQUESTS}"),
        ("warmup = 1000000000000", f"less than or equal to {defaults.LIMIT_WARMUP}"),
        ("max_tokens = 1000000000000000000", f"less than or equal to {defaults.LIMIT_MAX_TOKENS}"),
        ("restarts = -1", "greater than or equal to 1"),
        ("restarts = 1000000000", f"less than or equal to {defaults.LIMIT_RESTARTS}"),
        ("port = -1", "greater than or equal to 1"),
        ("port = 70000", "less than or equal to 65535"),
        ("port = 1000000000000000000", "less than or equal to 65535"),
        ("health_timeout_s = inf", "less than or equal to 86400"),
        ("health_timeout_s = 1e308", "less than or equal to 86400"),
        ("command_timeout_s = -5", "greater than 0"),
        ("seed = 1000000000000000000000000000000", "less than or equal to 9007199254740992"),
        ("concurrency = 1000000000", f"1 to {defaults.LIMIT_CONCURRENCY:,}"),
        ("requests = 100000\nrestarts = 1000", "schedules"),
    ],
)
def test_absurd_plan_values_are_refused_at_load_with_the_limit(line: str, says: str) -> None:
    with pytest.raises(PlanError) as caught:
        parse_plan(f"[plan]\n{line}\n{ARM}", source="plan.toml")
    assert says in str(caught.value) and "plan.toml" in str(caught.value)


def test_a_sweep_of_millions_of_arms_is_refused_before_expanding() -> None:
    values = ", ".join(str(i) for i in range(400))
    text = (
        f"[plan]\n{ARM}"
        '[[arms]]\nname = "x{a}-{b}-{c}"\nlaunch = "s --port {port} {a} {b} {c}"\n'
        f"sweep = {{ a = [{values}], b = [{values}], c = [{values}] }}\n"
    )
    with pytest.raises(PlanError, match="64,000,001 arms, more than 1,000"):
        parse_plan(text, source="plan.toml")


def test_a_plan_file_of_gigabytes_is_not_read(tmp_path: Path) -> None:
    plan = tmp_path / "plan.toml"
    with plan.open("wb") as fh:
        fh.truncate(defaults.LIMIT_PLAN_BYTES + 1)  # sparse: costs no disk
    with pytest.raises(PlanError, match="more than a plan file holds"):
        load_plan(plan)


@pytest.mark.parametrize(
    "option",
    [
        ("--requests", "1000000000000"),
        ("--max-tokens", "1000000000000000000"),
        ("--restart", "-1"),
        ("--concurrency", "1000000000"),
        ("--timeout", "1e308"),
    ],
)
def test_absurd_collect_options_are_refused_with_the_range(
    tmp_path: Path, option: tuple[str, str]
) -> None:
    out = tmp_path / "b"
    result = CliRunner().invoke(main, ["collect", "http://127.0.0.1:9", "-o", str(out), *option])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert option[0] in result.output and "range" in result.output
    assert not out.exists()


def test_a_command_whose_daemon_holds_its_output_ends_at_its_timeout() -> None:
    # The daemon (a session of its own) outlives the kill and keeps the pipe open: the
    # command's result comes all the same, saying so. It ends by itself later.
    result = run_shell("setsid sleep 20 & sleep 300", env={}, timeout_s=1.0)
    assert result.returncode is None and "no end within 1 s" in result.why()
    assert "background" in result.why()


def test_a_health_command_that_never_returns_is_bounded_by_the_plan(tmp_path: Path) -> None:
    server = start_server("exec sleep 60", env={}, log_path=tmp_path / "server.log")
    try:
        with pytest.raises(LaunchError) as caught:
            wait_command(
                server, "sleep 100000", env={}, timeout_s=3.0, poll_s=0.1, command_timeout_s=1.0
            )
    finally:
        server.stop(grace_s=5)
    message = str(caught.value)
    assert "within 3 s" in message and "command_timeout_s" in message
    assert "health_timeout_s" in message


@pytest.mark.parametrize("holds_output", [False, True])
def test_a_launch_that_daemonises_and_exits_is_said(tmp_path: Path, holds_output: bool) -> None:
    redirect = "" if holds_output else " > /dev/null 2>&1 < /dev/null"
    port = free_port()
    launch = f"setsid sleep 20{redirect} & echo started; exit 0"
    server = start_server(launch, env={}, log_path=tmp_path / "server.log")
    try:
        with pytest.raises(LaunchError) as caught:
            wait_healthy(server, f"http://127.0.0.1:{port}", timeout_s=60)
    finally:
        server.stop(grace_s=5)
    # said at once, not "did not become healthy" at the health timeout
    assert "in the background" in str(caught.value) and "[plan] stop" in str(caught.value)


def test_a_daemonising_launch_with_a_stop_command_is_waited_for(tmp_path: Path) -> None:
    server = start_server("exit 0", env={}, log_path=tmp_path / "server.log", daemon_ok=True)
    try:
        with pytest.raises(LaunchError, match="did not become healthy within 2 s"):
            wait_healthy(server, f"http://127.0.0.1:{free_port()}", timeout_s=2)
    finally:
        server.stop(grace_s=5)
    assert server.daemonised


def test_the_plan_states_the_command_timeout_and_its_default() -> None:
    plan = parse_plan(f"[plan]\n{ARM}", source="plan.toml")
    assert plan.options.command_timeout_s == defaults.SHELL_TIMEOUT_S
    plan = parse_plan(f"[plan]\ncommand_timeout_s = 5\n{ARM}", source="plan.toml")
    assert plan.options.command_timeout_s == 5
