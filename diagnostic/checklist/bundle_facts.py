"""A bundle read once for the automatic checks: runs, request records and logs, shared."""

from __future__ import annotations

from functools import cached_property
from pathlib import Path

from diagnostic.bundle.store import SERVER_LOG, Bundle, run_id
from diagnostic.schema.bundle import ArmSpec, RequestRecord, RunInfo

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

    def log_names(self, run: RunInfo) -> list[str]:
        """Log files the run lists (plain names inside the run folder), or server.log."""
        names = [n for n in run.logs if n and Path(n).name == n and n not in {".", ".."}]
        return names or [SERVER_LOG]

    def log_text(self, run: RunInfo) -> str:
        """Every log of a run, concatenated (undecodable bytes replaced)."""
        parts = []
        for name in self.log_names(run):
            path = self.bundle.run_file(run.arm, run.restart, name)
            if path.is_file():
                parts.append(path.read_text(encoding="utf-8", errors="replace"))
        return "\n".join(parts)

    def file_size(self, run: RunInfo, name: str) -> int:
        """Size of a file in the run folder, 0 when absent."""
        path = self.bundle.run_file(run.arm, run.restart, name)
        return path.stat().st_size if path.is_file() else 0
