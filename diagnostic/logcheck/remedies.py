"""Remedies as data: the arms that test a rule's fix (checklists/rules/*.yaml `remedies`).

A remedy is a set of flag edits on the launch command of the run the finding is on (flag
values, keys of a JSON flag, environment variables, the draft length k), measured with and
without speculation; or, where no flag fixes the cause, the words saying what would (`patch`).
Its `when` conditions read the run's facts like a rule's; `versions` bounds the engine
releases where its flags exist, and outside them the remedy says what to upgrade instead.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from diagnostic.logcheck.render import UNKNOWN_TEXT, render

__all__ = ["DraftLength", "Remedy", "Versions", "version_tuple"]

_VERSION = re.compile(r"(\d+(?:\.\d+)*)")


def version_tuple(text: str | None) -> tuple[int, ...] | None:
    """'0.26.0' -> (0, 26, 0); None when the text holds no dotted number."""
    m = _VERSION.search(text or "")
    return tuple(int(p) for p in m[1].split(".")) if m else None


class Versions(BaseModel):
    """Engine releases a remedy's flags exist in: `min` <= version < `below`."""

    model_config = ConfigDict(extra="forbid")
    min: str | None = Field(None, description="First release with the flags")
    below: str | None = Field(None, description="First release without them")
    otherwise: str = Field(description="What to do on a release outside the range, in words")

    def holds(self, version: str | None) -> bool | None:
        """Whether `version` is in the range; None when it is unknown."""
        have = version_tuple(version)
        if have is None:
            return None
        low, high = version_tuple(self.min), version_tuple(self.below)
        return (low is None or have >= low) and (high is None or have < high)


class DraftLength(BaseModel):
    """The draft length k edited to each value of a range: the flags that carry it (only
    those the command has are edited) and where the values come from."""

    model_config = ConfigDict(extra="forbid")
    flags: list[str] = Field(
        min_length=1, description="Flags carrying k (`--flag` or `--flag.json_key`)"
    )
    values: list[int] | None = Field(
        None, description="These k; default: the theory's predicted range, else the finding's"
    )


class Remedy(BaseModel):
    """One fix of a rule, as the arms that test it (or the words when no flag fixes it)."""

    model_config = ConfigDict(extra="forbid")
    name: str = Field(
        pattern=r"^[a-z0-9{][a-z0-9{}_-]*$",
        description="Arm-name suffix; {fact} and {k} fill in (lower case in the name)",
    )
    title: str = Field(description="What the arms test, in words; {fact} and {k} fill in")
    engines: list[str] = Field(default_factory=list, description="Engines it applies to")
    when: dict[str, Any] = Field(
        default_factory=dict, description="Conditions on the run's facts, all true"
    )
    versions: Versions | None = Field(None, description="Engine releases its flags exist in")
    set: dict[str, str | bool | None] = Field(
        default_factory=dict,
        description="Flags to set: `--flag: value` (true: bare flag; null: removed) or "
        "`--flag.key: value` for a key of the flag's JSON object",
    )
    env: dict[str, str] = Field(
        default_factory=dict, description="Environment set on the launch line, NAME=VALUE"
    )
    draft_length: DraftLength | None = Field(None, description="k values to measure")
    patch: str | None = Field(
        None, description="No flag fixes it: what would (an engine patch, another drafter)"
    )

    @model_validator(mode="after")
    def _does_something(self) -> Remedy:
        if not (self.set or self.env or self.draft_length or self.patch):
            raise ValueError("a remedy needs `set`, `env`, `draft_length` or `patch`")
        if self.patch and (self.set or self.env or self.draft_length):
            raise ValueError("a `patch` remedy says what no flag does: give no flags with it")
        return self

    def settings(self, facts: Any, values: dict[str, Any]) -> dict[str, str | bool | None]:
        """The flag edits, their templates filled from the finding's values and the facts;
        KeyError naming the field when one is unknown (the remedy cannot be written)."""
        out: dict[str, str | bool | None] = {}
        for flag, value in self.set.items():
            out[flag] = self.fill(value, facts, values) if isinstance(value, str) else value
        return out

    def fill(self, template: str, facts: Any, values: dict[str, Any]) -> str:
        """A template filled in; KeyError when a field is not known."""
        text = render(template, facts, values)
        if UNKNOWN_TEXT in text:
            raise KeyError(template)
        return text
