"""SGLang's capture lines per rank and what they resolve to (the capture half of `sglang`)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from diagnostic.engines._common import Worker
from diagnostic.schema.logfacts import Evidence

__all__ = ["DECODING", "Rank", "graph_kind", "resolve_rank"]


@dataclass
class Rank(Worker):
    """Capture lines of one rank (TP0, DP0 TP1, ...)."""

    begun: dict[str, Evidence] = field(default_factory=dict)
    ended: dict[str, Evidence] = field(default_factory=dict)


# Graph kinds as SGLang's capture lines name them (0.4: "Capture cuda graph" for the target's
# decode or verify graph, "draft", "draft extend"; 0.5.x: "target decode|verify|prefill", "draft
# decode|prefill|extend").
_ROLES = {"target": "target decode/verify (0.4)", "draft": "draft decode"}
DECODING = ("target", "target-verify", "target-decode")


def _roles(kinds: Iterable[str]) -> str:
    return ", ".join(sorted(_ROLES.get(k, k.replace("-", " ")) for k in kinds))


def graph_kind(what: str) -> str:
    """The graph a capture line names, as a key ("target", "draft", "target-verify" ...)."""
    what = what.strip().lower()
    if what in ("", "target", "decode"):
        return "target"
    return what.replace(" ", "-")


def resolve_rank(rank: Rank, *, failed: bool) -> tuple[str, str, list[Evidence]]:
    """The mode a rank's capture lines show, why, and those lines (`failed`: a capture failure,
    or a traceback after a begin, was seen)."""
    lines = list(rank.begun.values()) + list(rank.ended.values())
    ended = set(rank.ended)
    if ended & set(DECODING):
        return "CAPTURED", f"graphs captured: {_roles(ended)}", lines
    if any(k.startswith("draft") for k in ended):  # drafter graphs follow the target's
        return (
            "CAPTURED",
            f"graphs captured: {_roles(ended)}; SGLang captures the drafter's after the "
            "target's, so the target's were too",
            lines,
        )
    if ended:  # the prefill graph alone: decoding runs eagerly
        return (
            "NONE",
            f"graphs captured: {_roles(ended)} only; no decode or verify graph, so decoding "
            "runs eagerly",
            lines,
        )
    begun = ", ".join(sorted(rank.begun))
    if not failed:  # graphs on, capture under way where the paste ends: nothing says it failed
        return (
            "CAPTURED",
            f"capture started ({begun} graphs: they were not disabled) and the text ends "
            "before 'Capture cuda graph end' with no failure",
            lines,
        )
    return (
        "UNKNOWN",
        f"capture started ({begun} graphs: they were not disabled) and failed before "
        "'Capture cuda graph end'",
        lines,
    )
