"""Write a plan back as TOML (for --save-plan); tomllib reads, nothing in the stdlib writes."""

from __future__ import annotations

import json
import math
import re
from typing import Any

from diagnostic.plan.spec import ArmTable, PlanFile

__all__ = ["to_toml"]

_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


def to_toml(file: PlanFile, *, header: str | None = None) -> str:
    """The plan as a TOML document that `load_plan` reads back to the same PlanFile."""
    lines = [f"# {line}".rstrip() for line in (header or "").splitlines()]
    if lines:
        lines.append("")
    lines.append("[plan]")
    for key, value in file.plan.model_dump().items():
        if value is not None:
            lines.append(f"{_key(key)} = {_value(value)}")
    for arm in file.arms:
        lines.extend(["", "[[arms]]", *_arm_lines(arm)])
    return "\n".join(lines) + "\n"


def _arm_lines(arm: ArmTable) -> list[str]:
    out = []
    for key, value in arm.model_dump().items():
        if value is None or value == {}:
            continue
        out.append(f"{_key(key)} = {_value(value)}")
    return out


def _key(key: str) -> str:
    return key if _BARE_KEY.match(key) else _string(key)


def _string(text: str) -> str:
    # JSON's escapes (\" \\ \n \t \uXXXX) are all valid in a TOML basic string.
    return json.dumps(text, ensure_ascii=False)


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"TOML plan values must be finite, not {value}")
        return repr(value)
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, list):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    if isinstance(value, dict):
        inner = ", ".join(f"{_key(k)} = {_value(v)}" for k, v in value.items())
        return "{ " + inner + " }" if inner else "{}"
    raise TypeError(f"cannot write {type(value).__name__} to TOML")
