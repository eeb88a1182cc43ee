"""Greedy output equivalence: each arm's text per prompt vs the baseline's, first divergence."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from diagnostic.schema.analysis import ArmEquivalence, PromptEquivalence
from diagnostic.schema.requests import RequestRecord

__all__ = ["EXCERPT", "arm_equivalence", "first_divergence"]

EXCERPT = 40
"""Characters of context shown on each side of a divergence."""


def first_divergence(a: str, b: str) -> int | None:
    """0-based index of the first differing character (the shorter length when one text is a
    prefix of the other); None when identical."""
    if a == b:
        return None
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return min(len(a), len(b))


def _excerpt(text: str, at: int) -> str:
    return text[max(0, at - EXCERPT) : at + EXCERPT]


def _texts(records: Sequence[RequestRecord], arm: str) -> dict[tuple[str, str], list[str]]:
    out: dict[tuple[str, str], list[str]] = defaultdict(list)
    for r in sorted(records, key=lambda r: (r.restart, r.seq)):
        if r.arm == arm:
            out[(r.workload, r.prompt_id)].append(r.text)
    return out


def _prompt(key: tuple[str, str], reference: list[str], texts: list[str]) -> PromptEquivalence:
    ref = reference[0]
    divergences = [d for d in (first_divergence(ref, t) for t in texts) if d is not None]
    first = min(divergences) if divergences else None
    odd = next((t for t in texts if first_divergence(ref, t) == first), ref)
    return PromptEquivalence(
        workload=key[0],
        prompt_id=key[1],
        identical=first is None,
        first_divergent_char=first,
        baseline_excerpt=_excerpt(ref, first) if first is not None else None,
        arm_excerpt=_excerpt(odd, first) if first is not None else None,
        baseline_consistent=len(set(reference)) == 1,
    )


def arm_equivalence(records: Sequence[RequestRecord], arm: str, baseline: str) -> ArmEquivalence:
    """Compare every text the arm produced for a prompt with the baseline's first text for that
    prompt; a prompt is identical only when all of the arm's texts match."""
    base, mine = _texts(records, baseline), _texts(records, arm)
    prompts = [_prompt(key, base[key], mine[key]) for key in sorted(set(base) & set(mine))]
    n_identical = sum(p.identical for p in prompts)
    return ArmEquivalence(
        arm=arm,
        baseline=baseline,
        n_prompts=len(prompts),
        n_identical=n_identical,
        rate=n_identical / len(prompts) if prompts else None,
        prompts=prompts,
    )
