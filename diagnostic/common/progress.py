"""The reporter protocol through which stages show progress; only the CLI implements output."""

from __future__ import annotations

from typing import Protocol


def duration(seconds: float) -> str:
    """A wall-clock span as people say it: '45 s', '12 min', '2 h 05 min'."""
    minutes = round(seconds / 60)
    if minutes < 1:
        return f"{seconds:.0f} s"
    return f"{minutes // 60} h {minutes % 60:02d} min" if minutes >= 60 else f"{minutes} min"


class Reporter(Protocol):
    """Receives progress from a stage; the CLI draws it, tests ignore it."""

    def start(self, label: str, total: int | None) -> None:
        """A task of `total` steps begins (None when the total is unknown)."""

    def advance(self, label: str, steps: int = 1, status: str | None = None) -> None:
        """`steps` steps of the task are done; `status` is a short line (e.g. last tok/s)."""

    def note(self, message: str) -> None:
        """A line worth telling the user (a warning, a skipped run)."""


class NullReporter:
    """A reporter that shows nothing (library use and tests)."""

    def start(self, label: str, total: int | None) -> None:
        """Ignore the start of a task."""

    def advance(self, label: str, steps: int = 1, status: str | None = None) -> None:
        """Ignore progress."""

    def note(self, message: str) -> None:
        """Ignore notes."""


class WithOverall:
    """The reporter a stage's inner loop sees: forwards every call to `outer`, and moves one
    overall bar (`overall`, started by the caller with the whole run's steps) by the same
    steps, its status saying where the run is (`where`) and `headline` (e.g. the likely end)."""

    def __init__(self, outer: Reporter, overall: str, where: str = "") -> None:
        self.outer = outer
        self.overall = overall
        self.where = where
        self.headline = ""
        self.done = 0

    def start(self, label: str, total: int | None) -> None:
        """A task of the run (a workload) begins."""
        self.outer.start(label, total)

    def advance(self, label: str, steps: int = 1, status: str | None = None) -> None:
        """Requests done: the task's bar and the overall one move together."""
        self.outer.advance(label, steps, status)
        self.done += steps
        self.outer.advance(self.overall, steps, status=self.line(label.split(" ", 1)[-1], status))

    def note(self, message: str) -> None:
        """Pass notes through."""
        self.outer.note(message)

    def line(self, *parts: str | None) -> str:
        """The overall bar's status: where, the parts given, the headline."""
        return " · ".join(p for p in (self.where, *parts, self.headline) if p)
