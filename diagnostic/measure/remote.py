"""The ssh commands inside a plan's shell templates: which node each one reaches, with the
consultant's own options (`-F`, `-J`, `-o`, before or after the host, as ssh reads them), and
what it runs there. ssh is found as a command's program, behind the wrappers put around it
(`timeout 30 ssh`, `sudo ssh`), inside a container or job step (`docker exec c ssh`, `srun
ssh`), and inside a remote command (`ssh login ssh gpu1`: a hop)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from diagnostic.bundle.shellwords import Token, split_line
from diagnostic.common.ssh_options import option_pairs, read_options

__all__ = [
    "CONTAINERS",
    "PREFIXES",
    "SHELLS",
    "SimpleCommand",
    "SshCall",
    "is_assignment",
    "simple_commands",
    "ssh_calls",
    "ssh_hosts",
]

# Options that make ssh do something else than run a command and end: a forward, a tunnel,
# a control command, the background (`ssh -fN -L 8000:localhost:8000 gpu1`).
_NOT_A_LOGIN = set("fNOLRDWMsGVQ")
# Words a command's program may come after, this machine running it all the same.
PREFIXES = {"exec", "nohup", "env", "command", "sudo", "nice", "time"}
_WRAPPERS = PREFIXES | {"timeout", "doas", "ionice", "stdbuf", "setsid", "sshpass", "taskset"}
# Programs that run their command in a container or a job step: an ssh there starts elsewhere.
CONTAINERS = {"docker", "podman", "nerdctl", "kubectl", "oc", "srun", "salloc", "apptainer"}
# Reserved words a command may start with (`if ssh gpu1 …; then`).
_KEYWORDS = {"if", "then", "elif", "else", "fi", "while", "until", "do", "done", "!", "{", "}"}
SHELLS = {"bash", "sh", "zsh", "dash"}
_ASSIGNMENT = re.compile(r"[A-Za-z_]\w*=")


@dataclass(frozen=True)
class SshCall:
    """One `ssh [options] host [command]` found in a template."""

    host: str = ""
    options: tuple[str, ...] = ()
    remote: str = ""  # the commands run on the node, as one string ("" for a login)
    hop: str = ""  # where ssh itself runs: "" here, else the node or container it runs in

    def argv(self, *extra: str) -> list[str]:
        """ssh with `extra` options, the template's, the host (no command)."""
        return ["ssh", *extra, *self.options, self.host]

    def login_options(self) -> list[str]:
        """The template's options less those that make ssh forward, tunnel or fork instead of
        running a command (`-N`, `-f`, `-L …`, `-O exit`)."""
        kept: list[str] = []
        for flag, value in option_pairs(list(self.options)):
            if flag not in _NOT_A_LOGIN:
                kept += [f"-{flag}", *([value] if value is not None else [])]
        return kept


@dataclass
class SimpleCommand:
    """One simple command of a shell line: its words (keywords and redirections left out),
    the files it redirects (operator, file), and what a here-document or here-string gives
    it on its input."""

    words: list[str] = field(default_factory=list)
    redirects: list[tuple[str, str]] = field(default_factory=list)
    stdin: str | None = None


def ssh_calls(command: str, *, hop: str = "") -> list[SshCall]:
    """Every ssh call in a shell command, in order, each followed by those in its remote
    command (none when the command cannot be read)."""
    calls = []
    for simple in simple_commands(command):
        found = _ssh_at(simple.words)
        if found is None:
            continue
        at, inside = found
        call = _parse(simple.words[at + 1 :], simple.stdin, hop=inside or hop)
        if call is not None:
            calls.append(call)
            calls += ssh_calls(call.remote, hop=call.host)
    return calls


def ssh_hosts(command: str) -> list[str]:
    """The nodes a command reaches over ssh (hops too), in order, once each."""
    return list(dict.fromkeys(call.host for call in ssh_calls(command)))


def is_assignment(word: str) -> bool:
    """Whether a word is `NAME=value`, set for the command that follows it."""
    return _ASSIGNMENT.match(word) is not None


def simple_commands(command: str) -> list[SimpleCommand]:
    """The simple commands of a shell line, in order (here-documents' bodies are the input
    of the command that names them, never commands of their own)."""
    tokens = split_line(command)
    found, current = [], SimpleCommand()
    skip = (0, 0)  # the span of a here-document's body
    i = 0
    while i < len(tokens):
        token = tokens[i]
        i += 1
        if skip[0] <= token.start < skip[1]:
            continue
        keyword = token.kind == "word" and token.value in _KEYWORDS and not current.words
        if token.kind in ("op", "comment") or keyword:
            if current.words:
                found.append(current)
            current = SimpleCommand()
        elif token.kind == "word":
            current.words.append(token.value)
        elif token.kind == "redirect":
            arrows = _arrows(tokens, i - 1)
            target = tokens[i - 1 + arrows] if i - 1 + arrows < len(tokens) else None
            if target is None or target.kind != "target":
                continue
            i += arrows
            if arrows == 2:  # <<EOF
                current.stdin, skip = _here_document(command, target)
            elif arrows == 3:  # <<< word
                current.stdin = target.value + "\n"
            else:
                current.redirects.append((token.value, target.value))
    if current.words:
        found.append(current)
    return found


def _arrows(tokens: list[Token], i: int) -> int:
    """How many `<` redirections stand side by side from token `i` (<< and <<< are read by
    the tokenizer as `<` each); 1 for any other redirection."""
    n = 1
    while (
        tokens[i].value == "<"
        and i + n < len(tokens)
        and tokens[i + n].kind == "redirect"
        and tokens[i + n].value == "<"
        and tokens[i + n].start == tokens[i + n - 1].end
    ):
        n += 1
    return n


def _here_document(command: str, target: Token) -> tuple[str, tuple[int, int]]:
    """The body of the here-document `target` names (<<EOF, <<-'EOF') and its span, the
    delimiter's line included."""
    strip_tabs = target.value.startswith("-")
    delimiter = target.value.removeprefix("-")
    start = command.find("\n", target.end) + 1 or len(command)
    at = start
    for line in command[start:].splitlines(keepends=True):
        if (line.lstrip("\t") if strip_tabs else line).rstrip("\n") == delimiter:
            return command[start:at], (start, at + len(line))
        at += len(line)
    return command[start:], (start, len(command))


def _ssh_at(words: list[str]) -> tuple[int, str] | None:
    """Where ssh stands in a simple command's words when it runs (its program, or the first
    ssh behind a wrapper), and the container or job step it runs in ("" for here)."""
    program = next((i for i, w in enumerate(words) if not is_assignment(w)), None)
    if program is None:
        return None
    name = _base(words[program])
    if name == "ssh":
        return program, ""
    if name not in _WRAPPERS and name not in CONTAINERS:
        return None
    at = next((i for i in range(program + 1, len(words)) if _base(words[i]) == "ssh"), None)
    if at is None:
        return None
    return at, (name if name in CONTAINERS else "")


def _base(word: str) -> str:
    return word.rsplit("/", 1)[-1]


def _parse(words: list[str], stdin: str | None, *, hop: str) -> SshCall | None:
    """`ssh`'s arguments as ssh reads them: options, the host, options again unless `--`
    ended them, then the command."""
    options: list[str] = []
    i, ended = read_options(words, 0, options)
    if i >= len(words):
        return None
    host = words[i]
    i += 1
    if not ended:
        i, _ = read_options(words, i, options)
    rest = words[i:]
    # as ssh sends it: the words joined, split again there; `ssh node <<EOF` or `ssh node
    # bash -s <<EOF`: the body runs there
    body = stdin is not None and (not rest or _reads_stdin(rest))
    remote = stdin if body and stdin is not None else " ".join(rest)
    return SshCall(host=host, options=tuple(options), remote=remote, hop=hop)


def _reads_stdin(words: list[str]) -> bool:
    """Whether a remote command is a shell reading its commands from its input."""
    return _base(words[0]) in SHELLS and not any(
        w.startswith("-") and not w.startswith("--") and "c" in w for w in words[1:]
    )
