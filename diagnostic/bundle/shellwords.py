"""A shell line split into words that know where they stand in it, so that one word can be
replaced and the rest of the line kept as written (quotes, spacing, `\\` continuations).

POSIX shell quoting: '…' literal, "…" with \\" \\\\ \\$ \\` escapes, \\x outside quotes, and
bash's $'…' with its C escapes (\\n, \\', \\x41); the operators ; & | && || ( ) and a newline end
a simple command; # at a word's start begins a comment to the end of the line; a redirection
(`>`, `2>>`, `&>`, `2>&1`, `<`) at a word's start is a token of its own, and the file it names
a "target" (no argument of the command). An unbalanced quote runs to the end of the line."""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass

__all__ = ["Token", "split_line"]

_OPERATORS = ("&&", "||", ";;", ";", "&", "|", "(", ")", "\n")
# A redirection: an optional descriptor, the operator, and a descriptor it duplicates (2>&1,
# >&-) when there is one; otherwise the next word is the file.
_PLACEHOLDER = re.compile(r"<[^<>\s]+>")  # <redacted>, <model>: a word, no redirection
_REDIRECT = re.compile(r"(?:\d+|&)?(?:>>|>\||<>|>&|<&|>|<)(?:(?<=&)(?:\d+|-))?")


@dataclass(frozen=True)
class Token:
    """A word (`kind` "word": its text as the shell reads it, `value`), an operator ("op"), a
    redirection ("redirect") and the file it names ("target"), or a comment ("comment");
    `start`/`end` locate it in the line as written."""

    kind: str
    start: int
    end: int
    value: str


def split_line(line: str) -> list[Token]:
    """The tokens of a shell line, in order."""
    tokens: list[Token] = []
    i, n = 0, len(line)
    target = False  # the next word is a redirection's file
    while i < n:
        c = line[i]
        if c == "\\" and line.startswith("\\\n", i):
            i += 2
            continue
        if c in " \t\r":
            i += 1
            continue
        redirect = _redirect_at(line, i)
        if redirect:
            tokens.append(Token("redirect", i, i + len(redirect), redirect))
            target = not redirect.endswith(("&", "-")) and not redirect[-1].isdigit()
            i += len(redirect)
            continue
        op = next((o for o in _OPERATORS if line.startswith(o, i)), None)
        if op is not None:
            tokens.append(Token("op", i, i + len(op), op))
            i += len(op)
            continue
        if c == "#":
            end = line.find("\n", i)
            end = n if end < 0 else end
            tokens.append(Token("comment", i, end, line[i:end]))
            i = end
            continue
        start, value = i, []
        while i < n:
            c = line[i]
            if c in " \t\r\n;&|()":
                break
            if c == "\\":
                if i + 1 < n and line[i + 1] == "\n":
                    i += 2
                    continue
                value.append(line[i + 1 : i + 2])
                i += 2
            elif line.startswith("$'", i):
                text, i = _ansi_c(line, i + 2)
                value.append(text)
            elif c == "'":
                close = line.find("'", i + 1)
                close = n if close < 0 else close
                value.append(line[i + 1 : close])
                i = close + 1
            elif c == '"':
                i += 1
                while i < n and line[i] != '"':
                    if line[i] == "\\" and i + 1 < n and line[i + 1] in '"\\$`\n':
                        value.append("" if line[i + 1] == "\n" else line[i + 1])
                        i += 2
                    else:
                        value.append(line[i])
                        i += 1
                i += 1
            else:
                value.append(c)
                i += 1
        tokens.append(Token("target" if target else "word", start, min(i, n), "".join(value)))
        target = False
    return tokens


def _ansi_c(line: str, i: int) -> tuple[str, int]:
    """The text of a $'…' quote whose body starts at `i`, its escapes undone (as Python's
    own, which bash's share), and where the quote ends."""
    close = i
    while close < len(line) and line[close] != "'":
        close += 2 if line[close] == "\\" else 1
    body = line[i:close].encode("latin-1", "backslashreplace")
    try:
        text = codecs.decode(body, "unicode_escape")
    except UnicodeDecodeError:  # a stray escape (\\c, \\e): the body as written
        text = line[i:close]
    return text, close + 1


def _redirect_at(line: str, i: int) -> str:
    """The redirection that starts at `i` (a word's start), or ""; `2` in `2>` only when the
    `>` follows at once, and `&>` but not the `&` operator; not a `<placeholder>`."""
    m = _REDIRECT.match(line, i)
    if m is None or _PLACEHOLDER.match(line, i):
        return ""
    return m.group()
