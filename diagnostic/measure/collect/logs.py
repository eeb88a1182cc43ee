"""collect's --log options -> log sources: NAME=PATH or PATH, a PATH possibly a glob."""

from __future__ import annotations

import glob
import re
from collections.abc import Sequence
from pathlib import Path

from diagnostic.common.files import readable_path
from diagnostic.errors import DiagnosticError
from diagnostic.schema.bundle import MAIN_SOURCE, source_name

__all__ = ["log_sources"]

_UNSAFE = re.compile(r"[^A-Za-z0-9._+=-]+")


def log_sources(options: Sequence[str | Path]) -> dict[str, Path]:
    """Source name -> file, in the order given. `NAME=PATH` names the source (several files
    matched by a glob become NAME-<file stem>); a bare PATH is `server`, the next
    `server-2`, … as before sources had names. Every file must be a readable regular file."""
    sources: dict[str, Path] = {}
    unnamed = 0
    for option in map(str, options):
        name, pattern = _split(option)
        files = _expand(option, pattern)
        for path in files:
            if name is None:
                unnamed += 1
                source = MAIN_SOURCE if unnamed == 1 else f"{MAIN_SOURCE}-{unnamed}"
            else:
                source = name if len(files) == 1 else _named(name, path)
            if source in sources:
                raise DiagnosticError(
                    f"--log {option}: source {source!r} is given twice ({sources[source]} and "
                    f"{path}); give each log its own NAME=PATH"
                )
            sources[source] = readable_path(path)
    return sources


def _split(option: str) -> tuple[str | None, str]:
    name, eq, rest = option.partition("=")
    if not eq or "/" in name or Path(option).exists():
        return None, option
    try:
        return source_name(name), rest
    except ValueError as exc:
        raise DiagnosticError(f"--log {option}: {exc}") from None


def _expand(option: str, pattern: str) -> list[Path]:
    if glob.has_magic(pattern):
        files = [Path(p) for p in sorted(glob.glob(str(Path(pattern).expanduser())))]
        files = [p for p in files if p.is_file()]
        if not files:
            raise DiagnosticError(f"--log {option}: no file matches {pattern}; check the pattern")
        return files
    path = Path(pattern).expanduser()
    if not path.is_file():
        raise DiagnosticError(f"{path}: no such log file (--log); give the server's log file")
    return [path]


def _named(name: str, path: Path) -> str:
    stem = _UNSAFE.sub("-", path.name.removesuffix(".log")).strip("-.") or "log"
    return source_name(f"{name}-{stem}")
