"""Launch commands pasted into a log or a message: found by an engine's markers, split by shlex.

A command is evidence of what was configured, not of what the engine resolved. Each engine
names its markers (program, `-m` module, container image) and reads the flags it knows.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field

__all__ = ["COMMAND_ANCHORS", "Command", "find_command"]

# A multi-line container command often names the engine only on a later line: the scanner
# takes these lines too and joins their `\` continuations.
COMMAND_ANCHORS: tuple[bytes, ...] = (b"docker run", b"podman run")
_ENV = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_ENV_BEFORE = ("$", "+", "sudo", "env", "-e", "--env")  # what may precede NAME=VALUE
_IMAGE_VERSION = re.compile(r":v?(?P<v>\d+\.\d+(?:\.\d+)?(?:\.post\d+)?)")


@dataclass
class Command:
    """The engine's own arguments, the environment set on the line and the image, if any."""

    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    image: str | None = None
    flags: dict[str, str | bool] = field(default_factory=dict)
    positional: list[str] = field(default_factory=list)

    def flag(self, *names: str) -> str | bool | None:
        """The value of the first of these flags given (names without dashes, `_` as `-`)."""
        for name in names:
            if name in self.flags:
                return self.flags[name]
        return None

    def text(self, *names: str) -> str | None:
        """A flag's value when it has one."""
        value = self.flag(*names)
        return value if isinstance(value, str) else None

    def number(self, *names: str) -> int | None:
        """A flag's integer value."""
        value = self.text(*names)
        return int(value) if value is not None and value.isdigit() else None

    def image_version(self) -> str | None:
        """The version in the image tag (`vllm/vllm-openai:v0.12.0` -> 0.12.0)."""
        m = _IMAGE_VERSION.search(self.image or "")
        return m["v"] if m else None


def find_command(
    text: str, markers: Sequence[re.Pattern[str]], *, launch: bool = False
) -> Command | None:
    """The command on a (joined) line when a token is one of the engine's markers and flags
    follow it, else None.

    The engine's arguments start after the last marker token; a marker that looks like an
    image (has a `:` tag or a `/`) is kept as the image. `launch`: the text is known to be
    the engine's launch command (a bundle's run.json), whose program may be a variable
    (`$LLAMA_SERVER -m …`): without a marker, the arguments start after its first word.
    """
    try:
        tokens = shlex.split(text, comments=False, posix=True)
    except ValueError:  # an unbalanced quote: a log line, or a command cut off
        try:
            tokens = shlex.split(text + '"', posix=True)
        except ValueError:
            return None
    start = image = None
    for i, token in enumerate(tokens):
        if any(m.fullmatch(token) for m in markers):
            start = i + 1
            if "/" in token and ("docker" in tokens[:i] or "podman" in tokens[:i]):
                image = token
    if start is None and launch:
        start = next((i + 1 for i, t in enumerate(tokens) if not _ENV.match(t)), None)
    if start is None or start >= len(tokens):
        return None
    cmd = Command(argv=tokens[start:], image=image)
    before = "$"
    for token in tokens[:start]:
        if _ENV.match(token) and (before in _ENV_BEFORE or _ENV.match(before)):
            name, _, value = token.partition("=")
            cmd.env[name] = value
        before = token
    _read_flags(cmd)
    return cmd if cmd.flags else None  # a command passes flags; a log line naming it does not


def _read_flags(cmd: Command) -> None:
    argv = cmd.argv
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg.startswith("-") and len(arg) > 1 and not _number(arg):
            name, eq, value = arg.lstrip("-").partition("=")
            name = name.replace("_", "-")
            if eq:
                cmd.flags[name] = value
            elif i + 1 < len(argv) and (not argv[i + 1].startswith("-") or _number(argv[i + 1])):
                cmd.flags[name] = argv[i + 1]
                i += 1
            else:
                cmd.flags[name] = True
        else:
            cmd.positional.append(arg)
        i += 1


def _number(token: str) -> bool:
    try:
        float(token)
    except ValueError:
        return False
    return True
