"""A bundle's writes meeting the file system: a full disk, a read-only folder, no permission
become a BundleError that says what to free or where to write, and that --resume goes on."""

from __future__ import annotations

import errno
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from diagnostic.errors import BundleError

__all__ = ["size_text", "writing"]

_FULL = {errno.ENOSPC, errno.EDQUOT}
_READ_ONLY = {errno.EROFS}
_DENIED = {errno.EACCES, errno.EPERM}


@contextmanager
def writing(path: Path) -> Iterator[None]:
    """Writes to `path` inside the block: an OSError from the file system is a BundleError
    naming the file and the remedy (nothing already fsynced is lost: a record is on disk
    whole or, torn by the disk filling mid-line, dropped by --resume)."""
    try:
        yield
    except OSError as exc:
        raise BundleError(_why(path, exc)) from None


def _why(path: Path, exc: OSError) -> str:
    if exc.errno in _FULL:
        return (
            f"{path}: the disk is full ({exc.strerror}; {_free(path)}); free space on that "
            f"file system (records already written are kept: {size_text(_bundle_root(path))} so "
            "far), then run the same command again with --resume"
        )
    if exc.errno in _READ_ONLY:
        return (
            f"{path}: the file system is read-only; give -o a folder on a writable disk "
            "(to continue this bundle, copy it there and run the command with --resume)"
        )
    if exc.errno in _DENIED:
        return f"{path}: permission denied ({exc.strerror}); give -o a folder you can write"
    if exc.errno == errno.ENAMETOOLONG:
        return f"{path}: the name is too long for the file system; use shorter names or -o"
    return f"{path}: cannot write ({exc.strerror or exc}); check the disk and the folder"


def _free(path: Path) -> str:
    for folder in (path, *path.parents):
        if folder.exists():
            try:
                usage = shutil.disk_usage(folder)
            except OSError:
                break
            return f"{size_text(usage.free)} free of {size_text(usage.total)} at {folder}"
    return "free space unknown"


def _bundle_root(path: Path) -> Path:
    """The bundle folder holding `path` (the folder above runs/), else its folder."""
    for folder in path.parents:
        if folder.name == "runs":
            return folder.parent
    return path.parent


def size_text(what: int | Path) -> str:
    """A size in words: of a number of bytes, or of a folder's files."""
    if isinstance(what, Path):
        files = what.rglob("*") if what.is_dir() else []
        what = sum(p.stat().st_size for p in files if p.is_file())
    size = float(what)
    for unit in ("bytes", "KiB", "MiB"):
        if size < 1024:
            return f"{size:.0f} {unit}" if unit == "bytes" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GiB"
