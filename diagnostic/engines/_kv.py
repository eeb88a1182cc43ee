"""Reading the `key=value, …` reprs engines print for their settings (vLLM config, SGLang args)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from typing import Any

__all__ = ["balance", "literal", "literal_prefix", "split_kv", "unquote"]

MAX_LITERAL = 64 << 10  # literal_eval on huge or deeply nested text is slow; keep it bounded


def _unquoted(text: str, start: int, opening: str, closing: str) -> Iterator[tuple[int, str, int]]:
    """(index, character, brackets open after it) for every character outside quotes."""
    depth = 0
    quote = ""
    i = start
    n = len(text)
    while i < n:
        ch = text[i]
        if quote:
            if ch == "\\":
                i += 1
            elif ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        else:
            if ch in opening:
                depth += 1
            elif ch in closing and depth:
                depth -= 1
            yield i, ch, depth
        i += 1


def _items(text: str) -> list[str]:
    """Split on top-level commas: outside quotes and (), [], {}, <>."""
    items: list[str] = []
    start = 0
    for i, ch, depth in _unquoted(text, 0, "([{<", ")]}>"):
        if ch == "," and depth == 0:
            items.append(text[start:i])
            start = i + 1
    items.append(text[start:])
    return items


def split_kv(text: str) -> dict[str, str]:
    """`a=1, b='x, y', c=Foo(d=2)` -> {'a': '1', 'b': "'x, y'", 'c': 'Foo(d=2)'} (raw values)."""
    out: dict[str, str] = {}
    for item in _items(text):
        key, sep, value = item.partition("=")
        key = key.strip().lstrip(".…").strip()  # an author's cut before it: `..., key=value`
        if sep and key.isidentifier():
            out[key] = value.strip()
    return out


def unquote(value: str | None) -> str | None:
    """A quoted repr string without its quotes; None for None/empty."""
    if value is None:
        return None
    value = value.strip()
    if value in ("", "None", "null"):
        return None
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value


def literal(value: str) -> Any:
    """ast.literal_eval when the text is a Python literal, else the text itself."""
    value = value.strip()
    if len(value) > MAX_LITERAL:
        return value
    try:
        return ast.literal_eval(value)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return value


def literal_prefix(text: str, tries: int = 64) -> Any:
    """The longest prefix of a literal cut off mid-way (a dict without its brace) that reads,
    closed with the brackets still open there; the text itself when none does."""
    value = literal(text)
    if not isinstance(value, str):
        return value
    pairs = {"(": ")", "[": "]", "{": "}"}
    stack: list[str] = []
    commas: list[tuple[int, str]] = []
    for i, ch, _ in _unquoted(text, 0, "([{", ")]}"):
        if ch in pairs:
            stack.append(pairs[ch])
        elif ch in ")]}" and stack:
            stack.pop()
        elif ch == ",":
            commas.append((i, "".join(reversed(stack))))
    for i, closing in reversed(commas[-tries:]):
        value = literal(text[:i] + closing)
        if not isinstance(value, str):
            return value
    return text


def balance(text: str, start: int = 0) -> int:
    """Open brackets left unclosed in text[start:] (quotes respected); 0 when balanced."""
    last = (0, "", 0)
    for last in _unquoted(text, start, "([{", ")]}"):  # noqa: B007 - the final depth is the answer
        pass
    return last[2]
