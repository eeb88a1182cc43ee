"""A bundle read once for the automatic checks: runs, request records and logs, shared."""

from __future__ import annotations

from functools import cached_property

from diagnostic.bundle.store import Bundle, run_id
from diagnostic.schema.bundle import ArmSpec, RunInfo
from diagnostic.schema.requests import RequestRecord

__all__ = ["BundleFacts"]


class BundleFacts:
    """A bundle read once: runs, request records and logs, shared by every check."""

    def __init__(self, bundle: Bundle) -> None:
        self.bundle = bundle

    @cached_property
    def runs(self) -> list[RunInfo]:
        """Every run.json of the bundle."""
        return self.bundle.runs()

    @cached_property
    def arms(self) -> dict[str, ArmSpec]:
        """The plan's arms by name."""
        return {arm.name: arm for arm in self.bundle.manifest.plan.arms}

    @cached_property
    def requests(self) -> dict[str, list[RequestRecord]]:
        """Request records of every run, by run id."""
        return {
            run_id(r.arm, r.restart): self.bundle.read_requests(r.arm, r.restart).records
            for r in self.runs
        }

    def measured(self, run: RunInfo) -> list[RequestRecord]:
        """Requests of a run that count: not warm-up, not failed."""
        return [
            rec
            for rec in self.requests[run_id(run.arm, run.restart)]
            if not rec.warmup and rec.error is None
        ]

    def usable(self, run: RunInfo) -> bool:
        """A run that did not fail and measured at least one request."""
        return run.status != "failed" and bool(self.measured(run))

    def log_text(self, run: RunInfo) -> str:
        """Every log source of a run, concatenated (undecodable bytes replaced)."""
        paths = self.bundle.log_sources(run).values()
        return "\n".join(p.read_text(encoding="utf-8", errors="replace") for p in paths)

    def file_size(self, run: RunInfo, name: str) -> int:
        """Size of a file in the run folder, 0 when absent."""
        path = self.bundle.run_file(run.arm, run.restart, name)
        return path.stat().st_size if path.is_file() else 0
