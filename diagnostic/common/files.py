"""Paths a user gives (a log, a folder of logs) checked before they are read: a regular file or
a folder, never a pipe, a device or a kernel pseudo-file whose size says nothing."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from diagnostic.errors import DiagnosticError

__all__ = ["readable_path"]


def readable_path(path: Path) -> Path:
    """`path` when it is a folder or a regular file that reads as what its size says.

    A pipe blocks its reader, a device never ends, and /proc or /sys files say 0 bytes while
    holding text (so seeking in them fails): each is a DiagnosticError saying to copy the text
    into an ordinary file first.
    """
    try:
        info = os.stat(path)
    except OSError as exc:
        raise DiagnosticError(f"{path}: cannot read ({exc.strerror}); check the path") from None
    if stat.S_ISDIR(info.st_mode):
        return path
    if not stat.S_ISREG(info.st_mode):
        raise DiagnosticError(
            f"{path}: not a regular file (a pipe, socket or device); copy the log into a file "
            "and give that"
        )
    if info.st_size == 0 and _reads_something(path):
        raise DiagnosticError(
            f"{path}: a kernel pseudo-file (its size is 0 yet it holds text, as in /proc and "
            "/sys); copy it into a file and give that"
        )
    return path


def _reads_something(path: Path) -> bool:
    try:
        with open(path, "rb") as fh:
            return bool(fh.read(1))
    except OSError as exc:
        raise DiagnosticError(f"{path}: cannot read ({exc.strerror}); check the path") from None
