"""Speculation flags in launch commands of vLLM, SGLang and llama.cpp: whether a command turns
speculation on, and the command with those flags taken out (to find an arm's matched baseline:
the arm whose launch differs only in speculation).

A command's words are read as they stand here (shlex, else whitespace), not as `parse` reads
a pasted line: a plan's or a bundle's launch command, never a log line."""

from __future__ import annotations

import re
import shlex

__all__ = ["SPEC_FLAG", "infer_speculative", "speculates", "without_speculation"]

# vLLM --speculative-config/--speculative_config (and V0 --speculative-model, --num-
# speculative-tokens), SGLang --speculative-algorithm/-num-draft-tokens/-draft-model-path…,
# llama.cpp -md/--model-draft, --draft(-max|-min|-n|-p-min), --spec-type, --spec-draft-…,
# --spec-ngram-…, -hfd/--hf-repo-draft, and their device/thread options for the drafter.
SPEC_FLAG = re.compile(
    r"^(?:--speculative[-_][\w-]+|--num[-_]speculative[-_]tokens|--spec[-_][\w-]+|-md"
    r"|--model-draft|--draft(?:[-_][\w-]+)?|--hf-repo-draft|-hfd|-devd|--device-draft"
    r"|-ngld|--gpu-layers-draft|-td|--threads-draft|-tbd|--threads-batch-draft|-cd|--ctx-size-draft)$"
)
_OFF_VALUES = {"none", "off", "0", "false"}


def _split(command: str) -> list[str]:
    try:
        return shlex.split(command, comments=False)
    except ValueError:  # an unbalanced quote: compare words as they stand
        return command.split()


def _flags(tokens: list[str]) -> list[tuple[int, int, str, str | None]]:
    """(start, end, flag, value) of every speculation flag: `--flag=value` or `--flag value`
    (the next token when it is not itself an option)."""
    out: list[tuple[int, int, str, str | None]] = []
    i = 0
    while i < len(tokens):
        flag, eq, inline = tokens[i].partition("=")
        if SPEC_FLAG.match(flag):
            if eq:
                out.append((i, i + 1, flag, inline))
            elif i + 1 < len(tokens) and not tokens[i + 1].startswith("-"):
                out.append((i, i + 2, flag, tokens[i + 1]))
                i += 1
            else:
                out.append((i, i + 1, flag, None))
        i += 1
    return out


def infer_speculative(command: str) -> bool:
    """Whether a launch command carries a speculation flag that turns speculation on
    (`--spec-type none` and the like do not)."""
    return any(
        not (flag == "--spec-type" and (value or "").lower() in _OFF_VALUES)
        for _, _, flag, value in _flags(_split(command))
    )


def speculates(declared: bool | None, launch: str | None) -> bool:
    """Whether an arm speculates: as its plan declares, else by its launch flags; an arm with
    neither (collected by hand) counts as speculative."""
    if declared is not None:
        return declared
    return not launch or infer_speculative(launch)


def without_speculation(command: str) -> tuple[str, ...]:
    """The command's words with every speculation flag and its value taken out."""
    tokens = _split(command)
    drop = {j for start, end, _, _ in _flags(tokens) for j in range(start, end)}
    return tuple(t for j, t in enumerate(tokens) if j not in drop)
