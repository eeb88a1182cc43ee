"""The logs of one bundle run side by side (its nodes, their workers): where they disagree."""

from __future__ import annotations

from diagnostic.schema.logfacts import LogFacts, RunSources, SourceCapture, SpecFacts

__all__ = ["run_sources"]


def run_sources(runs: list[LogFacts]) -> list[RunSources]:
    """One table per bundle run: every log source read, in order, and what they disagree on
    (logs that are not a bundle run's, or that no engine wrote, are left out)."""
    groups: dict[str, list[LogFacts]] = {}
    for facts in runs:
        if facts.run_id is not None and facts.engine != "unknown":
            groups.setdefault(facts.run_id, []).append(facts)
    return [
        RunSources(run_id=rid, sources=[_one(f) for f in group], differences=_differences(group))
        for rid, group in groups.items()
    ]


def _one(facts: LogFacts) -> SourceCapture:
    return SourceCapture(
        source=facts.source or facts.label or facts.path,
        path=facts.path,
        engine=facts.engine,
        resolved=facts.capture.resolved,
        per_worker=dict(facts.capture.per_worker),
        spec=facts.spec,
    )


def _modes(facts: LogFacts) -> dict[str, str]:
    """Mode per worker of a source ('node1' alone when its log names no worker)."""
    name = facts.source or facts.label or facts.path
    workers = facts.capture.per_worker
    if workers:
        return {f"{name} {w}": m for w, m in workers.items()}
    return {name: facts.capture.resolved}


def _spec(spec: SpecFacts) -> str | None:
    if spec.enabled is None:
        return None
    if not spec.enabled:
        return "off"
    k = f" k={spec.num_draft_tokens}" if spec.num_draft_tokens is not None else ""
    return f"{spec.method or 'on'}{k}"


def _differences(group: list[LogFacts]) -> list[str]:
    """Across sources only: workers of one log that disagree are rule workers-disagree's."""
    out: list[str] = []
    if len(group) < 2:
        return out
    modes = {w: m for f in group for w, m in _modes(f).items() if m != "UNKNOWN"}
    if len(set(modes.values())) > 1:
        out.append("capture mode: " + ", ".join(f"{w} {m}" for w, m in modes.items()))
    specs = {f.source or f.path: s for f in group if (s := _spec(f.spec)) is not None}
    if len(set(specs.values())) > 1:
        out.append("speculation: " + ", ".join(f"{n} {s}" for n, s in specs.items()))
    return out
