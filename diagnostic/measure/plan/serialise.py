"""Write a plan back as TOML (for --save-plan) with tomlkit; tomllib reads it back."""

from __future__ import annotations

import math
import re
from typing import Any

import tomlkit
from tomlkit.items import InlineTable, Table

from diagnostic.measure.plan.spec import PlanFile

__all__ = ["to_toml"]

# TOML comments may hold no control character but tab: shown escaped instead.
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")


def to_toml(
    file: PlanFile, *, header: str | None = None, notes: dict[int, str] | None = None
) -> str:
    """The plan as a TOML document that `load_plan` reads back to the same PlanFile; `notes`
    are comments at the head of the arms they index (why the arm is there)."""
    doc = tomlkit.document()
    for line in (header or "").splitlines():
        doc.add(tomlkit.comment(_comment(line)))
    if header:
        doc.add(tomlkit.nl())
    doc.add("plan", _table(file.plan.model_dump()))
    if file.engagement.model_dump(exclude_none=True):
        doc.add("engagement", _table(file.engagement.model_dump()))
    arms = tomlkit.aot()
    for index, arm in enumerate(file.arms):
        table = tomlkit.table()
        for line in (notes or {}).get(index, "").splitlines():
            table.add(tomlkit.comment(_comment(line)))
        for key, value in _table({k: v for k, v in arm.model_dump().items() if v != {}}).items():
            table.add(key, value)
        arms.append(table)
    if file.arms:
        doc.add("arms", arms)
    return tomlkit.dumps(doc)


def _comment(line: str) -> str:
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", line)


def _table(values: dict[str, Any]) -> Table:
    table = tomlkit.table()
    for key, value in values.items():
        if value is not None:
            table.add(key, _value(value))
    return table


def _value(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"TOML plan values must be finite, not {value}")
    if isinstance(value, dict):
        inline: InlineTable = tomlkit.inline_table()
        inline.update({k: _value(v) for k, v in value.items()})
        return inline
    return value
