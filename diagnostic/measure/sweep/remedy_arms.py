"""The arms that test a bundle's findings: each rule's remedies (checklists/rules/*.yaml)
applied to the launch command of the arm the finding is on, with and without speculation."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from diagnostic.engines.command import SPEC_FLAG, EditError, edit_command, flag_value
from diagnostic.logcheck.remedies import Remedy
from diagnostic.logcheck.rules import Rule, conditions_hold, finding_values
from diagnostic.schema.analysis import Analysis
from diagnostic.schema.logfacts import LogFacts

__all__ = ["Candidate", "Found", "candidates", "template"]


@dataclass
class Candidate:
    """One arm a remedy proposes: its launch template and what it tests."""

    name: str
    launch: str
    env: dict[str, str]
    speculative: bool
    rule: str
    severity: str
    tests: str  # the comment above the arm: which finding, which fix


@dataclass
class Found:
    """What the remedies of one finding give: arms, and notes where no arm can test the fix."""

    arms: list[Candidate] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def template(command: str, *, speculation: bool = True, **edits: Any) -> str:
    """A recorded launch command as a plan template: `--port` as {port}, other braces literal."""
    return edit_command(command, {}, speculation=speculation, port_placeholder=True, **edits)


def candidates(
    rule: Rule,
    facts: LogFacts,
    *,
    arm: str,
    launch: str,
    env: dict[str, str],
    analysis: Analysis | None,
) -> Found:
    """The remedies of `rule` for its finding on `arm` (facts: one of its runs), applied to
    the arm's recorded `launch`: a pair of arms (with, without speculation) per remedy and k."""
    values = finding_values(rule, facts) or {}
    found = Found()
    for remedy in rule.remedies:
        if remedy.engines and facts.engine not in remedy.engines:
            continue
        if not conditions_hold(remedy.when, facts):
            continue
        where = f"{rule.id} on {arm}"
        if remedy.patch:
            found.notes.append(f"{where}: {remedy.patch}")
            continue
        if remedy.versions is not None and remedy.versions.holds(facts.version) is False:
            found.notes.append(
                f"{where} ({facts.engine} {facts.version}): {remedy.versions.otherwise}"
            )
            continue
        ks = _ks(remedy, values, analysis, launch) if remedy.draft_length else [None]
        if not ks:
            found.notes.append(f"{where}: {remedy.title} — no draft-length flag in the command")
            continue
        for k in ks:
            try:
                found.arms += _pair(rule, remedy, facts, values, k, launch, env, where)
            except (KeyError, EditError) as exc:
                found.notes.append(f"{where}: {remedy.name} not written ({exc})")
    return found


def _pair(
    rule: Rule,
    remedy: Remedy,
    facts: LogFacts,
    values: dict[str, Any],
    k: int | None,
    launch: str,
    env: dict[str, str],
    where: str,
) -> list[Candidate]:
    filled = {**values, **({"k": k} if k is not None else {})}
    settings = remedy.settings(facts, filled)
    if k is not None and remedy.draft_length is not None:
        settings.update({f: str(k) for f in remedy.draft_length.flags if _has(launch, f)})
    name = remedy.fill(remedy.name, facts, filled).lower()
    title = remedy.fill(remedy.title, facts, filled)
    both = []
    for speculative in (True, False):
        edits = settings if speculative else _no_spec(settings)
        text = edit_command(
            launch, edits, speculation=speculative, env=remedy.env, port_placeholder=True
        )
        role = "with speculation" if speculative else "its matched baseline, no speculation"
        both.append(
            Candidate(
                name=f"{name}-{'spec' if speculative else 'base'}",
                launch=text,
                env=dict(env),
                speculative=speculative,
                rule=rule.id,
                severity=rule.severity,
                tests=f"Tests {where} ({rule.title}): {title}; {role}.",
            )
        )
    return both


def _no_spec(settings: dict[str, str | bool | None]) -> dict[str, str | bool | None]:
    """The edits that apply without speculation: none of a speculation flag (k, algorithm)."""
    return {f: v for f, v in settings.items() if not SPEC_FLAG.match(f.partition(".")[0])}


def _has(launch: str, flag: str) -> bool:
    """Whether the command carries `flag` (`--flag.key`: the key in the flag's JSON)."""
    flag, _, key = flag.partition(".")
    value = flag_value(launch, flag)
    return value is not None and (not key or (isinstance(value, str) and f'"{key}"' in value))


def _ks(
    remedy: Remedy, values: dict[str, Any], analysis: Analysis | None, launch: str
) -> list[int]:
    """The k values to measure: the remedy's own, else the theory's predicted range of best k
    (every workload's), else from the finding's suggestion up to below the k it ran with."""
    dl = remedy.draft_length
    assert dl is not None
    if not any(_has(launch, f) for f in dl.flags):
        return []
    if dl.values:
        return sorted(set(dl.values))
    ks: set[int] = set()
    for sw in analysis.sweep.workloads if analysis and analysis.sweep else []:
        t = sw.theory
        if t is not None and t.best_k_range and not t.extrapolated:
            ks.update(range(max(1, t.best_k_range[0]), t.best_k_range[1] + 1))
    ran, suggested = values.get("k"), values.get("suggested_k")
    if not ks and isinstance(suggested, int) and isinstance(ran, int):
        ks.update(range(suggested, ran))
    return sorted(k for k in ks if k != ran)
