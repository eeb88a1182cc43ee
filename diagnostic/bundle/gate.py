"""What the bundle reader lets through: JSON of plain, finite, bounded values; only the
bundle's own regular files (no link out of it, no device, pipe or socket); /metrics text the
Prometheus parser reads. Every refusal is a BundleError naming the file, never its content."""

from __future__ import annotations

import json
import math
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from diagnostic.errors import BundleError, NotFinite

__all__ = [
    "MAX_DEPTH",
    "MAX_INT",
    "bundle_files",
    "check_metrics",
    "check_tree",
    "metrics_problem",
    "parse_json",
    "plain_json",
]

MAX_DEPTH = 64  # JSON nesting; the engines' deepest answer (vLLM's server_info) is under 10
MAX_INT = 2**53  # larger integers lose precision as floats (and JSON readers disagree on them)
_DAMAGED = "the bundle was edited or damaged"


def _refuse_constant(name: str) -> Any:
    raise NotFinite(name)


def parse_json(data: str | bytes, where: str) -> Any:
    """Parse JSON text for the bundle: nesting, numbers and their range checked, so no later
    stage meets a RecursionError, a NaN or a 5,000-digit integer. `where` names the file (and
    line) in the BundleError; json.JSONDecodeError passes through for the caller to word."""
    try:
        value = json.loads(data, parse_constant=_refuse_constant)
    except RecursionError:
        raise BundleError(f"{where}: JSON nested too deeply; {_DAMAGED}") from None
    except NotFinite as exc:
        raise BundleError(f"{where}: {exc} is not a number JSON allows; {_DAMAGED}") from None
    except json.JSONDecodeError:
        raise
    except ValueError:  # int() digit limit: "Exceeds the limit (4300 digits)"
        raise BundleError(f"{where}: an integer with thousands of digits; {_DAMAGED}") from None
    _check_values(value, where)
    return value


def _check_values(value: Any, where: str) -> None:
    stack: list[tuple[Any, str, int]] = [(value, "", 0)]
    while stack:
        item, at, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise BundleError(f"{where}: JSON nested deeper than {MAX_DEPTH} levels; {_DAMAGED}")
        if isinstance(item, dict):
            stack.extend((v, _key(at, k), depth + 1) for k, v in item.items())
        elif isinstance(item, list):
            stack.extend((v, f"{at}[{i}]", depth + 1) for i, v in enumerate(item))
        elif isinstance(item, float) and not math.isfinite(item):
            raise BundleError(f"{where}: {at or 'value'} is {item}, not finite; {_DAMAGED}")
        elif isinstance(item, int) and not isinstance(item, bool) and abs(item) > MAX_INT:
            raise BundleError(f"{where}: {at or 'value'} is out of range (> 2^53); {_DAMAGED}")


def plain_json(value: Any, depth: int = 0) -> Any:
    """`value` as the reader will take it: nesting past MAX_DEPTH and integers past MAX_INT
    (a server's answer may hold either) become short strings, NaN and infinities null, so a
    bundle written is readable."""
    if depth >= MAX_DEPTH:
        return "<nested too deep>"
    if isinstance(value, dict):
        return {k: plain_json(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        return [plain_json(v, depth + 1) for v in value]
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_INT:
        return "<integer too large>"
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _key(at: str, key: str) -> str:
    """A key path for a message: plain names as they are, any other key quoted and escaped."""
    name = key if key.isidentifier() else json.dumps(key[:40])
    return f"{at}.{name}" if at else name


def _entries(root: Path) -> Iterator[tuple[Path, os.stat_result]]:
    """Every entry under root with its lstat, links not followed, folders walked iteratively."""
    folders = [root]
    while folders:
        folder = folders.pop()
        try:
            with os.scandir(folder) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            raise BundleError(f"{folder}: cannot list ({exc.strerror}); check its mode") from None
        for entry in entries:
            path = Path(entry.path)
            info = entry.stat(follow_symlinks=False)
            yield path, info
            if stat.S_ISDIR(info.st_mode):
                folders.append(path)


def check_tree(root: Path) -> None:
    """Refuse a bundle holding a symbolic link (which may lead anywhere, /etc/shadow or `/`) or
    a special file (a pipe blocks its reader; a device never ends): a bundle holds its files."""
    for path, info in _entries(root):
        if stat.S_ISLNK(info.st_mode):
            raise BundleError(
                f"{path}: a symbolic link; a bundle holds its own files, so diagnose does not "
                "follow it: replace it with a copy of the file"
            )
        if not (stat.S_ISREG(info.st_mode) or stat.S_ISDIR(info.st_mode)):
            raise BundleError(
                f"{path}: not a regular file (a pipe, socket or device); remove it from the bundle"
            )


def bundle_files(root: Path, under: str) -> list[Path]:
    """Regular files under root/under (links and dot-files left out), sorted."""
    folder = root / under
    if folder.is_symlink() or not folder.is_dir():
        return []
    return sorted(
        path
        for path, info in _entries(folder)
        if stat.S_ISREG(info.st_mode) and not path.name.startswith(".")
    )


def check_metrics(path: Path) -> None:
    """A /metrics snapshot must be UTF-8 Prometheus text with finite counter values; the parser's
    own message quotes the offending line, so it is never shown."""
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        raise BundleError(
            f"{path}: not UTF-8 text, so not a /metrics snapshot; delete it or collect again"
        ) from None
    except OSError as exc:
        raise BundleError(f"{path}: cannot read ({exc.strerror}); check permissions") from None
    problem = metrics_problem(text)
    if problem is not None:
        raise BundleError(f"{path}: {problem}; delete the file or collect again")


def metrics_problem(text: str) -> str | None:
    """Why `text` is no /metrics snapshot this reader takes (None when it is one): the same
    rule for a snapshot being stored and one being read."""
    try:
        families = list(text_string_to_metric_families(text))
    except Exception:  # the parser raises ValueError, IndexError, KeyError … on garbage
        return "not Prometheus text (the parser refused it)"
    for family in families:
        counts = family.type in ("counter", "histogram", "summary")
        for sample in family.samples:
            shown = str(sample.value)[:40]
            if not _float(sample.value):
                return f"{sample.name} is {shown}…, not a number a reader can add"
            if family.type == "gauge":
                continue  # a gauge may be NaN (an acceptance rate before any draft)
            if not math.isfinite(sample.value) or (counts and sample.value < 0):
                return f"{sample.name} is {shown}, not a count"
    return None


def _float(value: float) -> bool:
    """Whether a sample converts to a float: the parser keeps an integer of 400 digits whole,
    which no float holds (summing it with floats raises OverflowError)."""
    try:
        float(value)
    except OverflowError:
        return False
    return True
