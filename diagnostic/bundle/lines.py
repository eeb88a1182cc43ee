"""Text redacted line by line, as a log is written or a whole file is read: each line scanned
(scan), and what a line alone does not show masked from the lines around it: a private key
whose armour and body are on separate lines (PEM, PuTTY), a secret cut in two by a newline,
a value on the line after its secret's name."""

from __future__ import annotations

import re

from diagnostic.bundle.scan import scan_line as _redact_line
from diagnostic.bundle.secret_shapes import find_tokens, name_strength
from diagnostic.bundle.textrules import MASK
from diagnostic.bundle.textrules import WORD as _WORD

__all__ = ["LineRedactor", "redact_file_text"]

# A private key's armour lines (PEM; PuTTY's Private-Lines … Private-MAC); its body between them
# is base64 (with headers in old PEM).
_PEM_BEGIN = re.compile(
    r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY[A-Z ]*-----.*|^[ \t]*Private-Lines:[ \t]*\d+.*"
)
_PEM_END = re.compile(
    r"-----END [A-Z0-9 ]*PRIVATE KEY[A-Z ]*-----|Private-(?:MAC|Hash):[ \t]*[0-9a-fA-F]*"
)
_PEM_BODY = re.compile(r"[A-Za-z0-9+/=]{16,}")
_PEM_HEADER = re.compile(r"^\s*(Proc-Type|DEK-Info|Comment):|^\s*$")


# A line's end that leaves a secret open: its value cut at the end of the line (masked up to
# there), or a secret's name whose value is on the next line (`--api-key \`, `API_KEY=\`).
_OPEN_END = re.compile(
    r"(?:<redacted>|(?P<name>--?[A-Za-z][\w-]*|[A-Za-z_][\w.-]*[ \t]*[:=]))"
    r"[ \t\"',]*\\?[ \t]*\r?\n?$"
)
# The first run of a line, the rest of a secret cut by a newline (a wrapped key, the next line
# of a wrapped base64 block); never a date or a plain word (the next log line's start).
_HEAD = re.compile(r"^(?P<indent>[ \t]*)(?P<run>[A-Za-z0-9+/=_.~-]{4,})(?=[\s\"',\\]|$)")
_END_CHARS = 120  # of a line's end, looked at for what it leaves open
_DATE = re.compile(r"^\d{4}-\d\d-\d\d")
_TAIL = re.compile(r"(?P<run>[A-Za-z0-9+/=_.~-]{4,})[ \t]*\\?[ \t]*\r?\n?$")


def _spans(tail: str, head: str) -> bool:
    """Whether a known token runs across the join of `tail` and `head` (a key cut in two)."""
    joined = tail[-80:] + head
    cut = len(tail[-80:])
    return any(start < cut < end for start, end in find_tokens(joined))


class LineRedactor:
    """Redacts a text one line at a time — a server's log as it is written, or a whole file —
    and masks what a line alone does not show: a private key whose armour and body are on
    separate lines, a secret cut in two by a newline (the rest of it, and its start when the
    two only make a secret together), a value on the line after its secret name. The only
    redaction of files: logs, /metrics, copied --log files."""

    def __init__(self) -> None:
        self._in_key = False
        self._open = False  # the last line left a secret open
        self._tail = ""  # the last line's final run of token characters

    def line(self, line: str, following: str | None = None) -> str:
        """One line (with its newline, if any), redacted; `following`, the next line when it
        is known (a whole file), lets the start of a secret cut in two be masked too."""
        text = self._redacted(line)
        if following is not None and self._joins(line, following):
            text = _TAIL.sub(lambda m: m.group(0).replace(m.group("run"), MASK), text, count=1)
            self._open = True
        tail = _TAIL.search(line, max(0, len(line) - _END_CHARS))
        self._tail = tail.group("run") if tail else ""
        return text

    def _redacted(self, line: str) -> str:
        head = None if _PEM_BEGIN.search(line) else _HEAD.match(line)
        if head and (self._open or self._joined(head.group("run"))):
            run = head.group("run")
            if not (_WORD.match(run) or _DATE.match(run)):
                line = f"{head.group('indent')}{MASK}{line[head.end() :]}"
        text = self._pem(line)
        self._open = self._leaves_open(text)
        return text

    def _joined(self, head: str) -> bool:
        """Whether the last line's tail and this head make a known token only together."""
        return bool(self._tail) and _spans(self._tail, head)

    def _joins(self, line: str, following: str) -> bool:
        tail, head = _TAIL.search(line, max(0, len(line) - _END_CHARS)), _HEAD.match(following)
        return tail is not None and head is not None and _spans(tail["run"], head["run"])

    @staticmethod
    def _leaves_open(text: str) -> bool:
        end = _OPEN_END.search(text, max(0, len(text) - _END_CHARS))
        if end is None:
            return False
        name = end.group("name")
        return name is None or (name_strength(name.rstrip(":= \t").lstrip("-")) is not None)

    def _pem(self, line: str) -> str:
        if self._in_key:
            end = _PEM_END.search(line)
            if end is not None:
                self._in_key = False
                return MASK + _redact_line(line[end.end() :])
            body, found = _PEM_BODY.subn(MASK, line)
            if found or _PEM_HEADER.match(line):
                return body
            self._in_key = False  # an ordinary line: the armour held no body
        text = _redact_line(line)
        begin = _PEM_BEGIN.search(text)
        if begin is None:
            return text
        self._in_key = True
        newline = text[len(text.rstrip("\r\n")) :]
        return text[: begin.start()] + MASK + newline


def redact_file_text(text: str) -> str:
    """A whole file's text redacted line by line, as LineRedactor redacts a log being written,
    each line seeing the next (a secret cut in two is masked on both lines)."""
    redactor = LineRedactor()
    lines = text.splitlines(keepends=True)
    following: list[str | None] = [*lines[1:], None]
    return "".join(redactor.line(line, nxt) for line, nxt in zip(lines, following, strict=False))
