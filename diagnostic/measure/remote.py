"""The ssh commands inside a plan's shell templates: which node each one reaches, with the
consultant's own options (`-F`, `-J`, `-o`), and what it runs there."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

__all__ = [
    "PREFIXES",
    "SEPARATORS",
    "SshCall",
    "is_assignment",
    "shell_words",
    "ssh_calls",
    "ssh_hosts",
]

# ssh's options that take an argument (OpenSSH 9's getopt string, ssh.c)
_WITH_ARG = set("BbcDEeFIiJLlmOoPpQRSWw")
# Words that end one shell command and start the next.
SEPARATORS = {";", "&&", "||", "|", "&", "(", ")", "then", "do", "else", "{", "}"}
# Words a command's program may come after.
PREFIXES = {"exec", "nohup", "env", "command", "sudo", "nice", "time"}
_ASSIGNMENT = re.compile(r"[A-Za-z_]\w*=")


@dataclass(frozen=True)
class SshCall:
    """One `ssh [options] host [command]` found in a template."""

    host: str = ""
    options: tuple[str, ...] = ()
    remote: str = ""  # the command run on the node, as one string ("" for a login)

    def argv(self, *extra: str) -> list[str]:
        """ssh with the template's options, `extra` options, the host (no command)."""
        return ["ssh", *extra, *self.options, self.host]


def ssh_calls(command: str) -> list[SshCall]:
    """Every ssh call in a shell command, in order (none when the command cannot be split)."""
    words = shell_words(command)
    calls = []
    for i, word in enumerate(words):
        if word.rsplit("/", 1)[-1] == "ssh" and _starts_command(words[:i]):
            call = _parse(words[i + 1 :])
            if call is not None:
                calls.append(call)
    return calls


def shell_words(command: str) -> list[str]:
    """A shell command's words, quotes removed, with `;`, `&&`, `|` … as words of their own;
    none when it cannot be split (an unbalanced quote: the plan's `bash -n` check says it)."""
    try:
        lexer = shlex.shlex(command, posix=True, punctuation_chars=";&|()")
        lexer.whitespace_split = True
        return list(lexer)
    except ValueError:
        return []


def is_assignment(word: str) -> bool:
    """Whether a word is `NAME=value`, set for the command that follows it."""
    return _ASSIGNMENT.match(word) is not None


def _starts_command(before: list[str]) -> bool:
    """Whether the word after `before` is a command's program (past `VAR=value`, `exec` …)."""
    for word in reversed(before):
        if word in SEPARATORS:
            return True
        if word not in PREFIXES and not is_assignment(word):
            return False
    return True


def ssh_hosts(command: str) -> list[str]:
    """The nodes a command reaches over ssh, in order, once each."""
    return list(dict.fromkeys(call.host for call in ssh_calls(command)))


def _parse(words: list[str]) -> SshCall | None:
    options: list[str] = []
    i = 0
    while i < len(words) and words[i].startswith("-") and words[i] != "--":
        word = words[i]
        options.append(word)
        if word[-1] in _WITH_ARG and len(word) == 2 and i + 1 < len(words):
            options.append(words[i + 1])
            i += 1
        i += 1
    if i < len(words) and words[i] == "--":
        i += 1
    if i >= len(words) or words[i] in SEPARATORS:
        return None
    rest = []
    for word in words[i + 1 :]:
        if word in SEPARATORS:
            break
        rest.append(word)
    return SshCall(host=words[i], options=tuple(options), remote=" ".join(rest))
