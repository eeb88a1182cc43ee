"""Rules as data (checklists/rules/*.yaml) applied to the facts of one or several logs.

A rule fires when its `when` conditions hold on the run's facts, its `match` pattern found
lines, and its named `check` (code, for what a condition cannot say) returned a result; it
needs at least one of the three. A pure pattern rule is a YAML file and no code.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from diagnostic.common.resources import checklists_dir
from diagnostic.engines import LinePattern
from diagnostic.errors import RuleError
from diagnostic.logcheck.checks import RULE_CHECKS
from diagnostic.logcheck.pairs import pair_runs
from diagnostic.logcheck.remedies import Remedy
from diagnostic.logcheck.render import lookup, render
from diagnostic.schema.logfacts import (
    EARLIER_ATTEMPT,
    MAX_EVIDENCE,
    Comparison,
    Evidence,
    Finding,
    LogFacts,
    RunSources,
    Severity,
)

__all__ = [
    "RULE_CHECKS",
    "Rule",
    "apply_rules",
    "conditions_hold",
    "finding_values",
    "line_patterns",
    "load_rules",
    "lookup",
    "render",
]

_OPS = {"eq", "ne", "in", "not_in", "lt", "le", "gt", "ge", "regex", "exists"}


class Match(BaseModel):
    """Lines a rule looks for: one of `contains` (literal, the scan's prefilter), then `regex`."""

    model_config = ConfigDict(extra="forbid")
    contains: list[str] = Field(description="Literals; a line must contain one of them")
    regex: str | None = Field(
        None, description="Regex the line must also match (named groups usable)"
    )

    @field_validator("contains", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value

    @field_validator("contains")
    @classmethod
    def _literals(cls, value: list[str]) -> list[str]:
        if not value or any(not c or "\n" in c for c in value):
            raise ValueError("give at least one non-empty, single-line literal")
        return value

    @field_validator("regex")
    @classmethod
    def _compiles(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value)
            except re.error as exc:
                raise ValueError(f"invalid regex: {exc}") from None
        return value


class Rule(BaseModel):
    """One rule file entry."""

    model_config = ConfigDict(extra="forbid")
    id: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$", description="Stable id, kebab-case")
    title: str = Field(description="One line naming the problem")
    severity: Severity = Field(description="info, warning or error (error -> exit code 1)")
    scope: Literal["run", "cross-run", "sources"] = Field(
        "run", description="One log, several together, or the log sources of one bundle run"
    )
    engines: list[str] = Field(
        default_factory=list, description="Engines it applies to; all if empty"
    )
    when: dict[str, Any] = Field(default_factory=dict, description="Conditions on facts, all true")
    when_any: list[dict[str, Any]] = Field(
        default_factory=list, description="Condition sets, at least one wholly true"
    )
    match: Match | None = Field(None, description="Lines to look for in the log")
    check: str | None = Field(None, description="Named check in diagnostic/checks.py")
    params: dict[str, Any] = Field(default_factory=dict, description="Parameters of the check")
    message: str = Field(description="What was found; {dotted.fact} and regex groups fill in")
    advice: str = Field(description="What to do")
    reference: str | None = Field(None, description="Where to read more")
    evidence: list[Literal["capture", "spec", "fallbacks", "acceptance", "warnings"]] = Field(
        default_factory=list, description="Fact evidence to attach besides matched lines"
    )
    remedies: list[Remedy] = Field(
        default_factory=list, description="The arms that test its fix (`diagnose plan`)"
    )

    @model_validator(mode="after")
    def _has_a_test(self) -> Rule:
        if not (self.when or self.when_any or self.match or self.check):
            raise ValueError("a rule needs `when`, `when_any`, `match` or `check`")
        if self.check is not None and self.check not in RULE_CHECKS:
            raise ValueError(
                f"unknown check {self.check!r}; known: {', '.join(sorted(RULE_CHECKS))}"
            )
        for conditions in [self.when, *self.when_any, *(r.when for r in self.remedies)]:
            for key, cond in conditions.items():
                if isinstance(cond, dict) and not set(cond) <= _OPS:
                    raise ValueError(f"{key}: unknown operator(s) {sorted(set(cond) - _OPS)}")
        names = [r.name for r in self.remedies]
        if len(set(names)) != len(names):
            raise ValueError(f"remedies: a name used twice in {names}")
        return self


# -- loading ---------------------------------------------------------------------------------
def load_rules(folder: Path | None = None) -> list[Rule]:
    """Every rule of checklists/rules/*.yaml, validated; errors name the file and the field."""
    folder = folder or checklists_dir() / "rules"
    files = sorted(folder.glob("*.yaml")) if folder.is_dir() else []
    if not files:
        raise RuleError(f"{folder}: no rule files (*.yaml); reinstall diagnose or restore them")
    rules: list[Rule] = []
    for path in files:
        rules += _load_file(path)
    ids = [r.id for r in rules]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        raise RuleError(f"{folder}: rule ids used twice: {', '.join(dupes)}")
    return rules


def _load_file(path: Path) -> list[Rule]:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise RuleError(f"{path}: cannot read rules ({exc})") from None
    entries = data if isinstance(data, list) else [data]
    rules = []
    for n, entry in enumerate(entries, start=1):
        try:
            rules.append(Rule.model_validate(entry))
        except ValidationError as exc:
            err = exc.errors()[0]
            loc = ".".join(str(p) for p in err["loc"]) or "(rule)"
            raise RuleError(f"{path}: rule {n}: {loc}: {err['msg']}") from None
    return rules


def line_patterns(rules: Iterable[Rule]) -> list[LinePattern]:
    """The lines the scan must collect for the pattern rules."""
    return [
        LinePattern(
            key=r.id,
            contains=tuple(r.match.contains),
            regex=re.compile(r.match.regex) if r.match.regex else None,
            engines=tuple(r.engines),
        )
        for r in rules
        if r.match is not None
    ]


# -- conditions ----------------------------------------------------------------------------
def _holds(value: Any, cond: Any) -> bool:
    if isinstance(cond, list):
        return value in cond
    if not isinstance(cond, dict):
        return bool(value == cond)
    return all(_op(value, op, arg) for op, arg in cond.items())


def _op(value: Any, op: str, arg: Any) -> bool:
    if op == "exists":
        return (value is not None) == bool(arg)
    if op in ("eq", "ne"):
        return (value == arg) == (op == "eq")
    if op in ("in", "not_in"):
        return (value in arg) == (op == "in")
    if value is None:
        return False
    if op == "regex":
        return re.search(arg, str(value)) is not None
    try:
        return {"lt": value < arg, "le": value <= arg, "gt": value > arg, "ge": value >= arg}[op]
    except TypeError:
        return False


def conditions_hold(
    when: dict[str, Any], facts: Any, when_any: Iterable[dict[str, Any]] = ()
) -> bool:
    """Whether every condition of `when` holds on the facts, and one set of `when_any`."""
    if not all(_holds(lookup(facts, k), c) for k, c in when.items()):
        return False
    sets = list(when_any)
    return not sets or any(
        all(_holds(lookup(facts, k), c) for k, c in conds.items()) for conds in sets
    )


def _conditions_hold(rule: Rule, facts: LogFacts) -> bool:
    return conditions_hold(rule.when, facts, rule.when_any)


# -- applying -----------------------------------------------------------------------------
def apply_rules(
    rules: Iterable[Rule], runs: list[LogFacts], groups: Iterable[RunSources] = ()
) -> tuple[list[Finding], list[Comparison]]:
    """Findings of every rule on every run, on every run's log sources (`groups`), then the
    cross-run ones, and the spec/no-spec pairs."""
    rules = list(rules)
    findings: list[Finding] = []
    for facts in runs:
        # an earlier attempt's server never served the run: its configuration is not the one
        # measured, and a log that stops before capture is how a failed start looks
        if facts.engine == "unknown" or facts.source == EARLIER_ATTEMPT:
            continue
        for rule in rules:
            if rule.scope == "run" and (not rule.engines or facts.engine in rule.engines):
                finding = _apply(rule, facts)
                if finding is not None:
                    findings.append(finding)
    for group in groups:
        for rule in (r for r in rules if r.scope == "sources" and r.check is not None):
            finding = _apply_sources(rule, group, runs)
            if finding is not None:
                findings.append(finding)
    comparisons: list[Comparison] = []
    for rule in rules:
        if rule.scope == "cross-run" and rule.check == "spec_capture_differs":
            pairs = pair_runs(runs, rule.params)
            comparisons = comparisons or pairs
            findings += [_differs(rule, c, runs) for c in pairs if c.same is False]
    for rule in rules:
        if rule.scope == "cross-run" and rule.check == "runner_fallback":
            pairs = comparisons or pair_runs(runs, rule.params)
            findings += _runner_findings(rule, runs, pairs)
    return findings, comparisons


def _apply(rule: Rule, facts: LogFacts) -> Finding | None:
    if not _conditions_hold(rule, facts):
        return None
    extra = finding_values(rule, facts)
    if extra is None:
        return None
    evidence = list(facts.matches.get(rule.id, [])) if rule.match is not None else []
    for source in rule.evidence:
        evidence += _evidence(facts, source)
    return Finding(
        rule=rule.id,
        severity=rule.severity,
        title=rule.title,
        message=render(rule.message, facts, extra),
        evidence=_unique(evidence),
        advice=render(rule.advice, facts, extra),
        reference=rule.reference,
        run=facts.path,
    )


def _apply_sources(rule: Rule, group: RunSources, runs: list[LogFacts]) -> Finding | None:
    assert rule.check is not None
    result = RULE_CHECKS[rule.check](group, rule.params)
    if result is None:
        return None
    by_path = {r.path: r for r in runs}
    evidence = [  # each source's first capture lines, named: line numbers are per file
        Evidence(line=e.line, text=f"{s.source}: {e.text}")
        for s in group.sources
        for e in (by_path[s.path].capture.evidence + by_path[s.path].spec_evidence)[:2]
    ]
    paths = [s.path for s in group.sources]
    return Finding(
        rule=rule.id,
        severity=rule.severity,
        title=rule.title,
        message=render(rule.message, group, result),
        evidence=evidence[:MAX_EVIDENCE],
        advice=render(rule.advice, group, result),
        reference=rule.reference,
        run=paths[0],
        runs=paths,
    )


def finding_values(rule: Rule, facts: LogFacts) -> dict[str, Any] | None:
    """The values a run-scope rule's message fills in beside the facts (its regex groups, its
    check's result); None when its pattern found no line or its check nothing."""
    extra: dict[str, Any] = {}
    if rule.match is not None:
        hits = facts.matches.get(rule.id, [])
        if not hits:
            return None
        if rule.match.regex:
            m = re.search(rule.match.regex, hits[0].text)
            extra.update({k: v for k, v in (m.groupdict() if m else {}).items() if v is not None})
    if rule.check is not None and rule.scope == "run":
        result = RULE_CHECKS[rule.check](facts, rule.params)
        if result is None:
            return None
        extra.update(result)
    return extra


def _evidence(facts: LogFacts, source: str) -> list[Evidence]:
    if source == "capture":
        return facts.capture.evidence
    if source == "spec":
        return facts.spec_evidence
    if source == "fallbacks":
        return facts.fallbacks
    if source == "warnings":
        return facts.warnings[:5]
    summary = facts.acceptance_summary
    first = [summary.first_cuda_graph_false] if summary and summary.first_cuda_graph_false else []
    return first + [Evidence(line=s.line, text=_sample_text(s)) for s in facts.acceptance[:3]]


def _sample_text(sample: Any) -> str:
    parts = [f"mean acceptance length {sample.mean_acceptance_length}"]
    if sample.per_position:
        parts.append("per position " + ", ".join(f"{p:.2f}" for p in sample.per_position))
    if sample.cuda_graph is not None:
        parts.append(f"cuda graph: {sample.cuda_graph}")
    return "; ".join(parts)


def _unique(items: list[Evidence]) -> list[Evidence]:
    seen: dict[int, Evidence] = {}
    for e in items:
        seen.setdefault(e.line, e)
    return sorted(seen.values(), key=lambda e: e.line)[:MAX_EVIDENCE]


def _differs(rule: Rule, pair: Comparison, runs: list[LogFacts]) -> Finding:
    by_path = {r.path: r for r in runs}
    base, spec = by_path[pair.baseline], by_path[pair.spec]
    extra = {
        "baseline": pair.baseline_label or pair.baseline,
        "baseline_resolved": pair.baseline_resolved,
        "spec_run": pair.spec_label or pair.spec,
        "spec_resolved": pair.spec_resolved,
        "method": pair.spec_method,
        "matched_on": pair.matched_on,
    }
    return Finding(
        rule=rule.id,
        severity=rule.severity,
        title=rule.title,
        message=render(rule.message, spec, extra),
        evidence=_unique(spec.capture.evidence)[:8],
        advice=render(rule.advice, spec, extra),
        reference=rule.reference,
        run=spec.path,
        runs=[base.path, spec.path],
    )


def _runner_findings(rule: Rule, runs: list[LogFacts], pairs: list[Comparison]) -> list[Finding]:
    """Model-runner fallbacks where they make compared runs differ: a spec run on another
    runner than its paired baseline; without a pair, a spec run whose speculation alone made
    vLLM leave Model Runner V2 (its baseline would stay there). Runs on one runner (a CPU,
    whose every run falls back) or without speculation give nothing."""
    by_path = {r.path: r for r in runs}
    by_spec = {c.spec: c for c in pairs}
    found: list[Finding] = []
    for facts in runs:
        if facts.engine == "unknown" or (rule.engines and facts.engine not in rule.engines):
            continue
        pair = by_spec.get(facts.path)
        base = by_path.get(pair.baseline) if pair else None
        if base is not None and base.model_runner and facts.model_runner:
            if base.model_runner == facts.model_runner or facts.runner_fallback is None:
                continue
            label = base.label or base.path
            extra = {
                "compared": f"its baseline {label} ran Model Runner {base.model_runner}, so the "
                "comparison mixes speculation with a change of model runner"
            }
        else:
            if RULE_CHECKS[rule.check or ""](facts, rule.params) is None:
                continue
            extra = {
                "compared": "the same server without speculation stays on Model Runner V2, so a "
                "comparison with it mixes speculation with a change of model runner"
            }
        fallback = facts.runner_fallback
        assert fallback is not None
        extra["unsupported"] = ", ".join(fallback.unsupported)
        found.append(
            Finding(
                rule=rule.id,
                severity=rule.severity,
                title=rule.title,
                message=render(rule.message, facts, extra),
                evidence=[fallback.evidence],
                advice=render(rule.advice, facts, extra),
                reference=rule.reference,
                run=facts.path,
                runs=[base.path, facts.path] if base else [],
            )
        )
    return found
