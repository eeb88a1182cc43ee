"""Shell variables a pasted script sets and its command then uses: `SPEC='{…}'` on one line,
`--speculative-config "$SPEC"` on a later one. The reader puts the value in its place.

Only a whole word is replaced (`$NAME`, `${NAME}`, `"$NAME"`), and only by a value the text
assigned before; a list of flags used unquoted (`$SPEC_ARGS`) is split into its words, as the
shell splits it, any other value stays one word. A variable inside a longer string
(`\\"$DRAFT_PATH\\"` in escaped JSON) or one the text never sets stays as written.
"""

from __future__ import annotations

import re
import shlex

__all__ = ["ASSIGNMENT_ANCHORS", "ShellVariables"]

# Lines that assign a JSON object or a list of flags, the values a command may take from a
# variable (the scan hands them to the reader; other assignments rarely hold settings), and
# the lines that may use one (` $X`, `"$X"`), so that a command whose flags are all in a
# variable is read too.
ASSIGNMENT_ANCHORS: tuple[bytes, ...] = (b"='{", b'="{', b"='--", b'="--', b" $", b'"$')
_ASSIGN = re.compile(
    r"""^\s*(?:export\s+)?(?P<name>[A-Za-z_]\w*)="""
    r"""(?:'(?P<single>[^']*)'|"(?P<double>(?:[^"\\]|\\.)*)"|(?P<bare>[^\s'"`$;|&()]+))\s*$"""
)
_USE = re.compile(
    r"""(?:(?<=\s)|^)(?P<q>"?)\$(?:\{(?P<braced>\w+)\}|(?P<name>\w+))(?P=q)(?=\s|$)"""
)
_ESCAPE = re.compile(r"\\([\\\"$`])")


class ShellVariables:
    """The variables assigned so far; `read` records an assignment or expands a use."""

    def __init__(self) -> None:
        self.values: dict[str, str] = {}

    def read(self, text: str) -> str:
        """The line with the variables it uses replaced by their (quoted) values."""
        if "=" in text and (m := _ASSIGN.match(text)):
            value = m["single"] if m["single"] is not None else m["bare"]
            if value is None:
                value = _ESCAPE.sub(r"\1", m["double"])
            self.values[m["name"]] = value
            return text
        if "$" not in text or not self.values:
            return text
        expanded = _USE.sub(self._value, text)
        return text if expanded == text else expanded

    def _value(self, m: re.Match[str]) -> str:
        value = self.values.get(m["braced"] or m["name"])
        if value is None:
            return m[0]
        if not m["q"] and value.startswith("-"):
            return value  # unquoted flags: the shell splits them into words
        return shlex.quote(value)
