"""Reading the `key=value, …` reprs engines print for their settings (vLLM config, SGLang args)."""

from __future__ import annotations

import ast
from typing import Any

__all__ = ["balance", "literal", "split_kv", "unquote"]

_OPEN = {"(": ")", "[": "]", "{": "}", "<": ">"}
_CLOSE = {v: k for k, v in _OPEN.items()}
MAX_LITERAL = 64 << 10  # literal_eval on huge or deeply nested text is slow; keep it bounded


def _items(text: str) -> list[str]:
    """Split on top-level commas: outside quotes and (), [], {}, <>."""
    items: list[str] = []
    depth = 0
    quote = ""
    start = 0
    i = 0
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
        elif ch in _OPEN:
            depth += 1
        elif ch in _CLOSE and depth:
            depth -= 1
        elif ch == "," and depth == 0:
            items.append(text[start:i])
            start = i + 1
        i += 1
    items.append(text[start:])
    return items


def split_kv(text: str) -> dict[str, str]:
    """`a=1, b='x, y', c=Foo(d=2)` -> {'a': '1', 'b': "'x, y'", 'c': 'Foo(d=2)'} (raw values)."""
    out: dict[str, str] = {}
    for item in _items(text):
        key, sep, value = item.partition("=")
        key = key.strip()
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


def balance(text: str, start: int = 0) -> int:
    """Open brackets left unclosed in text[start:] (quotes respected); 0 when balanced."""
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
        elif ch in "([{":
            depth += 1
        elif ch in ")]}" and depth:
            depth -= 1
        i += 1
    return depth
