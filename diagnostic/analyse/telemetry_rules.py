"""The causes of restart noise that telemetry can show (checklists/telemetry/causes.yaml),
loaded and applied to one run's window of one source."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from diagnostic.common.resources import checklists_dir
from diagnostic.errors import TelemetryError
from diagnostic.schema.telemetry import TelemetryWindow

__all__ = ["Match", "Rule", "apply_rules", "load_rules"]

RULES_FORMAT = "diagnose-telemetry-rules/1"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class When(_Model):
    """A rule's condition (the rule file's header says what each key means)."""

    variable: str | None = Field(None, description="Column the condition reads")
    stat: Literal["median", "worst"] = Field("median", description="Which figure of it")
    at_least: float | None = Field(None, description="Matches at or above")
    at_most: float | None = Field(None, description="Matches at or below")
    below_others: float | None = Field(
        None, gt=0, description="Matches below this ratio of the other restarts' median"
    )
    above_others: float | None = Field(
        None, gt=0, description="Matches above this ratio of the other restarts' median"
    )
    reasons: list[str] = Field(default_factory=list, description="Clocks-event reason names")
    share_at_least: float | None = Field(None, ge=0, le=1, description="Share of GPU samples")

    @model_validator(mode="after")
    def _one_test(self) -> When:
        tests = [self.at_least, self.at_most, self.below_others, self.above_others]
        if self.reasons:
            if self.share_at_least is None or self.variable is not None:
                raise ValueError("`reasons` takes `share_at_least` and no `variable`")
        elif self.variable is None or sum(t is not None for t in tests) != 1:
            raise ValueError("give `variable` and exactly one of at_least, at_most, *_others")
        return self


class Rule(_Model):
    """One cause: its condition, evidence template and advice."""

    id: str = Field(description="Rule id")
    title: str = Field(description="What it is")
    when: When = Field(description="Condition")
    evidence: str = Field(description="Evidence template")
    advice: str = Field(description="What to do")


class RuleFile(_Model):
    """The rule file."""

    format: Literal["diagnose-telemetry-rules/1"] = Field(description="File format")
    rules: list[Rule] = Field(min_length=1, description="The causes")


class Match(_Model):
    """A rule that held on a window, with its evidence filled in."""

    rule: Rule
    evidence: str


def load_rules(path: Path | None = None) -> list[Rule]:
    """The rules of `path` (default: checklists/telemetry/causes.yaml); errors name the file."""
    return list(_load(path or checklists_dir() / "telemetry" / "causes.yaml"))


@cache
def _load(path: Path) -> tuple[Rule, ...]:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise TelemetryError(f"{path}: cannot read the telemetry rules ({exc})") from exc
    try:
        found = RuleFile.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise TelemetryError(f"{path}: {where}: {first['msg']} ({RULES_FORMAT})") from None
    for rule in found.rules:
        try:
            rule.evidence.format(value=0.0, others=0.0, share=0.0, top_other="")
        except (KeyError, IndexError, ValueError) as exc:
            raise TelemetryError(f"{path}: rule {rule.id}: evidence template: {exc}") from None
    return tuple(found.rules)


def apply_rules(
    rules: Sequence[Rule], window: TelemetryWindow, others: Sequence[TelemetryWindow]
) -> list[Match]:
    """The rules that hold on `window`; `others` are the same source and window in the other
    restarts of the same arm (for *_others conditions)."""
    out = []
    for rule in rules:
        evidence = _holds(rule, window, others)
        if evidence is not None:
            out.append(Match(rule=rule, evidence=evidence))
    return out


def _holds(rule: Rule, window: TelemetryWindow, others: Sequence[TelemetryWindow]) -> str | None:
    w = rule.when
    fill: dict[str, Any] = {"value": 0.0, "others": 0.0, "share": 0.0}
    fill["top_other"] = window.top_other or "none"
    if w.reasons:
        if not window.reasons and not _has(window, "clocks_event_reasons"):
            return None
        share = max((window.reasons.get(r, 0.0) for r in w.reasons), default=0.0)
        assert w.share_at_least is not None
        return (
            rule.evidence.format(**{**fill, "share": share}) if share >= w.share_at_least else None
        )
    assert w.variable is not None
    value = _figure(window, w.variable, w.stat)
    if value is None:
        return None
    fill["value"] = value
    if w.at_least is not None or w.at_most is not None:
        held = (w.at_least is not None and value >= w.at_least) or (
            w.at_most is not None and value <= w.at_most
        )
        return rule.evidence.format(**fill) if held else None
    theirs = [f for o in others if (f := _figure(o, w.variable, w.stat)) is not None]
    if not theirs:
        return None
    reference = statistics.median(theirs)
    fill["others"] = reference
    if not reference:
        return None
    ratio = value / reference
    held = (w.below_others is not None and ratio < w.below_others) or (
        w.above_others is not None and ratio > w.above_others
    )
    return rule.evidence.format(**fill) if held else None


def _has(window: TelemetryWindow, variable: str) -> bool:
    return any(s.variable == variable for s in window.stats)


def _figure(window: TelemetryWindow, variable: str, stat: str) -> float | None:
    for s in window.stats:
        if s.variable == variable:
            return s.median if stat == "median" else s.worst
    return None
