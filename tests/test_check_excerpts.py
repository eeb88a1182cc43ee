"""`diagnose check` on what clients paste: the labelled excerpts of tests/data/logs/excerpts
(the corpus) and tests/data/logs/pasted (cases written beside it for what it lacks).

Each `<kind>-<engine>-<name>.log` has a `.expected.json` (kind, engine, version, spec, capture,
evidence_source, findings). The score is per field over every excerpt: engine, version, spec
on/off, method, k and resolved capture; the goal is ≥ 95% overall, every field of every
complete start-up log right, and no finding beyond the labelled ones where none is labelled.
Run `python -m tests.test_check_excerpts` for the table by kind and field.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from diagnostic.common.resources import checklists_dir
from diagnostic.engines import parse_log
from diagnostic.logcheck.rules import apply_rules, line_patterns, load_rules
from diagnostic.schema.logfacts import LogFacts

LOGS = Path(__file__).parent / "data" / "logs"
FOLDERS = (LOGS / "excerpts", LOGS / "pasted")
FIELDS = ("engine", "version", "spec.enabled", "spec.method", "spec.k", "capture.resolved")
KINDS = {
    1: "no start-up banner",
    2: "runtime-only speculation",
    3: "pasted launch command",
    4: "cut-off text",
    5: "wrong-label traps",
    6: "Model Runner V2 FULL bar",
    7: "complete logs and no signal",
}
GOAL = 0.95
RULES = load_rules(checklists_dir() / "rules")
PATTERNS = line_patterns(RULES)


@dataclass
class Case:
    """One excerpt, what it should give and what the checker gave."""

    log: Path
    expected: dict[str, Any]
    facts: LogFacts
    findings: list[str] = field(default_factory=list)

    @property
    def kind(self) -> int:
        return int(self.expected["kind"])

    def got(self) -> dict[str, Any]:
        f = self.facts
        return {
            "engine": None if f.engine == "unknown" else f.engine,
            "version": f.version,
            "spec.enabled": f.spec.enabled,
            "spec.method": f.spec.method,
            "spec.k": f.spec.num_draft_tokens,
            "capture.resolved": f.capture.resolved,
        }

    def want(self) -> dict[str, Any]:
        e = self.expected
        return {
            "engine": e["engine"],
            "version": e["version"],
            "spec.enabled": e["spec"]["enabled"],
            "spec.method": e["spec"]["method"],
            "spec.k": e["spec"]["num_draft_tokens"],
            "capture.resolved": e["capture"]["resolved"],
        }

    def wrong(self) -> dict[str, tuple[Any, Any]]:
        got, want = self.got(), self.want()
        return {k: (got[k], want[k]) for k in FIELDS if got[k] != want[k]}


def load_cases() -> list[Case]:
    """Every labelled excerpt, read by the checker with the shipped rules."""
    cases = []
    for log in sorted(log for folder in FOLDERS for log in folder.glob("*.log")):
        expected = json.loads(log.with_name(log.stem + ".expected.json").read_text())
        facts = parse_log(log, patterns=PATTERNS)
        facts.path = str(log)
        findings, _ = apply_rules(RULES, [facts])
        cases.append(Case(log, expected, facts, sorted({f.rule for f in findings})))
    return cases


def table(cases: list[Case]) -> str:
    """Cases and per-field accuracy by kind, then overall."""
    rows = [f"{'kind':<34} {'cases':>5} " + " ".join(f"{f:>16}" for f in FIELDS) + "   all"]
    for kind in sorted({c.kind for c in cases}):
        mine = [c for c in cases if c.kind == kind]
        rows.append(_row(f"{kind} {KINDS.get(kind, '?')}", mine))
    rows.append(_row("all", cases))
    return "\n".join(rows)


def _row(label: str, cases: list[Case]) -> str:
    right = Counter(k for c in cases for k in FIELDS if k not in c.wrong())
    total = len(cases)
    cells = " ".join(f"{right[k] / total:>16.0%}" for k in FIELDS)
    overall = sum(right.values()) / (total * len(FIELDS))
    return f"{label:<34} {total:>5} {cells} {overall:>5.1%}"


def accuracy(cases: list[Case]) -> float:
    """Share of labelled fields right over every case."""
    return sum(len(FIELDS) - len(c.wrong()) for c in cases) / (len(cases) * len(FIELDS))


@pytest.fixture(scope="module")
def cases() -> list[Case]:
    found = load_cases()
    assert found, f"no excerpt in {FOLDERS}"
    return found


def test_every_kind_has_cases(cases: list[Case]) -> None:
    counts = Counter(c.kind for c in cases)
    print("\n" + table(cases))
    assert set(counts) == set(KINDS), counts


def test_fields_right_on_excerpts(cases: list[Case]) -> None:
    score = accuracy(cases)
    misses = {c.log.stem: c.wrong() for c in cases if c.wrong()}
    assert score >= GOAL, f"{score:.1%} of fields right; misses: {misses}"


def test_complete_logs_are_exact(cases: list[Case]) -> None:
    complete = [c for c in cases if c.kind == 7 and c.expected["engine"]]
    assert complete
    assert {c.log.stem: c.wrong() for c in complete if c.wrong()} == {}


def test_no_false_finding(cases: list[Case]) -> None:
    """A finding the label does not list is a false finding (a missed one is a miss)."""
    extra = {
        c.log.stem: sorted(set(c.findings) - set(c.expected["findings"]))
        for c in cases
        if set(c.findings) - set(c.expected["findings"])
    }
    assert extra == {}


def test_findings_match_labels(cases: list[Case]) -> None:
    missed = {
        c.log.stem: sorted(set(c.expected["findings"]) - set(c.findings))
        for c in cases
        if set(c.expected["findings"]) - set(c.findings)
    }
    assert missed == {}


def test_evidence_source_of_spec_and_capture(cases: list[Case]) -> None:
    """The source each label names (startup, command, runtime, metric) is the one recorded."""
    wrong = {}
    for c in cases:
        want = c.expected.get("evidence_source") or {}
        got = {
            "spec": _source(c.facts, "spec.enabled"),
            "capture": _source(c.facts, "capture.resolved"),
        }
        diff = {k: (got[k], v) for k, v in want.items() if got[k] != v}
        if diff:
            wrong[c.log.stem] = diff
    assert wrong == {}


def _source(facts: LogFacts, name: str) -> str | None:
    src = facts.sources.get(name)
    return src.kind if src else None


if __name__ == "__main__":
    all_cases = load_cases()
    print(table(all_cases))
    for c in all_cases:
        if c.wrong():
            print(f"{c.log.stem}: {c.wrong()}")
