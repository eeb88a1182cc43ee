"""Pieces every engine's log parser shares: evidence lines, warnings, acceptance tallies."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from diagnostic.engines._lines import Line
from diagnostic.engines._platform import PlatformReader
from diagnostic.schema.logfacts import (
    MAX_EVIDENCE,
    MAX_SAMPLES,
    MAX_WARNINGS,
    AcceptanceSample,
    AcceptanceSummary,
    Evidence,
    FieldSource,
    LogFacts,
    SourceKind,
)

__all__ = [
    "AcceptanceTally",
    "LogParser",
    "Worker",
    "cap_append",
    "disagreement",
    "ev",
    "version_in_words",
]

EVIDENCE_WIDTH = 320
# Words before a version something changed at ("since 0.9.0", "fixed in", "upgrading to").
_CHANGED_AT = re.compile(
    r"(?i)(?:since|before|after|than|until|from|to|vs\.?|versus|(?:fixed|introduced|added|"
    r"removed|changed|deprecated|landed|released|broken|regressed) in)\s+`?$"
)


def version_in_words(text: str, said: re.Pattern[str]) -> str | None:
    """The first version (`said`'s group v) in the words of a line that is not a version
    something changed at: the running version as people write it, a parser's last resort."""
    for m in said.finditer(text):
        if not _CHANGED_AT.search(text[max(0, m.start() - 24) : m.start()]):
            return m["v"]
    return None


def ev(line: Line, focus: str | None = None) -> Evidence:
    """Evidence for a line; a long line is cut around `focus` (or after its start)."""
    text = line.text.strip()
    if len(text) > EVIDENCE_WIDTH:
        at = text.find(focus) if focus else -1
        if at > 120:
            text = text[:100] + " … " + text[at : at + EVIDENCE_WIDTH - 100] + " …"
        else:
            text = text[:EVIDENCE_WIDTH] + " …"
    return Evidence(line=line.number, text=text)


def disagreement(per_worker: Mapping[str, str], noun: str) -> str:
    """Why workers (ranks) give no single mode: they disagree, or some captured while the
    others' capture is not in the log (yet)."""
    shown = ", ".join(f"{n}={m}" for n, m in per_worker.items())
    if len({m for m in per_worker.values() if m != "UNKNOWN"}) > 1:
        return f"{noun}s disagree: {shown}"
    return f"not every {noun}'s capture is in the log: {shown}"


def cap_append(items: list[Evidence], item: Evidence) -> None:
    """Append unless already there or the list is full."""
    if len(items) < MAX_EVIDENCE and all(e.line != item.line for e in items):
        items.append(item)


@dataclass
class Worker:
    """One process (vLLM) or rank (SGLang) and its capture lines."""

    name: str
    finished: list[Evidence] = field(default_factory=list)


class LogParser:
    """Base of the engine parsers: owns the facts being filled in.

    `kind` is the source kind of the line being fed (startup unless a handler says it read a
    command, a runtime line or a metric); the reader records it for the fields the line set.
    """

    engine = "unknown"

    def __init__(self, facts: LogFacts) -> None:
        self.facts = facts
        self.kind: SourceKind = "startup"
        self.log_lines = 0  # candidate lines read that were not a launch command
        self.platforms = PlatformReader()
        facts.engine = self.engine  # type: ignore[assignment]

    def decide_platform(self) -> str:
        """Set the run's platform from the signs seen (and name its line); return it."""
        platform, evidence = self.platforms.decide()
        self.facts.platform = platform  # type: ignore[assignment]
        if evidence is not None:
            self.facts.sources["platform"] = FieldSource(
                kind="startup", line=evidence.line, text=evidence.text
            )
        return platform

    def command(self, line: Line, *, launch: bool = False) -> bool:
        """Read a launch command on this line (`launch`: known to be one); whether it was."""
        return False

    def read_command(self, command: str) -> None:
        """The launch command a bundle recorded beside the log (run.json), read as line 0."""
        self.command(Line(number=0, text=command, raw=command), launch=True)
        for e in self.facts.spec_evidence:
            if e.line == 0:  # not a log line: say where it came from
                e.text = f"launch command (run.json): {command}"

    def feed(self, line: Line) -> None:
        """Read one candidate line."""
        raise NotImplementedError

    def finish(self) -> LogFacts:
        """Draw the conclusions once every line was fed."""
        raise NotImplementedError

    def warning(self, line: Line) -> None:
        """Count a warning line; keep the first ones."""
        self.facts.warnings_total += 1
        if len(self.facts.warnings) < MAX_WARNINGS:
            self.facts.warnings.append(ev(line))

    def fallback(self, line: Line, focus: str | None = None) -> None:
        """A silent switch the engine made (runner fallback, mode override)."""
        cap_append(self.facts.fallbacks, ev(line, focus))


@dataclass
class AcceptanceTally:
    """Sums over every acceptance line; the facts keep only the first MAX_SAMPLES."""

    samples: int = 0
    weight: float = 0.0
    length_sum: float = 0.0
    lengths: int = 0
    lo: float | None = None
    hi: float | None = None
    pos_sum: list[float] = field(default_factory=list)
    pos_weight: list[float] = field(default_factory=list)
    accepted: int = 0
    drafted: int = 0
    rate_sum: float = 0.0
    rates: int = 0
    batches: int = 0
    no_graph: int = 0
    first_no_graph: Evidence | None = None

    def count(
        self,
        facts: LogFacts,
        line: int,
        *,
        mean: float | None,
        per_position: list[float],
        accepted: int,
        drafted: int,
    ) -> None:
        """Count a line from its numbers; a sample model is built only while samples are kept."""
        if len(facts.acceptance) < MAX_SAMPLES:
            sample = AcceptanceSample(
                line=line,
                mean_acceptance_length=mean,
                per_position=per_position,
                accept_rate=accepted / drafted if drafted else None,
                accepted=accepted,
                drafted=drafted,
            )
            self.add(sample, facts)
            return
        self.samples += 1
        self._numbers(mean, per_position, float(drafted) if drafted else 1.0)
        self.accepted += accepted
        self.drafted += drafted

    def add(self, sample: AcceptanceSample, facts: LogFacts, line: Line | None = None) -> None:
        """Count one line."""
        self.samples += 1
        if len(facts.acceptance) < MAX_SAMPLES:
            facts.acceptance.append(sample)
        w = float(sample.drafted) if sample.drafted else 1.0
        self._numbers(sample.mean_acceptance_length, sample.per_position, w)
        self._rest(sample, line)

    def _numbers(self, length: float | None, per_position: list[float], w: float) -> None:
        if length is not None and length == length:  # nan: no drafts in the interval
            self.length_sum += w * length
            self.weight += w
            self.lengths += 1
            self.lo = length if self.lo is None else min(self.lo, length)
            self.hi = length if self.hi is None else max(self.hi, length)
        for i, p in enumerate(per_position):
            if p != p:
                continue
            while len(self.pos_sum) <= i:
                self.pos_sum.append(0.0)
                self.pos_weight.append(0.0)
            self.pos_sum[i] += w * p
            self.pos_weight[i] += w

    def _rest(self, sample: AcceptanceSample, line: Line | None) -> None:
        if sample.accepted is not None and sample.drafted is not None:
            self.accepted += sample.accepted
            self.drafted += sample.drafted
        elif sample.accept_rate is not None:
            self.rate_sum += sample.accept_rate
            self.rates += 1
        if sample.cuda_graph is not None:
            self.batches += 1
            if not sample.cuda_graph:
                self.no_graph += 1
                if self.first_no_graph is None and line is not None:
                    self.first_no_graph = ev(line)

    def finish(self, facts: LogFacts) -> None:
        """Store the summary (None when there was no acceptance line)."""
        if not self.samples:
            return
        rate = self.accepted / self.drafted if self.drafted else None
        if rate is None and self.rates:
            rate = self.rate_sum / self.rates
        facts.acceptance_summary = AcceptanceSummary(
            samples=self.samples,
            mean_acceptance_length=round(self.length_sum / self.weight, 4)
            if self.lengths
            else None,
            min_acceptance_length=self.lo,
            max_acceptance_length=self.hi,
            per_position=[
                round(s / w, 4) for s, w in zip(self.pos_sum, self.pos_weight, strict=True)
            ],
            accept_rate=round(rate, 4) if rate is not None else None,
            accepted_tokens=self.accepted if self.drafted else None,
            drafted_tokens=self.drafted if self.drafted else None,
            decode_batches=self.batches,
            cuda_graph_false=self.no_graph,
            first_cuda_graph_false=self.first_no_graph,
        )
