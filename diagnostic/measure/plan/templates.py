"""Plan templates: {name} and {name+N} placeholders, doubled braces for literal ones."""

from __future__ import annotations

import re
from typing import Any

from diagnostic.errors import TemplateError

__all__ = ["substitute"]


# `{{` and `}}` are literal braces; `{name}` or `{name+N}` / `{name-N}` is a placeholder
# (SGLang wants --speculative-num-draft-tokens = k + 1); any other brace is a mistake.
_TOKEN = re.compile(r"\{\{|\}\}|\{([^{}]*)\}|[{}]")
_EXPR = re.compile(r"^\s*([A-Za-z_]\w*)\s*(?:([+-])\s*(\d+)\s*)?$")


def substitute(template: str, values: dict[str, Any]) -> str:
    """Replace {name} and {name+N} by values; {{ and }} stand for literal braces."""

    def one(match: re.Match[str]) -> str:
        token = match.group(0)
        if token in ("{{", "}}"):
            return token[0]
        if match.group(1) is None:
            raise TemplateError(
                f"lone {token!r} at character {match.start() + 1}; write {token * 2} for a "
                "literal brace (e.g. in JSON)"
            )
        if template[max(match.start() - 1, 0)] == "$" and match.group(1) not in values:
            name = match.group(1)
            raise TemplateError(
                f"${token} looks like a shell variable; write ${name} or ${{{{{name}}}}} "
                "(braces are placeholders here, doubled braces are literal)"
            )
        return _evaluate(match.group(1), values)

    return _TOKEN.sub(one, template)


def _evaluate(expr: str, values: dict[str, Any]) -> str:
    parsed = _EXPR.match(expr)
    known = ", ".join(f"{{{k}}}" for k in values)
    if parsed is None or parsed.group(1) not in values:
        raise TemplateError(
            f"unknown placeholder {{{expr}}} (known: {known}); write {{{{ and }}}} for literal "
            "braces"
        )
    value = values[parsed.group(1)]
    if parsed.group(2) is None:
        return str(value)
    if not isinstance(value, int):
        raise TemplateError(f"{{{expr}}}: arithmetic needs an integer, not {value!r}")
    offset = int(parsed.group(3))
    return str(value + offset if parsed.group(2) == "+" else value - offset)
