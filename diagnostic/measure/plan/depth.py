"""How deep a plan's values nest, measured on its text before any TOML parser sees it: Python's
tomllib parses nested arrays and inline tables recursively, so 5,000 `{a = {a = …}}` end in a
RecursionError. A plan nests two or three levels ([[arms]], sweep = { k = [3, 5] }); past
LIMIT_DEPTH the file is refused with its line, never parsed."""

from __future__ import annotations

from diagnostic.errors import PlanError

__all__ = ["LIMIT_DEPTH", "check_depth", "deepest"]

LIMIT_DEPTH = 32  # arrays and inline tables inside one another


def _string_end(text: str, i: int) -> int:
    """The index just past the TOML string starting at `i` (basic or literal, one line or
    three quotes), or the end of the line (or text) when it is not closed there."""
    quote = text[i]
    if text.startswith(quote * 3, i):
        j = i + 3
        while j < len(text):
            if quote == '"' and text[j] == "\\":
                j += 2
                continue
            if text.startswith(quote * 3, j):
                return j + 3
            j += 1
        return len(text)
    j = i + 1
    while j < len(text) and text[j] != "\n":
        if quote == '"' and text[j] == "\\":
            j += 2
            continue
        if text[j] == quote:
            return j + 1
        j += 1
    return j


def deepest(text: str, limit: int = LIMIT_DEPTH) -> tuple[int, int] | None:
    """(line, depth) where brackets and braces outside strings and comments first nest deeper
    than `limit`; None when they never do."""
    depth, line, i = 0, 1, 0
    while i < len(text):
        c = text[i]
        if c in "\"'":
            end = _string_end(text, i)
            line += text.count("\n", i, end)
            i = end
            continue
        if c == "#":
            end = text.find("\n", i)
            i = len(text) if end < 0 else end
            continue
        if c == "\n":
            line += 1
        elif c in "[{":
            depth += 1
            if depth > limit:
                return line, depth
        elif c in "]}":
            depth = max(depth - 1, 0)
        i += 1
    return None


def check_depth(text: str, source: str) -> None:
    """Refuse a plan whose values nest deeper than LIMIT_DEPTH, naming the file and line."""
    found = deepest(text)
    if found is not None:
        raise PlanError(
            f"{source}:{found[0]}: arrays or inline tables nested more than {LIMIT_DEPTH} deep "
            "(a plan needs two or three levels: [[arms]], sweep = { k = [3, 5] }); not read "
            "further: fix the file"
        )
