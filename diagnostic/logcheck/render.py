"""Rule messages filled from the facts: dotted lookups, defaults, and parts dropped when unknown.

A message says what is known in words and leaves out what is not: `{spec.method|speculation}`
prints the default when the method is unknown, `[[, k={spec.num_draft_tokens}]]` disappears
when k is, and a field unknown elsewhere prints "(not in the log)", never `?` or `None`.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["UNKNOWN_TEXT", "lookup", "render"]

UNKNOWN_TEXT = "(not in the log)"
_FIELD = re.compile(r"\{([A-Za-z_][\w.\-]*)(?:\|([^{}]*))?\}")
_PART = re.compile(r"\[\[(.*?)\]\]", re.DOTALL)


def lookup(obj: Any, path: str) -> Any:
    """Value at a dotted path (`capture.resolved`, `acceptance_summary.per_position.-1`)."""
    for part in path.split("."):
        if obj is None or part.startswith("_"):
            return None
        if isinstance(obj, dict):
            obj = obj.get(part)
        elif isinstance(obj, list):
            try:
                obj = obj[int(part)]
            except (ValueError, IndexError):
                return None
        else:
            obj = getattr(obj, part, None)
    return obj


def _text(found: Any) -> str | None:
    if found is None or found == "" or found == []:
        return None
    if isinstance(found, float):
        return f"{found:.3g}"
    if isinstance(found, list):
        return ", ".join(f"{v:.2f}" if isinstance(v, float) else str(v) for v in found)
    return str(found)


def render(template: str, facts: Any, extra: dict[str, Any]) -> str:
    """Fill `{dotted.path}` (or `{path|default}`) from extra first, then the facts; drop a
    `[[…]]` part whose fields are unknown; an unknown field elsewhere reads as UNKNOWN_TEXT."""

    def value(key: str) -> str | None:
        return _text(extra[key] if key in extra else lookup(facts, key))

    def part(m: re.Match[str]) -> str:
        inner = m[1]
        if any(value(f[1]) is None and f[2] is None for f in _FIELD.finditer(inner)):
            return ""
        return inner

    def field(m: re.Match[str]) -> str:
        found = value(m[1])
        if found is not None:
            return found
        return m[2] if m[2] is not None else UNKNOWN_TEXT

    text = template.replace("{{", "\0").replace("}}", "\1")
    text = _FIELD.sub(field, _PART.sub(part, text))
    return text.replace("\0", "{").replace("\1", "}")
