"""The allow-lists of redaction by construction, as data (bundle/allow/*.txt, each saying its
source): per engine, the launch options whose values are safe to show; the launchers' options
(python, docker run, numactl …); the environment variables whose values are kept."""

from __future__ import annotations

import functools
import re
from pathlib import Path

from diagnostic.bundle.secret_shapes import name_strength

__all__ = ["ENGINES", "env_allowed", "flag_key", "options"]

_FOLDER = Path(__file__).parent / "allow"
ENGINES = ("vllm", "sglang", "llamacpp", "trtllm")


@functools.cache
def _entries(name: str) -> frozenset[str]:
    lines = (_FOLDER / f"{name}.txt").read_text(encoding="utf-8").splitlines()
    return frozenset(line.strip() for line in lines if line.strip() and not line.startswith("#"))


def flag_key(word: str) -> str:
    """An option as the lists spell it: its dashes, then its name with `_` as `-`
    (`--tp_size` → `--tp-size`), without a `=value`."""
    name = word.split("=", 1)[0]
    stripped = name.lstrip("-")
    return name[: len(name) - len(stripped)] + stripped.replace("_", "-")


@functools.cache
def options(list_name: str) -> frozenset[str]:
    """The options of one list (an engine's, `launchers`), or of them all (`any`)."""
    if list_name == "any":
        return frozenset().union(*(options(e) for e in (*ENGINES, "launchers")))
    return frozenset(flag_key(entry) for entry in _entries(list_name))


@functools.cache
def _env() -> tuple[frozenset[str], tuple[str, ...]]:
    entries = _entries("env")
    exact = frozenset(e for e in entries if not e.endswith("*"))
    prefixes = tuple(e[:-1] for e in entries if e.endswith("*"))
    return exact, prefixes


_LOCATES = re.compile(r"(?:^|_)(?:URL|URI|DSN|ENDPOINT|CONN|CONNECTION)(?:_|$)")


def env_allowed(name: str) -> bool:
    """Whether an environment variable's value is kept: a name on the list, or an engine's
    own prefix (SGLANG_, LLAMA_ARG_, NCCL_ …) on a name that says no secret and no address."""
    exact, prefixes = _env()
    if name in exact:
        return True
    return (
        name.startswith(prefixes)
        and name_strength(name) is None
        and _LOCATES.search(name.upper()) is None
    )
