"""Shared by the log-parsing tests: the cases in tests/data/logs and the real runs they mirror."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from real_runs import REAL_RUNS

from diagnostic.schema.logfacts import LogFacts

CASES = Path(__file__).parent / "data" / "logs"


def expected_of(log: Path) -> dict[str, Any]:
    """The <case>.expected.json beside a <case>.log."""
    return json.loads(log.with_name(log.stem + ".expected.json").read_text())


def fixture_cases(prefix: str) -> list[Any]:
    """pytest params (log path, expected facts) of the written cases of one engine."""
    logs = sorted(CASES.glob(f"{prefix}*.log"))
    assert logs, f"no {prefix}*.log case in {CASES}"
    return [pytest.param(log, expected_of(log), id=log.stem) for log in logs]


def real_cases(prefix: str) -> list[Any]:
    """pytest params (real log path, expected facts) from tests/data/logs/real/."""
    files = sorted((CASES / "real").glob(f"{prefix}*.expected.json"))
    assert files, f"no real/{prefix}*.expected.json"
    out = []
    for f in files:
        expected = json.loads(f.read_text())
        out.append(pytest.param(REAL_RUNS / expected["source"], expected, id=f.stem))
    return out


def assert_facts(facts: LogFacts, expected: dict[str, Any]) -> None:
    """Every key of the expected file holds in the facts (floats to 1e-3)."""
    for key, want in expected.items():
        if key in ("source", "findings"):
            continue
        if key == "capture":
            _capture(facts, want)
        elif key == "acceptance_summary":
            _summary(facts, want)
        elif key == "spec":
            assert facts.spec.model_dump() == want
        else:
            assert getattr(facts, key) == want, key


def _capture(facts: LogFacts, want: dict[str, Any]) -> None:
    capture = facts.capture
    assert capture.configured == want["configured"]
    assert capture.resolved == want["resolved"], capture.reason
    if "evidence_lines" in want:
        assert [e.line for e in capture.evidence] == want["evidence_lines"]
    if "per_worker" in want:
        assert capture.per_worker == want["per_worker"]
    assert capture.reason  # every conclusion says why


def _summary(facts: LogFacts, want: dict[str, Any] | None) -> None:
    if want is None:
        assert facts.acceptance_summary is None
        return
    got = facts.acceptance_summary
    assert got is not None
    for key, value in want.items():
        actual = getattr(got, key)
        if isinstance(value, list | float):
            assert actual == pytest.approx(value, abs=1e-3), key
        else:
            assert actual == value, key
