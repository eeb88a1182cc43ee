"""Reproducibility check: a stored analysis (analysis.json, or the one a report PDF embeds)
against the analysis recomputed from the bundle's raw files.

`compare` is pure: two analysis dicts (as analysis.json holds them) → the figures that differ,
each named by a path such as
`comparisons[arm=ngram-k3, baseline=base, workload=code, concurrency=1, kind=spec].ci_low`.
It walks the JSON generically, so a field added to the Analysis schema is compared without a
change here. Items of a list of objects are matched by their identity keys (LIST_KEYS), not by
position: a reordering is no difference, a missing or extra item is. `load_stored` reads the
stored side from a .json file or from a PDF's `analysis.json` attachment; the verify stage
(diagnostic/verify) recomputes the other side and calls both.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from diagnostic.errors import DiagnosticError

__all__ = [
    "ABSENT",
    "ANALYSIS_FILE",
    "IGNORED",
    "LIST_KEYS",
    "REL_TOL",
    "Difference",
    "Verification",
    "compare",
    "load_stored",
    "upgrade_analysis",
]

ANALYSIS_FILE = "analysis.json"  # in the bundle, and the name of the PDF's attachment
REL_TOL = 1e-9
# Top-level fields that legitimately differ between two runs of the same analysis.
IGNORED = ("created_at", "tool_version", "bundle")
# Identity keys of the items of each list of objects, by the list's field name. A list whose
# items lack these keys (or a list not named here) is compared by position.
LIST_KEYS: dict[str, tuple[str, ...]] = {
    "arms": ("id",),
    "workloads": ("workload", "concurrency"),  # an arm's breakdown; the sweep's per workload
    "restarts": ("restart",),
    "outliers": ("seq", "prompt_id"),
    "runs": ("restart",),
    "per_position": ("position",),
    "comparisons": ("arm", "baseline", "workload", "concurrency", "kind"),
    "before_after": ("arm", "baseline", "workload", "concurrency"),
    "points": ("k",),
    "extension": ("added",),
    "predicted": ("k",),
    "equivalence": ("arm", "baseline"),
    "prompts": ("workload", "prompt_id"),
    "items": ("arm", "restart", "reason"),
    "left_out_runs": ("run",),
    "windows": ("arm", "restart", "window", "source"),  # telemetry
    "stats": ("variable",),
    "causes": ("rule", "arm", "restart", "window"),
    "variance": ("workload", "variable"),
    "restart_outliers": ("arm", "restart", "workload"),
    "balance": ("arm", "reference"),  # covariate
    "slopes": ("workload", "concurrency"),
    "estimates": ("arm", "baseline", "workload", "concurrency", "kind"),
}


class _Absent:
    """The side of a difference that lacks the field or item."""

    def __repr__(self) -> str:
        return "ABSENT"


ABSENT: Any = _Absent()


@dataclass(frozen=True)
class Difference:
    """One stored figure (or item) that differs from the recomputed one."""

    path: str
    stored: Any
    recomputed: Any
    what: str = "analysis"  # what was compared: the analysis, check's findings

    def __str__(self) -> str:
        if self.recomputed is ABSENT:
            return f"{self.path}: stored {_show(self.stored)}, not in the recomputed {self.what}"
        if self.stored is ABSENT:
            return (
                f"{self.path}: not in the stored {self.what}, recomputed {_show(self.recomputed)}"
            )
        return f"{self.path}: stored {_show(self.stored)}, recomputed {_show(self.recomputed)}"


@dataclass
class Verification:
    """The outcome of comparing a stored analysis with the recomputed one."""

    compared: int = 0  # leaf values (numbers, strings, booleans, nulls) compared
    differences: list[Difference] = field(default_factory=list)
    stored_version: str | None = None  # tool_version of each side (ignored by the comparison)
    recomputed_version: str | None = None

    @property
    def ok(self) -> bool:
        """True when every stored figure equals the recomputed one."""
        return not self.differences


def _show(value: Any) -> str:
    if isinstance(value, dict):
        return "{…}" if value else "{}"
    if isinstance(value, list):
        return f"[… {len(value)} items]" if value else "[]"
    text = json.dumps(value, ensure_ascii=False)  # floats as repr: every digit stored
    return text if len(text) <= 80 else text[:77] + "…"


def _key_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def _equal(a: Any, b: Any, rel_tol: float) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return math.isclose(a, b, rel_tol=rel_tol, abs_tol=0.0)
    return type(a) is type(b) and a == b


def _keyed(
    name: str, items: list[Any], list_keys: Mapping[str, tuple[str, ...]]
) -> dict[str, Any] | None:
    """Items of list `name` by their identity path segment; None when they have no keys."""
    keys = list_keys.get(name)
    if not keys or not all(isinstance(i, dict) and all(k in i for k in keys) for i in items):
        return None
    out: dict[str, Any] = {}
    seen: dict[str, int] = {}
    for item in items:
        label = ", ".join(f"{k}={_key_text(item[k])}" for k in keys)
        seen[label] = seen.get(label, 0) + 1
        out[label if seen[label] == 1 else f"{label}, #{seen[label]}"] = item
    return out


def _leaves(value: Any) -> int:
    if isinstance(value, dict):
        return sum(_leaves(v) for v in value.values())
    if isinstance(value, list):
        return sum(_leaves(v) for v in value)
    return 1


class _Walk:
    def __init__(self, rel_tol: float, list_keys: Mapping[str, tuple[str, ...]], what: str) -> None:
        self.rel_tol = rel_tol
        self.list_keys = list_keys
        self.what = what
        self.result = Verification()

    def differ(self, path: str, stored: Any, recomputed: Any) -> None:
        self.result.differences.append(Difference(path, stored, recomputed, self.what))

    def value(self, path: str, name: str, a: Any, b: Any) -> None:
        if isinstance(a, dict) and isinstance(b, dict):
            self.mapping(path, a, b)
        elif isinstance(a, list) and isinstance(b, list):
            self.sequence(path, name, a, b)
        else:
            self.result.compared += _leaves(a)
            if (
                isinstance(a, dict | list)
                or isinstance(b, dict | list)
                or not _equal(a, b, self.rel_tol)
            ):
                self.differ(path, a, b)

    def mapping(self, path: str, a: Mapping[str, Any], b: Mapping[str, Any]) -> None:
        for name in dict.fromkeys([*a, *b]):
            sub = f"{path}.{name}" if path else name
            if name not in b:
                self.result.compared += _leaves(a[name])
                self.differ(sub, a[name], ABSENT)
            elif name not in a:
                self.differ(sub, ABSENT, b[name])
            else:
                self.value(sub, name, a[name], b[name])

    def sequence(self, path: str, name: str, a: list[Any], b: list[Any]) -> None:
        ka, kb = _keyed(name, a, self.list_keys), _keyed(name, b, self.list_keys)
        pairs: Iterator[tuple[str, Any, Any]]
        if ka is not None and kb is not None:
            labels = dict.fromkeys([*ka, *kb])
            pairs = ((label, ka.get(label, ABSENT), kb.get(label, ABSENT)) for label in labels)
        else:
            n = max(len(a), len(b))
            pairs = (
                (str(i), a[i] if i < len(a) else ABSENT, b[i] if i < len(b) else ABSENT)
                for i in range(n)
            )
        for label, x, y in pairs:
            sub = f"{path}[{label}]"
            if y is ABSENT:
                self.result.compared += _leaves(x)
                self.differ(sub, x, ABSENT)
            elif x is ABSENT:
                self.differ(sub, ABSENT, y)
            else:
                self.value(sub, name, x, y)


def compare(
    stored: Mapping[str, Any],
    recomputed: Mapping[str, Any],
    *,
    rel_tol: float = REL_TOL,
    ignore: tuple[str, ...] = IGNORED,
    list_keys: Mapping[str, tuple[str, ...]] = LIST_KEYS,
    what: str = "analysis",
) -> Verification:
    """Every figure of `stored` against `recomputed` (both analysis.json dicts, or two files of
    another kind with their own `list_keys`).

    Numbers are equal within `rel_tol` (relative, no absolute floor; integers exactly),
    strings, booleans and nulls exactly; the top-level fields in `ignore` are skipped."""
    walk = _Walk(rel_tol, list_keys, what)
    walk.mapping(
        "",
        {k: v for k, v in stored.items() if k not in ignore},
        {k: v for k, v in recomputed.items() if k not in ignore},
    )
    result = walk.result
    version_a, version_b = stored.get("tool_version"), recomputed.get("tool_version")
    result.stored_version = version_a if isinstance(version_a, str) else None
    result.recomputed_version = version_b if isinstance(version_b, str) else None
    return result


# -- reading the stored side ------------------------------------------
def _pdf_attachment(path: Path, name: str) -> bytes:
    from pypdf import PdfReader  # imported here: only a PDF needs it
    from pypdf.errors import PyPdfError

    try:
        found = PdfReader(path).attachments.get(name, [])
    except (PyPdfError, ValueError, KeyError, TypeError) as exc:
        raise DiagnosticError(f"{path}: not a readable PDF ({exc})") from None
    if not found:
        raise DiagnosticError(
            f"{path}: the PDF embeds no {name} (rendered before reports carried their "
            f"analysis?); verify the bundle's {name} instead, or render the report again"
        )
    if len(found) > 1:
        raise DiagnosticError(f"{path}: the PDF embeds {len(found)} files named {name}")
    return found[0]


def load_stored(path: Path) -> dict[str, Any]:
    """The stored analysis: a JSON file, or the `analysis.json` a report PDF embeds."""
    path = Path(path)
    try:
        head = path.read_bytes()
    except OSError as exc:
        raise DiagnosticError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    data = _pdf_attachment(path, ANALYSIS_FILE) if head.startswith(b"%PDF") else head
    try:
        stored = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        where = f"{path} (its embedded {ANALYSIS_FILE})" if data is not head else str(path)
        raise DiagnosticError(
            f"{where}: not JSON ({exc}); pass an analysis.json or a report PDF"
        ) from None
    if not isinstance(stored, dict) or "schema_version" not in stored:
        raise DiagnosticError(f"{path}: not an analysis (no schema_version); pass analysis.json")
    return upgrade_analysis(stored)


def upgrade_analysis(stored: dict[str, Any]) -> dict[str, Any]:
    """An older analysis.json as the current version, in memory: v4 → v5 maps nothing (v5
    adds `covariate`, absent where the runs have no covariate, as every v4 bundle's have
    not), so a report made before it verifies against the analysis recomputed now."""
    if stored.get("schema_version") == 4:
        return {**stored, "schema_version": 5}
    return stored
