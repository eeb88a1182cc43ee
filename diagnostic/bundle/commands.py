"""Redaction by construction where the structure is known: a launch command keeps the value
of an option only when the engine's documentation lists the option as safe to show (allowlists:
model, port, parallelism, speculative and compilation settings …); an environment keeps the
values of allow-listed names alone; a URL keeps scheme, host, port and path (urls). Whatever is
kept is still scanned as free text, and a word that looks like a key is masked wherever it is.

A launch line is read as the shell reads it (shellwords), simple command by simple command:
the launcher before the engine (env assignments, python -m, docker run, numactl …) is read
with the launchers' list, the engine's arguments with that engine's list; a program that is no
engine and no wrapper of one (mysql, sshpass, docker login, curl …) keeps no option value."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

from diagnostic.bundle.allowlists import env_allowed, flag_key, options
from diagnostic.bundle.secret_shapes import name_strength
from diagnostic.bundle.shellwords import Token, split_line
from diagnostic.bundle.textrules import MASK, key_like
from diagnostic.bundle.urls import redact_url
from diagnostic.common.ssh_options import WITH_ARG, read_options
from diagnostic.engines.command import flag_spans

__all__ = ["redact_command", "redact_env", "redact_variables"]

Scan = Callable[[str], str]
_ASSIGNMENT = re.compile(r"^(?P<name>[A-Za-z_][A-Za-z0-9_]*)=(?P<value>.*)$", re.S)
_WRAPPERS = frozenset(
    ("sudo", "env", "exec", "nohup", "time", "nice", "stdbuf", "timeout", "numactl", "taskset")
) | frozenset(("chrt", "ionice", "setsid", "command", "builtin", "export"))
_WRAPPER_VALUED = frozenset(
    ["-u", "-g", "-n", "-s", "-k", "-c", "-p", "--user", "--group", "--signal", "--kill-after"]
)
# Programs that may run an engine (its options are then read with every engine's list): an
# interpreter, a launcher, a script by path, a program named by a variable, an engine's name.
_RUNNERS = re.compile(
    r"(?i)^(?:python[\d.]*|uv|conda|mamba|micromamba|bash|sh|torchrun|accelerate|deepspeed"
    r"|mpirun|srun|ray|apptainer|singularity|\$.*|.*(?:vllm|sglang|llama|trtllm|tensorrt"
    r"|triton).*)$"
)
_CONTAINERS = frozenset({"docker", "podman", "nerdctl"})
# A wrapper's number: timeout's 30s, taskset's 0-3,5, numactl's 0,1 (never a word like `ssh`).
_WRAPPER_NUMBER = re.compile(r"[\d.,:-]+[smhd]?")
# sshpass's options that take a value (-p PASSWORD, -f FILE, -d FD, -P PROMPT): none is kept.
_SSHPASS_VALUED = frozenset(("-p", "-f", "-d", "-P"))
_SHELLS = frozenset({"bash", "sh", "zsh", "dash", "ksh"})
_SHELL_C = re.compile(r"-[a-z]*c[a-z]*")  # bash -c, -lc, -ic: the next word is a command
_DOCKER_RUN = frozenset({"run", "create"})
_IMAGE_ENGINES = (
    ("sglang", "sglang"),
    ("vllm", "vllm"),
    ("llama.cpp", "llamacpp"),
    ("llama-cpp", "llamacpp"),
    ("trtllm", "trtllm"),
    ("tensorrt", "trtllm"),
)
_NAME_SHAPE = re.compile(r"^--?[A-Za-z][A-Za-z0-9]*(?:[-_.][A-Za-z0-9]+)*$")
_PLAIN = re.compile(r"^[\w./:@%+,~{}$=\[\]-]*$")
_SPECIAL = re.compile(r"\$[!$?#@*0-9-]")  # the shell's own parameters ($!, $?, $1 …)
_SHELL_VAR = re.compile(r"(?<![\\$])\$(?:\{([A-Za-z_]\w*)\}|([A-Za-z_]\w*))")
# ssh -o settings whose values are kept (connection behaviour, names and paths); any other
# (SetEnv, SendEnv, ProxyCommand, RemoteCommand, LocalCommand …) is masked.
_SSH_SETTINGS = frozenset(
    """addressfamily batchmode checkhostip compression connectionattempts connecttimeout
    controlmaster controlpath controlpersist exitonforwardfailure forwardagent
    globalknownhostsfile hostkeyalias hostname identitiesonly identityfile loglevel port
    preferredauthentications proxyjump pubkeyauthentication passwordauthentication
    requesttty serveralivecountmax serveraliveinterval stricthostkeychecking tcpkeepalive
    updatehostkeys user userknownhostsfile""".split()  # noqa: SIM905
)


def redact_command(command: str, scan: Scan, *, launch: bool = True) -> str:
    """`command` with every value the allow-lists do not keep replaced by the mask; `scan`
    (the free-text redaction) runs on what is kept. Not a `launch` (a stop, health or log
    command: pkill, curl, cat over ssh), only the engine launches it holds are read by the
    lists, and the rest is scanned as free text."""
    edits: list[tuple[int, int, str]] = []
    segment: list[Token] = []
    for token in [*split_line(command), Token("op", len(command), len(command), "")]:
        if token.kind == "word":
            segment.append(token)
            continue
        if token.kind == "redirect":
            continue
        if token.kind == "target":
            kept = _scanned(token.value, scan)
            if kept != token.value:
                edits.append((token.start, token.end, _quoted(kept)))
            continue
        if launch or _engine([w.value for w in segment])[0] is not None:
            edits += _segment(command, segment, scan)
        else:
            edits += [e for w in segment for e in _nested_launch(w, scan)]
        segment = []
        if token.kind == "comment" and scan(token.value) != token.value:
            edits.append((token.start, token.end, scan(token.value)))
    for start, end, text in sorted(edits, reverse=True):
        command = command[:start] + text + command[end:]
    return command if launch else scan(command)


def redact_env(env: Mapping[str, str], scan: Scan) -> dict[str, str]:
    """An environment: the values of allow-listed names kept (and scanned), the others masked."""
    return {name: _env_value(name, value, scan) for name, value in env.items()}


def redact_variables(command: str, variables: Mapping[str, str], scan: Scan) -> dict[str, str]:
    """The values of the shell variables a (redacted) command names: a variable keeps its
    value when its name is allow-listed or it stands where the command keeps a value (`-m
    $MODEL`, the program `$LLAMA_SERVER`); one in a masked place (`--api-key $KEY`) is masked."""
    kept = {braced or bare for braced, bare in _SHELL_VAR.findall(command)}
    return {
        name: _scanned(value, scan) if name in kept or env_allowed(name) else _mask(value)
        for name, value in variables.items()
    }


def _env_value(name: str, value: str, scan: Scan) -> str:
    return _scanned(value, scan) if env_allowed(name) else _mask(value)


def _mask(value: str) -> str:
    return value if value in ("", MASK) else MASK


def _scanned(value: str, scan: Scan) -> str:
    if "://" in value and re.fullmatch(r"[a-zA-Z][\w+.-]*://\S*", value):
        return redact_url(value)
    return scan(value)


def _segment(line: str, words: list[Token], scan: Scan) -> list[tuple[int, int, str]]:
    """The edits of one simple command."""
    if not words:
        return []
    values = [w.value for w in words]
    program = _program(values)
    if program is not None and _base(values[program]) == "ssh":
        return _ssh(line, words, program, scan)
    if program is not None and _base(values[program]) == "sshpass":
        return _sshpass(line, words, program, scan)
    engine, start = _engine(values)
    if engine is None:
        if values[0].startswith("-"):  # a bare list of options: an engine's, unnamed
            return _arguments(line, words, options("any"), scan, model=False)
        program = _program(values)
        if program is None:
            return _launcher(line, words, scan)
        flag = values[program + 1] if program + 1 < len(values) else ""
        if _base(values[program]) in _SHELLS and _SHELL_C.fullmatch(flag):
            return _nested(line, words, program + 2, scan)
        allowed = _allowed(values, program)
        edits = _launcher(line, words[:program], scan)
        edits += _positional(line, words[program], scan, first=True)
        return edits + _arguments(line, words[program + 1 :], allowed, scan, model=False)
    edits = _launcher(line, words[:start], scan)
    return edits + _arguments(line, words[start:], options(engine), scan, model=True)


def _ssh(line: str, words: list[Token], at: int, scan: Scan) -> list[tuple[int, int, str]]:
    """`ssh [options] host [command]`: ssh's options read as its getopt reads them (values
    kept, -o settings by _SSH_SETTINGS), the host kept and scanned, the command on the node
    redacted as a command of its own."""
    values = [w.value for w in words]
    edits = _launcher(line, words[:at], scan)
    host, ended = read_options(values, at + 1, [])
    edits += _ssh_options(words[at + 1 : host], scan)
    if host >= len(words):
        return edits
    edits += _positional(line, words[host], scan, first=True)
    rest = host + 1
    if not ended:
        rest, _ = read_options(values, rest, [])
        edits += _ssh_options(words[host + 1 : rest], scan)
    if rest == len(words) - 1 and " " in words[rest].value:  # `ssh node 'COMMAND'`
        return edits + _as_command(words[rest], scan)
    return edits + _segment(line, words[rest:], scan)


def _sshpass(line: str, words: list[Token], at: int, scan: Scan) -> list[tuple[int, int, str]]:
    """`sshpass -p PASSWORD ssh …`: every value of sshpass's own options masked, the command
    it runs read as a command of its own."""
    edits = _launcher(line, words[:at], scan)
    k = at + 1
    while k < len(words) and words[k].value.startswith("-"):
        word = words[k]
        if word.value in _SSHPASS_VALUED and k + 1 < len(words):
            edits.append((words[k + 1].start, words[k + 1].end, MASK))
            k += 2
            continue
        if word.value[:2] in _SSHPASS_VALUED and len(word.value) > 2:
            edits.append((word.start, word.end, f"{word.value[:2]}{MASK}"))
        k += 1
    return edits + _segment(line, words[k:], scan)


def _ssh_options(words: list[Token], scan: Scan) -> list[tuple[int, int, str]]:
    """Edits of ssh's option words (`-vp 22`, `-p22`, `-o Key=Value`, `-oKey=Value`)."""
    edits: list[tuple[int, int, str]] = []
    k = 0
    while k < len(words):
        word = words[k]
        at = next((i for i, c in enumerate(word.value[1:], 1) if c in WITH_ARG), None)
        if word.value == "--" or at is None:
            k += 1
            continue
        inline = word.value[at + 1 :]
        target = word if inline or k + 1 >= len(words) else words[k + 1]
        value = inline or (target.value if target is not word else "")
        kept = _ssh_value(word.value[at], value, scan)
        if kept != value:
            prefix = word.value[: at + 1] if target is word else ""
            edits.append((target.start, target.end, _quoted(prefix + kept)))
        k += 1 if target is word else 2
    return edits


def _ssh_value(letter: str, value: str, scan: Scan) -> str:
    """An ssh option's value as kept: a -o setting by its name, any other value scanned."""
    if letter != "o":
        return _scanned(value, scan)
    name, sep, setting = value.partition("=")
    if not sep:
        name, sep, setting = value.partition(" ")
    if not sep:
        return value
    kept = _scanned(setting, scan) if name.strip().lower() in _SSH_SETTINGS else _mask(setting)
    return f"{name}{sep}{kept}"


def _as_command(word: Token, scan: Scan) -> list[tuple[int, int, str]]:
    """A word that is a command of its own (`bash -c 'CMD'`, `ssh node 'CMD'`), redacted as
    one and quoted again."""
    redacted = redact_command(word.value, scan)
    return [] if redacted == word.value else [(word.start, word.end, _quoted(redacted))]


def _nested(line: str, words: list[Token], at: int, scan: Scan) -> list[tuple[int, int, str]]:
    """`bash -c 'COMMAND' …`: the command redacted as a command, the words before it as a
    launcher's, those after it (the script's $0 $1 …) as positional words."""
    edits = _launcher(line, words[: at - 1], scan)
    if at < len(words):
        edits += _as_command(words[at], scan)
        edits += _arguments(line, words[at + 1 :], frozenset(), scan, model=False)
    return edits


def _allowed(values: list[str], program: int) -> frozenset[str]:
    """The options a program that starts no known engine keeps: every engine's when it may
    run one (a script, an interpreter, a container run), none otherwise (mysql, curl …)."""
    base = _base(values[program])
    if base in _CONTAINERS:
        after = values[program + 1] if program + 1 < len(values) else ""
        return options("launchers") if after in _DOCKER_RUN else frozenset()
    if "/" in values[program] or _RUNNERS.match(base):
        return options("any")
    return frozenset()


def _base(word: str) -> str:
    return word.rsplit("/", 1)[-1]


def _engine(values: list[str]) -> tuple[str | None, int]:
    """The engine a simple command starts, and the index of its first argument (the last
    marker wins: `docker run sglang-image python3 -m sglang.launch_server …`)."""
    found: tuple[str | None, int] = (None, 0)
    docker = False
    for k, value in enumerate(values):
        base, after = _base(value), values[k + 1] if k + 1 < len(values) else ""
        if base in ("docker", "podman", "nerdctl") and after in _DOCKER_RUN:
            docker = True
        if base in ("vllm", "sglang") and after == "serve":
            found = (base, k + 2)
        elif base == "llama-server":
            found = ("llamacpp", k + 1)
        elif base == "trtllm-serve":
            found = ("trtllm", k + 2 if after in ("serve", "grpc") else k + 1)
        elif value.startswith("vllm.entrypoints."):
            found = ("vllm", k + 1)
        elif value == "sglang.launch_server":
            found = ("sglang", k + 1)
        elif docker and ("/" in value or ":" in value) and not value.startswith("-"):
            engine = next((e for word, e in _IMAGE_ENGINES if word in value.lower()), None)
            if engine is not None and k > 0 and not values[k - 1].startswith("-"):
                found = (engine, k + 1)
    return found


def _program(values: list[str]) -> int | None:
    """Index of the program a simple command runs, past assignments and wrappers."""
    previous = ""
    for k, value in enumerate(values):
        wrapper_value = previous in _WRAPPER_VALUED or _WRAPPER_NUMBER.fullmatch(value)
        if not (
            _ASSIGNMENT.match(value)
            or _base(value) in _WRAPPERS
            or value.startswith("-")
            or wrapper_value
        ):
            return k
        previous = value
    return None


def _launcher(line: str, words: list[Token], scan: Scan) -> list[tuple[int, int, str]]:
    """Edits of the words before the program or engine: assignments by the environment's
    list, options by the launchers' (docker's -e NAME=VALUE by the environment's)."""
    edits: list[tuple[int, int, str]] = []
    plain: list[Token] = []
    for k, word in enumerate(words):
        m = _ASSIGNMENT.match(word.value)
        after = words[k + 1].value if k + 1 < len(words) else ""
        if word.value in ("-e", "--env") and _ASSIGNMENT.match(after):
            continue  # docker's -e NAME=VALUE: the assignment is read next
        if m and not word.value.startswith("-"):
            kept = _env_value(m["name"], m["value"], scan)
            if kept != m["value"]:
                edits.append(_replace_after_eq(line, word, kept))
        elif word.value.startswith(("-e=", "--env=")):
            name, _, value = word.value.partition("=")[2].partition("=")
            kept = _env_value(name, value, scan)
            if kept != value:
                flag = word.value.split("=", 1)[0]
                edits.append((word.start, word.end, _quoted(f"{flag}={name}={kept}")))
        else:
            plain.append(word)
    return edits + _arguments(line, plain, options("launchers"), scan, model=False)


def _arguments(
    line: str, words: list[Token], allowed: frozenset[str], scan: Scan, *, model: bool
) -> list[tuple[int, int, str]]:
    """Edits of a program's arguments: option values kept when `allowed` lists the option,
    positional words kept unless key-like (the first one, an engine's model, scanned only)."""
    edits: list[tuple[int, int, str]] = []
    covered: set[int] = set()
    values = [w.value for w in words]
    secret_next = False
    for start, end, _name, value in flag_spans(values):
        word = words[start]
        covered.update(range(start, end))
        key = flag_key(word.value)
        if secret_next:  # the value of a secret option, though it starts with a dash
            edits.append((word.start, words[end - 1].end, MASK))
            secret_next = False
            continue
        base = key.split(".", 1)[0]
        if key in allowed or base in allowed:
            edits += _kept_value(line, words, start, end, value, scan)
            continue
        if word.value == "--":
            covered.discard(start + 1)  # the end of options: what follows is read again
            continue
        name = word.value.split("=", 1)[0]
        short = not name.startswith("--") and len(name) > 2
        if short or not _NAME_SHAPE.match(name) or key_like(word.value):
            edits.append(_masked_flag(line, word))
            if end - start == 2:
                edits.append((words[start + 1].start, words[start + 1].end, MASK))
        elif "=" in word.value:
            edits.append(_replace_after_eq(line, word, MASK))
        elif end - start == 2:
            edits.append((words[start + 1].start, words[start + 1].end, MASK))
        elif name_strength(key.lstrip("-")) is not None and end < len(words):
            secret_next = True  # `--api-key -Kq9…`: the next word is the value
    login = False
    first = model
    for k, word in enumerate(words):
        if k in covered:
            continue
        if login:
            edits.append((word.start, word.end, MASK))
            continue
        edits += _positional(line, word, scan, first=first)
        first = False
        login = word.value == "login"
    return edits


def _kept_value(
    line: str, words: list[Token], start: int, end: int, value: str | bool, scan: Scan
) -> list[tuple[int, int, str]]:
    if not isinstance(value, str):
        return []
    kept = _scanned(value, scan)
    if key_like(value):
        kept = MASK
    if kept == value:
        return []
    if end - start == 2:
        return [(words[start + 1].start, words[start + 1].end, _quoted(kept))]
    return [_replace_after_eq(line, words[start], kept)]


def _nested_launch(word: Token, scan: Scan) -> list[tuple[int, int, str]]:
    """A word that is itself an engine's launch (`ssh head 'vllm serve M …'`), redacted as one."""
    if " " not in word.value:
        return []
    inner = [t.value for t in split_line(word.value) if t.kind == "word"]
    if not inner or _engine(inner)[0] is None:
        return []
    return _as_command(word, scan)


def _positional(line: str, word: Token, scan: Scan, *, first: bool) -> list[tuple[int, int, str]]:
    value = word.value
    if value in ("", MASK):
        return []
    nested = _nested_launch(word, scan)
    if nested:
        return nested
    if _SPECIAL.fullmatch(value):
        return []
    if key_like(value) or not (first or _PLAIN.match(value) or " " in value):
        return [(word.start, word.end, MASK)]
    kept = _scanned(value, scan)
    return [] if kept == value else [(word.start, word.end, _quoted(kept))]


def _masked_flag(line: str, word: Token) -> tuple[int, int, str]:
    """A flag whose name itself may be the secret (`-pSECRET`, `-Kq9…`): its dash and first
    letter kept."""
    name = word.value.split("=", 1)[0]
    dashes = name[: len(name) - len(name.lstrip("-"))]
    shown = dashes + name.lstrip("-")[:1] if dashes == "-" else ""
    return (word.start, word.end, shown + MASK)


def _replace_after_eq(line: str, word: Token, value: str) -> tuple[int, int, str]:
    raw = line[word.start : word.end]
    head, eq, _ = raw.partition("=")
    if eq and not any(q in head for q in "'\"\\"):
        return (word.start + len(head) + 1, word.end, _quoted(value))
    name = word.value.split("=", 1)[0]
    return (word.start, word.end, _quoted(f"{name}={value}"))


def _quoted(value: str) -> str:
    """A value as the shell line shows it: bare when plain, else in single quotes."""
    if _PLAIN.match(value.replace(MASK, "")):
        return value
    return "'" + value.replace("'", "'\\''") + "'"
