"""How a pasted line goes on over the next lines, and how the pieces are joined back: a shell
command continued with `\\`, argument items one per line (YAML lists, bare flags), the one
line a `--version` query printed, a quoted value (a JSON config) a wrap cut, and an engine's
own wrapped records. The line scanner (_lines.py) finds the lines; this says where they end."""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from diagnostic.engines._lines import Line

__all__ = [
    "ANSWER",
    "CONTINUED",
    "VALUE_START",
    "glue",
    "has_flag",
    "item",
    "join",
    "join_mode",
    "open_quote",
]

# A command line continued on the next: `\` (sh), ` `` ` (PowerShell), ` ^` (cmd.exe).
CONTINUED = re.compile(r"(?:\\| `| \^)$")
_ITEM = re.compile(r"^-\s+(?P<v>\S.*)$")  # a YAML list item
FLAG = re.compile(r"""^["']?--?[A-Za-z]""")
# What `--version` printed alone on its line, or the line after `pip show`'s `Name: X`.
ANSWER = re.compile(r"(?:Version:\s*)?v?\d+\.\d+[\w.+-]*$")
_PIP_NAME = re.compile(r"Name: (?:vllm|sglang|tensorrt[-_]llm)$", re.IGNORECASE)
PROGRAM = re.compile(r"(?i)vllm|sglang|llama|trtllm|tensorrt|python|serve|entrypoints")
# A flag whose JSON value a wrap put on the next line, and how that value starts.
_VALUE_FLAG = re.compile(r"--[\w-]*config\s*=?$")
VALUE_START = re.compile(r"""^['"]?[{\[]""")


def item(text: str) -> str | None:
    """The argument an item line holds (`- "--model"`, a bare `--flag value`), else None."""
    m = _ITEM.match(text)
    if m:
        return m["v"]
    return text if FLAG.match(text) and text.startswith("-") else None


def has_flag(first: str, second: str) -> bool:
    return any(FLAG.match(item(t) or "") for t in (first, second))


def open_quote(text: str) -> bool:
    """Whether a shell line ends inside a quoted value."""
    try:
        shlex.split(text, posix=True)
    except ValueError:
        return True
    return False


def glue(parts: Sequence[str]) -> str:
    """Pieces of a record cut by a wrap, joined: a space where the cut fell at a delimiter (a
    form re-flows at spaces), none inside a word (a terminal cuts at its width)."""
    text = parts[0]
    for part in parts[1:]:
        space = text[-1:] in ",:;{[(" or part[:1] in "'\"{[-"
        text += (" " if space else "") + part
    return text


def join_mode(text: str, wants_more: Callable[[str], bool] | None) -> str | None:
    if text.endswith("--version") or _PIP_NAME.match(text):
        return "answer"
    if CONTINUED.search(text):
        return "shell"
    if "--" in text and PROGRAM.search(text):
        if _VALUE_FLAG.search(text):
            return "value"  # `… --speculative-config` and its JSON on the next line
        flags = text[text.find("--") :]  # a quote opened in the prose before the flags is none
        if ("'" in flags or '"' in flags) and open_quote(flags):
            return "quote"
    if item(text) is not None:
        return "items"
    if wants_more is not None and wants_more(text):
        return "engine"
    return None


def join(line: Line, more: list[Line], mode: str) -> None:
    """Append continuation lines to a line: a command's words joined by spaces, an engine's
    wrapped record as it was cut."""
    if not more:
        return
    if mode in ("shell", "answer"):
        words = [CONTINUED.sub("", x.text).strip() for x in [line, *more]]
    elif mode == "items":
        words = [item(x.text) or "" for x in [line, *more]]
        while words and not FLAG.match(words[0]) and not PROGRAM.search(words[0]):
            words.pop(0)  # the value of a flag on an earlier line
    elif mode in ("quote", "value"):
        line.text = line.raw = glue([line.text, *(x.text for x in more)])
        return
    else:
        for extra in more:
            line.text += extra.text
            line.raw += extra.raw
        return
    line.text = " ".join(w for w in words if w)
    line.raw = line.text
