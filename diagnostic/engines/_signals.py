"""Signals as data: a line that shows a fact, what it sets, and what kind of line it is.

Each engine module lists its `SIGNALS`; `SignalReader` applies them to every candidate line
and records where each value came from (`LogFacts.sources`). A new signal is a row in an
engine's table and a test log, not a new code path. The parsers' own handlers record their
sources through `record_sources` with the kind of line they were reading.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from diagnostic.engines._common import cap_append, ev
from diagnostic.engines._lines import Line
from diagnostic.schema.logfacts import Evidence, FieldSource, LogFacts, SourceKind

__all__ = ["TRACKED", "Signal", "SignalReader", "name_source", "record_sources", "set_fact"]

# The fields whose source is recorded, besides capture.resolved (set by each engine's finish).
TRACKED = (
    "version",
    "model",
    "spec.enabled",
    "spec.method",
    "spec.num_draft_tokens",
    "spec.drafter",
    "capture.configured",
)
_GROUP = re.compile(r"\{(\w+)\}")


@dataclass(frozen=True)
class Signal:
    """One kind of line: a literal it contains (the scan's prefilter and an engine signature),
    optionally a regex, the facts it sets (`"{group}"` takes a regex group) and its source.

    `weak` values are applied once every line was read, only where nothing else set the field;
    `if_spec` ones are weak and apply only when speculation turned out to be on. A `head`
    signal is looked for near the top of a log only (a version in an environment dump, an
    error at start-up): the scan skips it in the serving lines after.
    """

    contains: str
    sets: Mapping[str, object]
    source: SourceKind
    regex: re.Pattern[str] | None = None
    weak: bool = False
    if_spec: bool = False
    head: bool = False

    def match(self, text: str) -> dict[str, str] | None:
        """The regex groups when the line is this signal (empty without a regex), else None."""
        if self.contains not in text:
            return None
        if self.regex is None:
            return {}
        m = self.regex.search(text)
        return None if m is None else {k: v for k, v in m.groupdict().items() if v is not None}


def _value(template: object, groups: dict[str, str], path: str) -> object:
    if isinstance(template, str) and "{" in template:
        value: Any = _GROUP.sub(lambda m: groups.get(m[1], ""), template)
        if path.endswith("num_draft_tokens"):
            return int(value) if value.isdigit() else None
        return value or None
    return template


def _get(facts: LogFacts, path: str) -> Any:
    obj: Any = facts
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


def set_fact(facts: LogFacts, path: str, value: object) -> bool:
    """Set a dotted field of the facts when it is still unset; whether it was set."""
    if value is None or _get(facts, path) is not None:
        return False
    head, _, last = path.rpartition(".")
    setattr(_get(facts, head) if head else facts, last, value)
    return True


def name_source(
    facts: LogFacts, path: str, kind: SourceKind, evidence: Evidence, *, replace: bool = False
) -> None:
    """Name the line a field's value came from (the first one named, unless `replace`)."""
    if replace or path not in facts.sources:
        facts.sources[path] = FieldSource(kind=kind, line=evidence.line, text=evidence.text)


def record_sources(facts: LogFacts, kind: SourceKind, evidence: Evidence) -> None:
    """Name this line as the source of every tracked field that has a value and no source."""
    for path in TRACKED:
        if path not in facts.sources and _get(facts, path) is not None:
            name_source(facts, path, kind, evidence)


@dataclass
class SignalReader:
    """Applies an engine's signals line by line; `finish` applies the deferred ones."""

    signals: Sequence[Signal]
    facts: LogFacts
    deferred: list[tuple[Signal, dict[str, str], Evidence]] = field(default_factory=list)
    active: list[Signal] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.active = list(self.signals)

    def feed(self, line: Line) -> None:
        """Apply every signal the line shows; a signal whose fields are all set is done."""
        text = line.text
        for signal in [s for s in self.active if s.contains in text]:
            groups = signal.match(text)
            if groups is None:
                continue
            evidence = ev(line, signal.contains)
            if signal.weak or signal.if_spec:
                self.deferred.append((signal, groups, evidence))
                self.active.remove(signal)  # the first line is the one to name
                continue
            self._apply(signal, groups, evidence)
            if all(_get(self.facts, path) is not None for path in signal.sets):
                self.active.remove(signal)  # every later line of this kind changes nothing

    def finish(self) -> None:
        """Weak values where nothing else set the field; `if_spec` ones when speculation is on."""
        for signal, groups, evidence in self.deferred:
            if not signal.if_spec or self.facts.spec.enabled:
                self._apply(signal, groups, evidence)

    def _apply(self, signal: Signal, groups: dict[str, str], evidence: Evidence) -> None:
        facts = self.facts
        for path, template in signal.sets.items():
            if set_fact(facts, path, _value(template, groups, path)):
                name_source(facts, path, signal.source, evidence)
                if path.startswith("spec."):
                    cap_append(facts.spec_evidence, evidence)
