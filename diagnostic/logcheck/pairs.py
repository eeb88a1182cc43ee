"""Spec runs beside the no-spec run of the same engine and settings (check's comparisons)."""

from __future__ import annotations

from typing import Any

from diagnostic.schema.logfacts import Comparison, LogFacts

__all__ = ["pair_runs"]


def _settings(facts: LogFacts, params: dict[str, Any]) -> dict[str, Any]:
    """Requested settings less speculation and what differs between restarts by nature."""
    ignore = set(params.get("ignore_args", []))
    prefixes = tuple(params.get("ignore_prefixes", []))
    return {
        k: v
        for k, v in facts.requested.items()
        if k not in ignore and not k.lstrip("-").startswith(prefixes)
    }


def _differences(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    return sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))


def pair_runs(runs: list[LogFacts], params: dict[str, Any]) -> list[Comparison]:
    """Each spec run beside the no-spec run of its engine and model with the closest settings."""
    pairs: list[Comparison] = []
    for spec in runs:
        if spec.spec.enabled is not True:
            continue
        candidates = [
            b
            for b in runs
            if b.spec.enabled is False
            and b.engine == spec.engine
            and (b.run_id is None or b.run_id != spec.run_id)  # two nodes of one run: sources
            and (b.model == spec.model or None in (b.model, spec.model))
        ]
        if not candidates:
            continue
        mine = _settings(spec, params)
        scored = sorted(
            (
                (len(_differences(mine, _settings(b, params))), i, b)
                for i, b in enumerate(candidates)
            ),
            key=lambda t: (t[0], t[1]),
        )
        best_score = scored[0][0]
        best = [b for score, _, b in scored if score == best_score]
        if len(best) > 1:
            continue  # no single closest baseline: comparing would be a guess
        base = best[0]
        diff = _differences(mine, _settings(base, params))
        how = (
            "same settings apart from speculation"
            if not diff
            else f"closest settings (also differ: {', '.join(diff[:5])})"
        )
        pairs.append(
            Comparison(
                engine=spec.engine,
                baseline=base.path,
                baseline_label=base.label,
                baseline_resolved=base.capture.resolved,
                spec=spec.path,
                spec_label=spec.label,
                spec_method=spec.spec.method,
                spec_resolved=spec.capture.resolved,
                baseline_runner=base.model_runner,
                spec_runner=spec.model_runner,
                same=_same(base.capture.resolved, spec.capture.resolved),
                matched_on=how,
            )
        )
    return pairs


def _same(a: str, b: str) -> bool | None:
    """Equal modes; None when either run's mode could not be read."""
    return None if "UNKNOWN" in (a, b) else a == b
