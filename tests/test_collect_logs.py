"""collect's --log options: NAME=PATH, bare PATH (server, server-2, …), globs, mistakes."""

from __future__ import annotations

from pathlib import Path

import pytest

from diagnostic.errors import DiagnosticError
from diagnostic.measure.collect.logs import log_sources


@pytest.fixture
def logs(tmp_path: Path) -> Path:
    for name in ("head.log", "gpu-a.log", "gpu b.log", "x=y.log"):
        (tmp_path / name).write_text(f"{name}\n")
    return tmp_path


def test_bare_paths_are_server_then_numbered_as_before(logs: Path) -> None:
    got = log_sources([logs / "head.log", str(logs / "gpu-a.log")])
    assert got == {"server": logs / "head.log", "server-2": logs / "gpu-a.log"}


def test_named_paths_and_a_glob_give_one_source_per_file(logs: Path) -> None:
    got = log_sources([f"head={logs}/head.log", f"node={logs}/gpu*.log"])
    # one match keeps NAME; several become NAME-<stem>, the stem made a safe file name
    assert got == {
        "head": logs / "head.log",
        "node-gpu-a": logs / "gpu-a.log",
        "node-gpu-b": logs / "gpu b.log",
    }
    assert log_sources([f"one={logs}/head*.log"]) == {"one": logs / "head.log"}


def test_a_file_whose_name_holds_an_equals_sign_is_a_path(logs: Path) -> None:
    assert log_sources([str(logs / "x=y.log")]) == {"server": logs / "x=y.log"}


@pytest.mark.parametrize(
    ("option", "needle"),
    [
        ("nope.log", "no such log file"),
        ("node=/nonexistent/*.log", r"--log node=/nonexistent/\*\.log: no file matches"),
        ("bad.log=x.log", "cannot name a file"),
        ("-x=x.log", "cannot name a file"),
    ],
)
def test_mistakes_name_the_option_and_the_fix(option: str, needle: str, logs: Path) -> None:
    with pytest.raises(DiagnosticError, match=needle):
        log_sources([option])


def test_a_source_given_twice_is_refused(logs: Path) -> None:
    with pytest.raises(DiagnosticError, match="source 'head' is given twice"):
        log_sources([f"head={logs}/head.log", f"head={logs}/gpu-a.log"])
