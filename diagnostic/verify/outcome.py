"""What `diagnose verify` found: one result per check, and the exit code they make together."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from diagnostic.bundle.seal import Root

__all__ = ["EXIT_CODES", "Check", "Fault", "Status", "VerifyReport"]

Status = Literal["ok", "failed", "note", "skipped"]
# What a failed check says is wrong, and the exit code it gives (the highest one wins):
#   deliverable     1  the report, analysis.json or findings.json does not follow from the bundle
#   integrity       3  the bundle's own record fails: a file against its seal, a planned run
#                      missing without a reason, a run sealed elsewhere, a signature
#   another-bundle  4  the report PDF was made from another bundle
Fault = Literal["deliverable", "integrity", "another-bundle"]
EXIT_CODES: dict[Fault, int] = {"deliverable": 1, "integrity": 3, "another-bundle": 4}


@dataclass
class Check:
    """One check: its outcome in a line, and each problem named (file, run, page, figure)."""

    name: str
    status: Status
    summary: str
    problems: list[str] = field(default_factory=list)
    fault: Fault | None = None  # set when failed
    details: list[str] = field(default_factory=list)  # lines worth reading that are no fault

    @classmethod
    def failed(cls, name: str, fault: Fault, summary: str, problems: list[str]) -> Check:
        """A check that found problems."""
        return cls(name, "failed", summary, problems, fault)


@dataclass
class VerifyReport:
    """Every check `diagnose verify` ran on a bundle (and the deliverable given with it)."""

    bundle: Path
    root: Root
    stored: Path | None = None
    checks: list[Check] = field(default_factory=list)

    @property
    def failures(self) -> list[Check]:
        """The checks that failed."""
        return [c for c in self.checks if c.status == "failed"]

    @property
    def exit_code(self) -> int:
        """0 when nothing failed; else the highest code of the faults found (EXIT_CODES)."""
        return max((EXIT_CODES[c.fault] for c in self.failures if c.fault), default=0)
