"""ssh's own options on a command line, read as ssh's getopt reads them (OpenSSH 9, ssh.c):
`-vp 22`, `-p22`, `-tt`, `-o Key=Value`, and `--` ending them. One reader for the sweep (which
node a command reaches) and for redaction (which values of an ssh launcher are kept)."""

from __future__ import annotations

from collections.abc import Iterator

__all__ = ["WITH_ARG", "option_pairs", "read_options"]

# ssh's options that take an argument (OpenSSH 9's getopt string, ssh.c)
WITH_ARG = frozenset("BbcDEeFIiJLlmOoPpQRSWw")


def read_options(words: list[str], i: int, options: list[str]) -> tuple[int, bool]:
    """Read ssh's option words from word `i` into `options`; where they end, and whether a
    `--` ended them."""
    while i < len(words):
        word = words[i]
        if word == "--":
            return i + 1, True
        if not word.startswith("-") or word == "-":
            break
        options.append(word)
        i += 1
        if _wants_next(word) and i < len(words):
            options.append(words[i])
            i += 1
    return i, False


def _wants_next(word: str) -> bool:
    """Whether an option word ends with a letter that takes a value (`-p`, `-vp`): the
    next word is that value."""
    at = next((k for k, letter in enumerate(word[1:], 1) if letter in WITH_ARG), None)
    return at == len(word) - 1


def option_pairs(options: list[str]) -> list[tuple[str, str | None]]:
    """Option words as (letter, value) pairs, as getopt reads them."""
    pairs: list[tuple[str, str | None]] = []
    words: Iterator[str] = iter(options)
    for word in words:
        for k, letter in enumerate(word[1:], 1):
            if letter in WITH_ARG:
                pairs.append((letter, word[k + 1 :] or next(words, None)))
                break
            pairs.append((letter, None))
    return pairs
