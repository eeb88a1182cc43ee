"""The command line: help for every command, version, clear errors and exit codes."""

import re

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
