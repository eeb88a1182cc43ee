"""The command line: help for every command, version, clear errors and exit codes."""

import re
import subprocess
import sys

import click
import pytest
from click.testing import CliRunner

from diagnostic import __version__
from diagnostic.cli import main

COMMANDS = ["collect", "sweep", "check", "report", "checklist"]


def test_help_lists_every_command() -> None:
    out = CliRunner().invoke(main, ["--help"]).output
    for name in COMMANDS:
        assert re.search(rf"^\s+{name}\s+\S", out, re.M), name


@pytest.mark.parametrize("name", COMMANDS)
def test_every_command_has_help_with_an_example(name: str) -> None:
    result = CliRunner().invoke(main, [name, "--help"])
    assert result.exit_code == 0
    assert "Example" in result.output and f"diagnose {name}" in result.output


@pytest.mark.parametrize("name", COMMANDS)
def test_every_command_is_in_the_readme(name: str) -> None:
    from pathlib import Path

    readme = (Path(__file__).parents[1] / "README.md").read_text()
    assert f"diagnose {name}" in readme


def test_version() -> None:
    result = CliRunner().invoke(main, ["--version"])
    assert result.exit_code == 0 and __version__ in result.output


def test_user_errors_are_one_line_without_traceback(tmp_path: object) -> None:
    result = CliRunner().invoke(main, ["report", "/nonexistent/bundle", "--format", "json"])
    assert result.exit_code != 0
    assert "Traceback" not in result.output
    assert "Error:" in result.output or "Usage:" in result.output


@pytest.mark.parametrize("name", ["collect", "sweep", "report", "checklist"])
def test_every_output_is_spelled_o_output(name: str) -> None:
    """One spelling; the old `--out` of collect, sweep and report parses but is not shown."""
    out = CliRunner().invoke(main, [name, "--help"]).output
    assert re.search(r"^\s+-o, --output PATH\s", out, re.M), out
    assert not re.search(r"--out\b", out), out


def test_a_missing_output_is_named_by_its_one_spelling(tmp_path: object) -> None:
    result = CliRunner().invoke(main, ["collect", "http://127.0.0.1:9"])
    assert result.exit_code == 2 and "Missing option '-o' / '--output'." in result.output


@pytest.mark.parametrize(
    ("argv", "wrong"),
    [
        (["collect", "http://127.0.0.1:9", "--outt", "b"], "--outt"),
        (["report", "b", "--ou", "x"], "--ou"),
    ],
)
def test_a_wrong_flag_suggests_the_spelling_help_shows(argv: list[str], wrong: str) -> None:
    """click would suggest every spelling it parses, the hidden `--out` first."""
    result = CliRunner().invoke(main, argv)
    assert result.exit_code == 2
    assert f"No such option: {wrong}." in result.output and "-o/--output" in result.output
    assert not re.search(r"--out\b(?!put)", result.output), result.output


def test_an_unknown_command_names_the_closest_one() -> None:
    result = CliRunner().invoke(main, ["repor", "bundle"])
    assert result.exit_code == 2
    assert "No such command 'repor' (did you mean report?)" in result.output


def test_the_command_list_loads_every_command() -> None:
    """`diagnose --help` lists COMMANDS without importing them; each name loads its command."""
    from diagnostic.cli import COMMANDS

    ctx = click.Context(main)
    assert main.list_commands(ctx) == list(COMMANDS)
    for name in COMMANDS:
        command = main.get_command(ctx, name)
        assert command is not None and command.name == name


_HEAVY = ("scipy", "pandas", "matplotlib", "weasyprint")
_LOADED = "import sys; print('loaded:', *(m for m in {mods!r} if m in sys.modules))"


@pytest.mark.parametrize("argv", [[], ["--help"], *([name, "--help"] for name in COMMANDS)])
def test_start_up_imports_no_heavy_library(argv: list[str]) -> None:
    """Importing the CLI, its --help and each command's --help load none of the slow libraries
    (scipy, pandas, matplotlib, WeasyPrint: seconds on a busy machine); the bare import loads no
    command module either. What is imported is the test, not how long it takes."""
    mods = (*_HEAVY, "pydantic", "httpx") if not argv else _HEAVY
    run = f"from diagnostic.cli import main; main({argv!r}, standalone_mode=False)" if argv else ""
    code = f"import diagnostic.cli\n{run}\n{_LOADED.format(mods=mods)}"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.splitlines()[-1] == "loaded:", done.stdout
