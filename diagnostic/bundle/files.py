"""A bundle's files on disk: written atomically (a reader sees the old content or the new,
never a torn mix; a full disk or a read-only folder said plainly) and JSON read back with a
message that names the file, the line and what to do."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from diagnostic.bundle.disk import writing
from diagnostic.bundle.gate import parse_json
from diagnostic.errors import BundleError
from diagnostic.schema.bundle import SCHEMA_VERSION

__all__ = [
    "atomic_write_bytes",
    "atomic_write_text",
    "check_version",
    "load_json",
    "run_id",
    "validate",
]

M = TypeVar("M", bound=BaseModel)
_UMASK = os.umask(0o022)
os.umask(_UMASK)


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write a file so a reader sees the old content or the new one, never a torn mix; a
    full disk or a read-only folder is a BundleError saying what to do."""
    with writing(path):
        _atomic_write(path, data)


def _atomic_write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~_UMASK)  # mkstemp makes 0600; a report is meant to be shared
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


def atomic_write_text(path: Path, text: str) -> None:
    """atomic_write_bytes for UTF-8 text."""
    atomic_write_bytes(path, text.encode("utf-8"))


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def load_json(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise BundleError(f"{path}: missing") from None
    except UnicodeDecodeError as exc:
        raise BundleError(f"{path}: not UTF-8 text ({exc.reason}); the file is corrupt") from None
    except OSError as exc:
        raise BundleError(f"{path}: cannot read ({exc.strerror}); check permissions") from None
    try:
        return parse_json(text, str(path))
    except json.JSONDecodeError as exc:
        raise BundleError(
            f"{path}:{exc.lineno}: corrupt JSON ({exc.msg}); restore it from a copy"
        ) from None


def check_version(path: Path, data: Any, newest: int = SCHEMA_VERSION) -> None:
    version = data.get("schema_version") if isinstance(data, dict) else None
    if isinstance(version, int) and version > newest:
        raise BundleError(
            f"{path}: schema_version {version} is newer than this diagnose reads "
            f"({newest}); upgrade diagnose (pip install -U diagnose)"
        )


def validate(model: type[M], path: Path, data: Any, line: int | None = None) -> M:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        where = f"{path}:{line}" if line else str(path)
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"]) or "(top)"
        raise BundleError(f"{where}: invalid {model.__name__}: {loc}: {first['msg']}") from None


def run_id(arm: str, restart: int) -> str:
    """Folder name of one run: `<arm>-r<restart>`."""
    return f"{arm}-r{restart}"
