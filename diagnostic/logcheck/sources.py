"""The logs of one bundle run side by side (its nodes, their workers): where they disagree."""

from __future__ import annotations

from dataclasses import dataclass

from diagnostic.schema.logfacts import LogFacts, RunSources, SourceCapture, draft_length

__all__ = ["SourceRow", "run_sources", "source_rows"]


@dataclass(frozen=True)
class SourceRow:
    """One line of the per-node table: a worker of a source (or the source as a whole)."""

    run_id: str
    source: str
    worker: str  # "" when the log names no worker of its own
    resolved: str
    spec: str


def source_rows(groups: list[RunSources]) -> list[SourceRow]:
    """The per-node, per-worker capture table of check and of the report; empty when no run
    has more than one source or worker (the per-run table then says it all)."""
    several = any(
        len(g.sources) > 1 or any(len(s.per_worker) > 1 for s in g.sources) for g in groups
    )
    if not several:
        return []
    return [
        SourceRow(g.run_id, s.source, worker, mode, _spec(s) or "unknown")
        for g in groups
        for s in g.sources
        for worker, mode in (s.per_worker.items() if s.per_worker else [("", s.resolved)])
    ]


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


def _capture(group: list[LogFacts]) -> str | None:
    """'FULL on head (4 workers); PIECEWISE on node2', or None when every known mode agrees."""
    by_mode: dict[str, list[str]] = {}
    for facts in group:
        name = facts.source or facts.label or facts.path
        workers = list(facts.capture.per_worker.values()) or [facts.capture.resolved]
        for mode in dict.fromkeys(workers):
            if mode != "UNKNOWN":
                n = workers.count(mode)
                by_mode.setdefault(mode, []).append(f"{name} ({n} workers)" if n > 1 else name)
    if len(by_mode) < 2:
        return None
    return "; ".join(f"{mode} on {', '.join(names)}" for mode, names in by_mode.items())


def _spec(facts: LogFacts | SourceCapture) -> str | None:
    spec = facts.spec
    if spec.enabled is None:
        return None
    if not spec.enabled:
        return "off"
    k = draft_length(facts.engine, spec.num_draft_tokens)
    return f"{spec.method or 'on'}{f' k={k}' if k is not None else ''}"


def _differences(group: list[LogFacts]) -> list[str]:
    """Across sources only: workers of one log that disagree are rule workers-disagree's."""
    out: list[str] = []
    if len(group) < 2:
        return out
    capture = _capture(group)
    if capture is not None:
        out.append(f"capture mode: {capture}")
    specs = {f.source or f.path: s for f in group if (s := _spec(f)) is not None}
    if len(set(specs.values())) > 1:
        out.append("speculation: " + ", ".join(f"{n} {s}" for n, s in specs.items()))
    return out
