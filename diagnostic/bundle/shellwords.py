"""A shell line split into words that know where they stand in it, so that one word can be
replaced and the rest of the line kept as written (quotes, spacing, `\\` continuations).

POSIX shell quoting: '…' literal, "…" with \\" \\\\ \\$ \\` escapes, \\x outside quotes; the
operators ; & | && || ( ) and a newline end a simple command; # at a word's start begins a
comment to the end of the line. An unbalanced quote runs to the end of the line."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Token", "split_line"]

_OPERATORS = ("&&", "||", ";;", ";", "&", "|", "(", ")", "\n")


@dataclass(frozen=True)
class Token:
    """A word (`kind` "word": its text as the shell reads it, `value`), an operator ("op") or
    a comment ("comment"); `start`/`end` locate it in the line as written."""

    kind: str
    start: int
    end: int
    value: str


def split_line(line: str) -> list[Token]:
    """The tokens of a shell line, in order."""
    tokens: list[Token] = []
    i, n = 0, len(line)
    while i < n:
        c = line[i]
        if c == "\\" and line.startswith("\\\n", i):
            i += 2
            continue
        if c in " \t\r":
            i += 1
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
        tokens.append(Token("word", start, min(i, n), "".join(value)))
    return tokens
