"""Reading a launch command: found by an engine's markers in a log or a message, split by shlex,
its flags read.

A command is evidence of what was configured, not of what the engine resolved. Each engine
names its markers (program, `-m` module, container image) and reads the flags it knows. Besides
a shell line (POSIX, PowerShell or cmd.exe, Windows paths included) a command can be a JSON
array of arguments, a `docker run` of an image named after the engine, or a bare list of
flags (argument items of a manifest, backend arguments one per line): a bare list names no
program, so it is not known to be the whole command.
"""

from __future__ import annotations

import html
import json
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field

__all__ = [
    "COMMAND_ANCHORS",
    "ENV_WORD",
    "Command",
    "find_command",
    "flag_spans",
    "from_argv",
    "words",
]

# A multi-line container command often names the engine only on a later line: the scanner
# takes these lines too and joins their `\` continuations.
COMMAND_ANCHORS: tuple[bytes, ...] = (b"docker run", b"podman run")
# Placeholders of a usage text, never of a command that ran (`<redacted>` is the bundle's mask).
# A usage synopsis (`sglang serve --model-path <model> [options]`); a placeholder alone
# (`--device <ROCm0|Vulkan0>`, `<path-to-drafter>`) is a value the reader did not write.
_USAGE = re.compile(r"\[options\]", re.IGNORECASE)
# Flags that make a program answer and exit instead of serving.
_QUERY = frozenset({"version", "help", "h", "list-devices"})
ENV_WORD = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")  # NAME=VALUE before the program
_ENV_BEFORE = ("$", "+", "sudo", "env", "-e", "--env")  # what may precede NAME=VALUE
# The tag's version, also after the engine's name (`rocm/sgl-dev:sglang-0.5.14-rocm720-…`).
_IMAGE_VERSION = re.compile(r":(?:[a-z]+-)?v?(?P<v>\d+\.\d+(?:\.\d+)?(?:\.post\d+|rc\d+)?)")
_WINDOWS = re.compile(r"\b[A-Za-z]:\\|\.exe\b|(?:^|\s)\.\\")
_GLUED = re.compile(r"(?<=[A-Za-z0-9])(?=--[A-Za-z])")  # where a lost space joined two flags
_JSON_ARGS = re.compile(r"""\[\s*"(?:[^"\\]|\\.)*"(?:\s*,\s*"(?:[^"\\]|\\.)*")*\s*\]""")
_BARE_START = re.compile(r"--?[A-Za-z]")
# A script's program held in a variable the text never sets (`"$EXECUTABLE" -m …`): its flags
# are read as a bare list, which names the engine by its flags alone.
_VAR_PROGRAM = re.compile(r"\$(?:\{\w+\}|\w+)")
# Inline code in prose: "Server flags: `--ctx-size 8192 --spec-type mtp`." (one backtick pair or
# several, as Markdown allows).
_CODE_SPAN = re.compile(r"(`+)([^`]+)\1")
# An issue body pasted as rendered HTML: its code elements hold the commands (a block's one flag
# included: it is code, not a mention in prose).
_HTML_TAG = re.compile(r"</?(?:p|pre|code|br|h\d|li|div)\b[^>]*>", re.IGNORECASE)
_CODE_ELEMENT = re.compile(r"<code\b[^>]*>(.*?)(?:</code>|$)", re.IGNORECASE)
# A container image reference with a tag (`lmsysorg/sglang:v0.5.15-cu130`).
_IMAGE = re.compile(r"[\w.-]+(?::\d+)?(?:/[\w.-]+)+:[\w.-]+")
# docker/podman run options that take a value (the image is the first word that is neither).
_DOCKER_VALUED = frozenset(
    [
        "-e",
        "--env",
        "--env-file",
        "-v",
        "--volume",
        "-p",
        "--publish",
        "--name",
        "--gpus",
        "--network",
        "--net",
        "--ipc",
        "--shm-size",
        "-w",
        "--workdir",
        "--entrypoint",
        "--runtime",
        "-u",
        "--user",
        "--mount",
        "--device",
        "--ulimit",
        "--cpuset-cpus",
        "--cpuset-mems",
        "--memory",
        "-m",
        "--platform",
        "--label",
        "-l",
        "--pid",
        "--restart",
        "--add-host",
        "--hostname",
        "-h",
        "--security-opt",
        "--cap-add",
        "--cap-drop",
        "--group-add",
        "--log-driver",
        "--log-opt",
        "--tmpfs",
        "--cpus",
        "--device-cgroup-rule",
    ]
)


@dataclass
class Command:
    """The engine's own arguments, the environment set on the line and the image, if any."""

    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    image: str | None = None
    flags: dict[str, str | bool] = field(default_factory=dict)
    positional: list[str] = field(default_factory=list)
    bare: bool = False  # arguments without the program: maybe not the whole command

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
    text: str,
    markers: Sequence[re.Pattern[str]],
    *,
    launch: bool = False,
    image_words: Sequence[str] = (),
) -> Command | None:
    """The command on a (joined) line when a token is one of the engine's markers (or a
    `docker run` image naming one of `image_words`) and flags follow it, else a bare list of
    flags or a JSON array of arguments, else None. A command quoted inline in prose (in
    backticks) is read from its quotes, one pasted as rendered HTML from its code elements.

    The engine's arguments start after the last marker token; a marker that looks like an
    image (has a `:` tag or a `/`) is kept as the image. `launch`: the text is known to be
    the engine's launch command (a bundle's run.json), whose program may be a variable
    (`$LLAMA_SERVER -m …`): without a marker, the arguments start after its first word.
    """
    if "<" in text and _HTML_TAG.search(text):
        for code in _CODE_ELEMENT.findall(text):
            cmd = find_command(html.unescape(code), markers, launch=launch, image_words=image_words)
            if cmd is not None:
                return cmd
        text = html.unescape(_HTML_TAG.sub(" ", text))
    for span in _CODE_SPAN.findall(text) if "`" in text else ():
        cmd = find_command(span[1], markers, launch=launch, image_words=image_words)
        if cmd is not None and (not cmd.bare or len(cmd.flags) > 1):
            return cmd  # a command quoted inline; one flag alone is a mention, not a launch
    tokens = _tokens(text)
    if tokens is None:
        return None
    start = image = None
    for i, token in enumerate(tokens):
        if any(m.fullmatch(token) for m in markers):
            start = i + 1
            if "/" in token and ("docker" in tokens[:i] or "podman" in tokens[:i]):
                image = token
    if start is not None and image is None and image_words:
        # the image before the program of a container line whose `docker run …` was cut off
        image = next(
            (t for t in tokens[:start] if _IMAGE.fullmatch(t) and _names(t, image_words)), None
        )
    if start is None and image_words:
        at = _docker_image(tokens)
        if at is not None and _names(tokens[at], image_words):
            start, image = at + 1, tokens[at]
    if start is None and launch:
        start = next((i + 1 for i, t in enumerate(tokens) if not ENV_WORD.match(t)), None)
    bare = False
    if start is None:
        array = _json_args(text)
        if array is not None:
            found = [i for i, t in enumerate(array) if any(m.fullmatch(t) for m in markers)]
            tokens, start, bare = array, (found[-1] + 1 if found else 0), not found
        elif tokens and _BARE_START.match(tokens[0]):
            start, bare = 0, True
        elif len(tokens) > 1 and _VAR_PROGRAM.fullmatch(tokens[0]) and _BARE_START.match(tokens[1]):
            start, bare = 1, True
    if start is None or start >= len(tokens):
        return None
    if any(_USAGE.fullmatch(t) for t in tokens[start:]):
        return None  # a usage synopsis (`Example: sglang serve --model-path <model> [options]`)
    cmd = Command(argv=tokens[start:], image=image, bare=bare)
    before = "$"
    for token in tokens[:start]:
        if ENV_WORD.match(token) and (before in _ENV_BEFORE or ENV_WORD.match(before)):
            name, _, value = token.partition("=")
            cmd.env[name] = value
        before = token
    _read_flags(cmd)
    if _QUERY.intersection(cmd.flags):
        return None  # `llama-server --version`, `vllm serve --help`: a query, no server started
    return cmd if cmd.flags else None  # a command passes flags; a log line naming it does not


def words(text: str) -> list[str] | None:
    """The words of a shell line (None when they cannot be read)."""
    return _tokens(text)


def _tokens(text: str) -> list[str] | None:
    """The words of a shell line; Windows paths keep their separators (as `/`)."""
    if _WINDOWS.search(text):
        text = re.sub(r'\\(?!")', "/", text)
    try:
        return _unglued(shlex.split(text, comments=False, posix=True))
    except ValueError:  # an unbalanced quote: a log line, or a command cut off
        try:
            return _unglued(shlex.split(text + '"', posix=True))
        except ValueError:
            return None


def _unglued(tokens: list[str]) -> list[str]:
    """Two flags whose space the author lost (`--keep-mm-feature-on-device--speculative-algorithm`)
    as two words: no option name has `--` inside it (a value after `=` is left alone)."""
    if not any(t.startswith("--") and _GLUED.search(t.partition("=")[0], 2) for t in tokens):
        return tokens
    out: list[str] = []
    for t in tokens:
        name, eq, value = t.partition("=")
        if t.startswith("--") and _GLUED.search(name, 2):
            parts = _GLUED.split(name)
            out += [*parts[:-1], parts[-1] + eq + value]
        else:
            out.append(t)
    return out


def _json_args(text: str) -> list[str] | None:
    """A JSON array of strings on the line (a manifest's `"args": [...]`), when it holds flags."""
    m = _JSON_ARGS.search(text)
    if m is None:
        return None
    try:
        value = json.loads(m[0])
    except ValueError:
        return None
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return [str(v) for v in value]
    return None


def _names(image: str, words: Sequence[str]) -> bool:
    return any(w in image.lower() for w in words)


def _docker_image(tokens: list[str]) -> int | None:
    """Index of the image in `docker run …` / `podman run …`, else None."""
    for i, token in enumerate(tokens[:-1]):
        if token in ("docker", "podman") and tokens[i + 1] == "run":
            j = i + 2
            while j < len(tokens) and tokens[j].startswith("-"):
                valued = tokens[j] in _DOCKER_VALUED and "=" not in tokens[j]
                j += 2 if valued else 1
            return j if j < len(tokens) else None
    return None


def from_argv(argv: list[str]) -> Command:
    """A command from arguments already split (a router's list), flags read."""
    cmd = Command(argv=argv)
    _read_flags(cmd)
    return cmd


def flag_spans(argv: Sequence[str]) -> list[tuple[int, int, str, str | bool]]:
    """(start, end, name, value) of every flag: `--name=value`, `--name value` (the next word
    when it is no option, or a number) or a bare `--name` (True); names without dashes, `_`
    as `-`. Words outside these spans are positional."""
    spans: list[tuple[int, int, str, str | bool]] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg.startswith("-") and len(arg) > 1 and not _number(arg):
            name, eq, value = arg.lstrip("-").partition("=")
            name = name.replace("_", "-")
            if eq:
                spans.append((i, i + 1, name, value))
            elif i + 1 < len(argv) and (not argv[i + 1].startswith("-") or _number(argv[i + 1])):
                spans.append((i, i + 2, name, argv[i + 1]))
                i += 1
            else:
                spans.append((i, i + 1, name, True))
        i += 1
    return spans


def _read_flags(cmd: Command) -> None:
    covered: set[int] = set()
    for start, end, name, value in flag_spans(cmd.argv):
        cmd.flags[name] = value
        covered.update(range(start, end))
    cmd.positional.extend(a for i, a in enumerate(cmd.argv) if i not in covered)


def _number(token: str) -> bool:
    try:
        float(token)
    except ValueError:
        return False
    return True
