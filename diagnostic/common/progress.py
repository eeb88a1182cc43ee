"""The reporter protocol through which stages show progress; only the CLI implements output."""

from __future__ import annotations

from typing import Protocol


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
