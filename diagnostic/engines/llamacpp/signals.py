"""llama.cpp's one-line signals (as data) and its launch commands (`llama-server`, the
ggml-org image, a router's child command, preset lines): the speculation their flags set."""

from __future__ import annotations

import re

from diagnostic.engines._common import ev
from diagnostic.engines._lines import Line
from diagnostic.engines._signals import Signal
from diagnostic.engines.command import Command
from diagnostic.schema.logfacts import LogFacts

__all__ = [
    "COMMANDS",
    "COMMAND_HINTS",
    "FILE_FLAGS",
    "MARKERS",
    "SIGNALS",
    "speculation_from_flags",
    "speculative_flag",
]

_ON = {"spec.enabled": True}
SIGNALS: tuple[Signal, ...] = (
    # llama-speculative / llama-speculative-simple summary: `n_draft = 5` is the draft length.
    Signal(
        "n_draft",
        {**_ON, "spec.num_draft_tokens": "{k}"},
        "metric",
        re.compile(r"^\s*n_draft\s*=\s*(?P<k>\d+)"),
    ),
    Signal(
        "n_draft", {"spec.method": "draft"}, "metric", re.compile(r"^\s*n_draft\s*="), weak=True
    ),
    # Per-drafter statistics: `statistics draft-eagle3: …`, `statistics ngram-simple: …`, and
    # forks' own types (`statistics mtp: …`), named as printed.
    Signal(
        "statistics",
        {**_ON, "spec.method": "{m}"},
        "metric",
        re.compile(r"statistics\s+(?P<m>[a-z][\w-]*):\s+#"),
    ),
    # The implementation's settings line after `adding speculative implementation`.
    Signal(
        "n_max=",
        {"spec.num_draft_tokens": "{k}"},
        "startup",
        re.compile(r"^(?:\S+ [IWE] )?common_speculative\w*: - n_max=(?P<k>\d+)"),
        head=True,
    ),
    Signal("draft acceptance", _ON, "metric"),  # even when the line is cut before its numbers
    # ngram-mod's hash table, logged as each prompt begins (`begin: ngram_mod occupancy = …`)
    # and when it is reset: only that implementation drafts with it.
    Signal(
        "ngram_mod occupancy",
        {**_ON, "spec.method": "{m}"},
        "metric",
        re.compile(r"\b(?P<m>ngram_mod) occupancy\b"),
        weak=True,
    ),
    # A /completion response: draft_n counts drafted tokens; generation_settings always list
    # speculative.n_max (16 by default), a draft length only when drafting happened.
    Signal('"draft_n"', _ON, "metric"),
    Signal(
        '"speculative.n_max"',
        {"spec.num_draft_tokens": "{k}"},
        "metric",
        re.compile(r'"speculative\.n_max":\s*(?P<k>\d+)'),
        if_spec=True,
    ),
    Signal(
        "size_m=", {"spec.num_draft_tokens": "{k}"}, "startup", re.compile(r"\bsize_m=(?P<k>\d+)")
    ),
    # A release archive's name (`llama-b6123-bin-win-cuda-12.4-x64.zip`).
    Signal(
        "-bin-",
        {"version": "b{n}"},
        "startup",
        re.compile(r"\bllama-b(?P<n>\d{3,})-bin-"),
        weak=True,
        head=True,
    ),
    # The ggml-org images name the build in their tag (`llama.cpp:server-cuda-b5400`).
    Signal(
        "llama.cpp:",
        {"version": "b{n}"},
        "startup",
        re.compile(r"llama\.cpp:[\w.-]*?-b(?P<n>\d{3,})\b"),
        weak=True,
        head=True,
    ),
)
# llama-cli takes the same common (and speculative) arguments as the server.
COMMANDS: tuple[bytes, ...] = (b"llama-server", b"llama-cli", b"llama.cpp:server")
MARKERS = (
    re.compile(r"\S*llama-(?:server|cli)(?:\.exe)?"),
    re.compile(r"\S*llama\.cpp:server\S*"),
)
_OFF = {"none", "off", "0", "false"}
# A line worth reading as a command: the program, the image, or flags only llama.cpp takes
# (argument lists without the program: a compose command array, a line of flags).
COMMAND_HINTS = (
    "llama-server",
    "llama-cli",
    "llama.cpp:server",
    "--spec-",
    "--draft",
    "-md",
    "--model-draft",
)
# Settings files a command can take the rest of its flags from (not in the text).
FILE_FLAGS = ("models-preset", "config")
_K_FLAGS = ("--draft-max", "--draft", "--draft-n", "--spec-draft-n-max")
_TYPE_K_FLAGS = {  # the draft max of a type that drafts without a draft model
    "ngram-simple": "--spec-ngram-simple-size-m",
    "ngram-mod": "--spec-ngram-mod-n-max",
}
_DRAFT_FLAGS = ("md", "model-draft", "spec-draft-model")


def speculation_from_flags(facts: LogFacts, cmd: Command, line: Line, *, whole: bool) -> None:
    """Speculation from flags (a command, a router's argument list, preset lines):
    `whole` when nothing else configures the server (no preset or config file)."""
    facts.requested.update(cmd.flags)
    spec = facts.spec
    drafter = cmd.text(*_DRAFT_FLAGS)
    method, params = _spec_type(cmd.text("spec-type"))
    if method is not None and method.lower() in _OFF:
        method, drafter = None, None
    if drafter:
        spec.drafter = spec.drafter or drafter
    if method or drafter:
        spec.enabled, spec.method = True, spec.method or method or "draft"
    k_flags = [f for t, f in _TYPE_K_FLAGS.items() if (method or "").startswith(t)] + list(_K_FLAGS)
    k = next((n for f in k_flags if (n := cmd.number(f.lstrip("-"))) is not None), None)
    if k is None and params.get("n_max", "").isdigit():
        k = int(params["n_max"])
    if k is not None and (spec.enabled or not whole):
        spec.num_draft_tokens = k
    if spec.enabled:
        facts.spec_evidence.append(ev(line))
    elif spec.enabled is None and whole:
        spec.enabled = False


def _spec_type(value: str | None) -> tuple[str | None, dict[str, str]]:
    """A --spec-type value and its parameters (`mtp:n_min=0,n_max=16,p_min=0.75`)."""
    if value is None or ":" not in value:
        return value, {}
    name, _, rest = value.partition(":")
    pairs = (p.partition("=") for p in rest.split(","))
    return name, {k.strip(): v.strip() for k, eq, v in pairs if eq}


def speculative_flag(flag: str) -> bool:
    """Whether a flag (its name without dashes) configures speculation."""
    return flag.startswith(("spec", "draft", "md", "model-draft", "hfd", "hf-repo-draft"))
