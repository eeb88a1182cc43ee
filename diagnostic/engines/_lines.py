"""Streaming line reader for server logs: a cheap byte prefilter, then clean text for the parsers.

A log can be gigabytes of access lines with a few dozen lines that matter. The reader never
loads the file: it reads blocks, finds candidate lines with `bytes.find` (for each anchor, on
its rarest byte when that byte is rare in the log, which runs at memchr speed), numbers lines
with numpy, and decodes only the candidates: UTF-8 with replacement, ANSI colour codes
removed, tqdm `\\r` redraws collapsed, lines capped at `max_line` bytes.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

import numpy as np

from diagnostic.engines._joins import (
    ANSWER,
    CONTINUED,
    VALUE_START,
    glue,
    has_flag,
    item,
    join,
    join_mode,
    open_quote,
)
from diagnostic.errors import DiagnosticError

__all__ = ["Line", "LineScanner", "clean", "collapse", "read_head", "unwrap"]

BLOCK = 256 << 10  # small blocks stay in cache across the per-anchor passes
MAX_LINE = 1 << 20
MAX_CONTINUATION = 64
MAX_QUOTED = 8  # lines a wrapped quoted value (a JSON config) may span
HEAD_BYTES = 8 << 20  # where a log's start-up, or a paste, says what it says once
# Blocks in a row where scanning for a key byte costs more than plain finds before the plan
# switches: a start-up block full of that byte must not spoil the plan for the gigabyte after it.
_STRIKES = 4
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[@-Z\\-_]")
_SEGMENT_PREFIX = re.compile(r"^\s*(?:\([^()]*\)\s*)*$")  # Ray nests two
# What people and log shippers put before an engine's own line: markdown quotes (and the
# PowerShell `>>` prompt), a k9s frame, journald's `Mon DD HH:MM:SS host unit[pid]:`, docker
# compose's `service-1  | `, a shipper's `2026-02-11 08:14:02.511 | `, `docker logs -t`'s ISO
# time, `kubectl logs --prefix`'s `[pod/NAME/CONTAINER]`, and indentation (two spaces or a tab:
# one leading space is kept, it can be the space a terminal wrapped a line at).
_WRAPPER = re.compile(
    r"^(?:[ \t]{2,}|\t|(?:>\s?)+|│\s?"
    r"|[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d(?:\.\d+)? \S+ [\w.@/-]+(?:\[\d+\])?: "
    r"|[A-Za-z][\w.-]*\s+\| "
    r"|\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?\s+\| "
    r"|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z "
    r"|\[pod/[^\]\s]+\] )"
)
_FRAME_END = re.compile(r"\s*│\s*$")

Source = Path | bytes | Iterable[str] | Iterable[bytes]


@dataclass(slots=True)
class Line:
    """One physical line of the log (numbered by `\\n`), cleaned for parsing."""

    number: int
    text: str
    raw: str  # every `\r` segment kept (tqdm redraws); the same object as text when none


def clean(data: bytes) -> Line:
    """Decode one line's bytes and clean it (the number is filled in by the scanner)."""
    raw = data.decode("utf-8", "replace")
    if "\x1b" in raw:
        raw = _ANSI.sub("", raw)
    if raw.endswith("\r"):
        raw = raw[:-1]
    raw = unwrap(raw)
    return Line(0, collapse(raw) if "\r" in raw else raw, raw)


def unwrap(text: str) -> str:
    """The line without what was put before it (quotes, frames, shipper prefixes, indent,
    docker's json-file record around it)."""
    if text.startswith('{"log":'):
        with contextlib.suppress(ValueError, KeyError, TypeError):
            text = str(json.loads(text)["log"]).rstrip("\n")
    for _ in range(4):  # a quote of a compose log of a journal: a few layers at most
        m = _WRAPPER.match(text)
        if m is None or not m.end():
            break
        text = text[m.end() :]
    if text.endswith("│"):
        text = _FRAME_END.sub("", text)
    return text


def collapse(raw: str) -> str:
    """What a terminal shows of a line redrawn with `\r`: its last segment (and any prefix)."""
    parts = [p for p in raw.split("\r") if p.strip()]
    if not parts:
        return ""
    last = parts[-1].strip()
    first = parts[0]
    # Keep a process prefix written before the first redraw: it says which worker drew the bar.
    return first.rstrip() + " " + last if len(parts) > 1 and _SEGMENT_PREFIX.match(first) else last


def read_head(source: Source, size: int = 2 << 20) -> bytes:
    """The first `size` bytes of a source (for engine detection)."""
    if isinstance(source, Path):
        with _open(source) as fh:
            return fh.read(size)
    if isinstance(source, bytes):
        return source[:size]
    return b""


def _open(path: Path) -> BinaryIO:
    try:
        return open(path, "rb")
    except IsADirectoryError:
        raise DiagnosticError(f"{path}: is a folder; give a log file or a folder of logs") from None
    except OSError as exc:
        raise DiagnosticError(f"{path}: cannot read ({exc.strerror}); check the path") from None


def _middle(path: Path, size: int) -> bytes:
    """`size` bytes from the middle of a file larger than 8 blocks (else nothing).

    The start of a log is its start-up, unlike the gigabyte of serving lines after it.
    """
    with _open(path) as fh:
        total = fh.seek(0, 2)
        if total < 8 * size:
            return b""
        fh.seek(total // 2)
        return fh.read(size)


def _chunks(source: Source, block: int) -> Iterator[bytes]:
    if isinstance(source, Path):
        with _open(source) as fh:
            while chunk := fh.read(block):
                yield chunk
        return
    if isinstance(source, bytes):
        for i in range(0, len(source), block):
            yield source[i : i + block]
        return
    parts: list[bytes] = []
    size = 0
    for piece in source:
        data = piece if isinstance(piece, bytes) else piece.encode("utf-8", "surrogateescape")
        parts.append(data if data.endswith(b"\n") else data + b"\n")
        size += len(parts[-1])
        if size >= block:
            yield b"".join(parts)
            parts, size = [], 0
    if parts:
        yield b"".join(parts)


class _Plan:
    """How to find each anchor: on its rarest byte (memchr speed) or with a full find pass."""

    def __init__(self, anchors: Sequence[bytes], sample: bytes) -> None:
        counts = {c: sample.count(bytes([c])) for c in {c for a in anchors for c in a}}
        n = max(len(sample), 1)
        # Costs in seconds for the sample (measured orders of magnitude): a memchr pass, a hit
        # checked in Python (plus one startswith per anchor sharing the key), a find pass.
        one_pass, hit, check, find = n * 0.06e-9, 0.3e-6, 0.1e-6, n * 0.6e-9
        self.finds: list[bytes] = []
        self.groups: dict[bytes, list[tuple[bytes, int]]] = {}
        todo = list(anchors)
        while todo:
            # Weighted greedy set cover: each key byte costs one pass, so share keys.
            best: tuple[float, int, list[bytes]] | None = None
            for c in {c for a in todo for c in a}:
                covered = [a for a in todo if c in a]
                cost = (one_pass + counts[c] * (hit + check * len(covered))) / len(covered)
                if best is None or cost < best[0]:
                    best = (cost, c, covered)
            assert best is not None
            cost, key, covered = best
            if cost >= find:
                self.finds += todo  # no byte is rare enough: a plain find pass is cheaper
                break
            self.groups[bytes([key])] = [(a, a.index(key)) for a in covered]
            todo = [a for a in todo if key not in a]
        self.strikes = dict.fromkeys(self.groups, 0)

    def starts(self, buf: bytes, end: int) -> set[int]:
        """Offsets of the lines of buf[:end] that contain an anchor."""
        starts: set[int] = set()
        find, rfind, startswith = buf.find, buf.rfind, buf.startswith
        for anchor in self.finds:
            p = find(anchor, 0, end)
            while p != -1:
                starts.add(rfind(b"\n", 0, p) + 1)
                stop = find(b"\n", p, end)
                p = -1 if stop == -1 else find(anchor, stop, end)
        demote: list[bytes] = []
        for key, group in self.groups.items():
            hits = 0
            p = find(key, 0, end)
            while p != -1:
                hits += 1
                for anchor, k in group:
                    if p >= k and startswith(anchor, p - k):
                        starts.add(rfind(b"\n", 0, p) + 1)
                        p = find(b"\n", p, end)  # the line is taken: skip the rest of it
                        break
                p = -1 if p == -1 else find(key, p + 1, end)
            # The log changed character (not just a start-up block): this byte is not rare.
            costly = hits * (0.3e-6 + 0.1e-6 * len(group)) > end * 0.6e-9 * len(group)
            self.strikes[key] = self.strikes[key] + 1 if costly and end > 64 << 10 else 0
            if self.strikes[key] >= _STRIKES:
                demote.append(key)
        for key in demote:
            self.finds.extend(anchor for anchor, _ in self.groups.pop(key))
        return starts


@dataclass
class LineScanner:
    """Yields the lines that contain one of `anchors` (every line when anchors is None).

    `wants_more(text)` marks a line whose content continues on the next physical lines (a
    settings line wrapped by a terminal or a log shipper); the scanner then appends the
    following lines for which `continues(text)` holds, up to 64 of them.

    `head_anchors` are looked for in the first `head_bytes` only: what a paste or a start-up
    says once (platform, versions in environment dumps, launch commands) costs nothing in the
    gigabyte of serving lines after it.
    """

    anchors: Sequence[bytes] | None
    wants_more: Callable[[str], bool] | None = None
    continues: Callable[[str], bool] | None = None
    head_anchors: Sequence[bytes] = ()
    head_bytes: int = HEAD_BYTES
    block: int = BLOCK
    max_line: int = MAX_LINE
    lines: int = 0
    bytes_read: int = 0
    notes: list[str] = field(default_factory=list)
    sample: bytes = b""  # bytes from the middle of a long file: what the bulk looks like
    _plan: _Plan | None = None
    _head_plan: _Plan | None = None

    def __post_init__(self) -> None:
        if any(b"\n" in a or not a for a in [*(self.anchors or ()), *self.head_anchors]):
            raise ValueError("anchors must be non-empty and single-line")

    def scan(self, source: Source) -> Iterator[Line]:
        """Candidate lines of the source, in order, with their 1-based line numbers."""
        if isinstance(source, Path) and not self.sample:
            self.sample = _middle(source, self.block)
        pending = b""
        skipping = False
        for chunk in _chunks(source, self.block):
            self.bytes_read += len(chunk)
            if skipping:  # the rest of an over-long line: drop it up to its newline
                cut = chunk.find(b"\n")
                if cut == -1:
                    continue
                chunk, skipping = chunk[cut + 1 :], False
                self.lines += 1
            buf = pending + chunk if pending else chunk
            end = buf.rfind(b"\n") + 1
            if end == 0:
                if len(buf) <= self.max_line:
                    pending = buf
                    continue
                yield from self._long_line(buf)
                pending, skipping = b"", True
                continue
            done = yield from self._block(buf, end, final=False)
            pending = buf[done:]
        if pending and not skipping:
            yield from self._block(pending, len(pending), final=True)
        elif skipping:
            self.lines += 1

    def _long_line(self, buf: bytes) -> Iterator[Line]:
        head = buf[: self.max_line]
        self.notes.append(
            f"line {self.lines + 1} is longer than {self.max_line >> 20} MiB; "
            "only its first MiB was read"
        )
        if self._wanted(head):
            line = clean(head)
            line.number = self.lines + 1
            yield line

    def _wanted(self, data: bytes) -> bool:
        anchors = [*(self.anchors or ()), *self.head_anchors]
        return self.anchors is None or any(a in data for a in anchors)

    def _block(self, buf: bytes, end: int, *, final: bool) -> Generator[Line, None, int]:
        """Yield candidates of buf[:end]; return how many bytes were consumed."""
        plan = self._plan_for(buf)
        arr = np.frombuffer(buf, dtype=np.uint8, count=end)
        newlines = np.flatnonzero(arr == 10)
        if plan is None:
            starts = [0, *(int(n) + 1 for n in newlines if n + 1 < end)]
        else:
            starts = sorted(plan.starts(buf, end))
        if not starts:
            self.lines += len(newlines)
            return end
        indexes = np.searchsorted(newlines, starts).tolist()
        covered = 0  # continuation lines already joined to an earlier line
        for start, idx in zip(starts, indexes, strict=True):
            if start < covered:
                continue
            stop = int(newlines[idx]) if idx < len(newlines) else end
            line = self._decode(buf[start:stop], self.lines + idx + 1)
            mode = join_mode(line.text, self.wants_more)
            if mode is not None:
                more = self._continuation(
                    buf, newlines, idx, end, mode=mode, final=final, first=line.text
                )
                if more is None and not final and len(buf) < 4 * self.max_line:
                    self.lines += idx  # wait for the next block: the wrap goes past this one
                    return start
                if mode == "items" and more and not has_flag(line.text, more[0].text):
                    more = []  # a list of values (device lines, bullets), not arguments
                join(line, more or [], mode)
                if more:
                    last = idx + len(more)
                    covered = int(newlines[last]) + 1 if last < len(newlines) else end
            yield line
        self.lines += len(newlines) + (1 if final and not buf[:end].endswith(b"\n") else 0)
        return end

    def _plan_for(self, buf: bytes) -> _Plan | None:
        """The plan of the block: with the head anchors while in the head of the source."""
        if self.anchors is None:
            return None
        sample = self.sample or buf[: 1 << 20]
        if self.head_anchors and self.bytes_read <= self.head_bytes + len(buf):
            if self._head_plan is None:
                anchors = tuple(dict.fromkeys([*self.anchors, *self.head_anchors]))
                self._head_plan = _Plan(anchors, sample)
            return self._head_plan
        if self._plan is None:
            self._plan = _Plan(self.anchors, sample)
        return self._plan

    def _decode(self, data: bytes, number: int) -> Line:
        if len(data) > self.max_line:
            self.notes.append(f"line {number} is longer than 1 MiB; only its first MiB was read")
            data = data[: self.max_line]
        line = clean(data)
        line.number = number
        return line

    def _continuation(
        self,
        buf: bytes,
        newlines: np.ndarray,
        idx: int,
        end: int,
        *,
        mode: str,
        final: bool,
        first: str = "",
    ) -> list[Line] | None:
        """Following physical lines that continue line idx; None when the block ends first
        (the source goes on: the next block may continue it).

        `mode`: "shell" (a command whose lines end in a continuation mark, continued while each
        does), "items" (argument items: YAML list items or flags, one per line), "answer" (the
        one line a `--version` query printed), "quote" (a command whose quoted value a wrap
        cut: continued until its quotes close; "value" when the cut fell right after the flag)
        or "engine" (the engine's `continues`).
        """
        out: list[Line] = []
        for j in range(idx + 1, min(idx + 1 + MAX_CONTINUATION, len(newlines) + 1)):
            start = int(newlines[j - 1]) + 1
            if j >= len(newlines):
                if start < end:  # the buffer's last line, no newline
                    last = self._decode(buf[start:end], self.lines + j + 1)
                    if mode in ("quote", "value"):
                        keep = mode == "quote" or VALUE_START.match(last.text) is not None
                    elif mode == "engine":
                        keep = self.continues(last.text)  # type: ignore[misc]
                    else:
                        keep = mode == "shell" or item(last.text) is not None
                        keep = keep or ANSWER.match(last.text) is not None
                    if keep:
                        out.append(last)
                    return out
                return out if final else None
            nxt = self._decode(buf[start : int(newlines[j])], self.lines + j + 1)
            if mode == "answer":
                return [nxt] if ANSWER.match(nxt.text) else []
            if mode == "shell":
                out.append(nxt)
                if not CONTINUED.search(nxt.text):
                    return out
                continue
            if mode in ("quote", "value"):
                if mode == "value" and not out and not VALUE_START.match(nxt.text):
                    return out
                out.append(nxt)
                whole = glue([first, *(x.text for x in out)])
                if not open_quote(whole[whole.find("--") :]):
                    return out
                if len(out) >= MAX_QUOTED:
                    return []  # no closing quote near: not a value cut by a wrap
                continue
            goes_on = item(nxt.text) is not None if mode == "items" else self.continues(nxt.text)  # type: ignore[misc]
            if not goes_on:
                return out
            out.append(nxt)
        return out
