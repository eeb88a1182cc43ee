"""The registry of automatic checklist checks: a check judges one checklist item from a
bundle's files alone and says what it saw in one line; helpers the checks share."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Literal

from diagnostic.bundle.store import run_id
from diagnostic.checklist.bundle_facts import BundleFacts
from diagnostic.schema.bundle import RunInfo

__all__ = [
    "AUTO_CHECKS",
    "SHOWN",
    "Check",
    "CheckResult",
    "Status",
    "as_number",
    "few_names",
    "register",
    "run_name",
]

Status = Literal["done", "not_done", "not_applicable"]

SHOWN = 3  # offenders named in one evidence line before "and N more"


@dataclass(frozen=True)
class CheckResult:
    """What one automatic check found: a status and one line of evidence."""

    status: Status
    evidence: str


CheckFn = Callable[[BundleFacts], CheckResult]


@dataclass(frozen=True)
class Check:
    """A named automatic check that a checklist item may refer to with `check: <name>`."""

    name: str
    title: str
    evaluate: CheckFn


AUTO_CHECKS: dict[str, Check] = {}


def register(name: str, title: str) -> Callable[[CheckFn], CheckFn]:
    """Register the decorated function as the automatic check `name`."""

    def add(fn: CheckFn) -> CheckFn:
        AUTO_CHECKS[name] = Check(name, title, fn)
        return fn

    return add


def run_name(run: RunInfo) -> str:
    """A run as evidence names it: <arm>-r<restart>."""
    return run_id(run.arm, run.restart)


def few_names(items: Iterable[str]) -> str:
    """The first few items, then how many more."""
    items = list(items)
    shown = ", ".join(items[:SHOWN])
    return shown + (f" and {len(items) - SHOWN} more" if len(items) > SHOWN else "")


def as_number(value: Any) -> float | None:
    """A number given as a number or a string (a bool is none)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None
