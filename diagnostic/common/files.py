"""Paths a user gives, checked first: a log or a folder of logs before it is read (a regular
file or a folder, never a pipe, a device or a kernel pseudo-file whose size says nothing), and
an output before anything is rendered for it (a place where a file can be written)."""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

from diagnostic.errors import DiagnosticError

__all__ = ["readable_path", "writable_destination"]


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


def writable_destination(path: Path, *, folder: bool = False) -> Path:
    """`path` when the output (a file, or with `folder` a folder of files) can be written there.

    Checked by creating and removing a scratch file in the nearest folder that exists (missing
    folders are made on writing), so a read-only mount or a root-owned folder fails here, with
    the destination named, rather than after rendering on a temporary file's name.
    """
    if path.is_dir() and not folder:
        raise DiagnosticError(f"{path}: is a folder; give a file name, e.g. {path / 'report.pdf'}")
    if path.exists() and not path.is_dir() and folder:
        raise DiagnosticError(f"{path}: is a file, not a folder; give a folder for the tables")
    existing = path if folder and path.is_dir() else path.parent
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise DiagnosticError(
            f"{path}: cannot be written, {existing} is a file, not a folder; choose another -o"
        )
    try:
        with tempfile.TemporaryFile(dir=existing, prefix=".diagnose-probe-"):
            pass
    except OSError as exc:
        raise DiagnosticError(
            f"{path}: cannot be written ({exc.strerror} in {existing}); choose another -o or "
            "fix the folder's permissions"
        ) from None
    return path
