"""The ssh commands inside a plan's shell templates: which node each one reaches, with the
consultant's own options (`-F`, `-J`, `-o`), and what it runs there."""

from __future__ import annotations

import shlex
from dataclasses import dataclass

__all__ = ["SshCall", "ssh_calls", "ssh_hosts"]

# ssh's options that take an argument (OpenSSH 9's getopt string, ssh.c)
_WITH_ARG = set("BbcDEeFIiJLlmOoPpQRSWw")
# Words that end one shell command and start the next.
_SEPARATORS = {";", "&&", "||", "|", "&", "(", ")", "then", "do", "else", "{", "}"}


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
    try:
        lexer = shlex.shlex(command, posix=True, punctuation_chars=";&|()")
        lexer.whitespace_split = True
        words = list(lexer)
    except ValueError:  # an unbalanced quote: `bash -n` in the plan check says it better
        return []
    calls = []
    for i, word in enumerate(words):
        if word.rsplit("/", 1)[-1] == "ssh" and (i == 0 or words[i - 1] in _SEPARATORS | {"exec"}):
            call = _parse(words[i + 1 :])
            if call is not None:
                calls.append(call)
    return calls


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
    if i >= len(words) or words[i] in _SEPARATORS:
        return None
    rest = []
    for word in words[i + 1 :]:
        if word in _SEPARATORS:
            break
        rest.append(word)
    return SshCall(host=words[i], options=tuple(options), remote=" ".join(rest))
