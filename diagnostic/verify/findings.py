"""check's findings recomputed from the bundle's logs, against the bundle's findings.json."""

from __future__ import annotations

import json
import re
import typing
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from diagnostic.analyse.verify import ABSENT, Difference, compare
from diagnostic.bundle.store import Bundle
from diagnostic.errors import DiagnosticError
from diagnostic.logcheck.stage import FINDINGS_FILE, check_paths
from diagnostic.schema.bundle import SCHEMA_VERSION
from diagnostic.schema.logfacts import CheckReport
from diagnostic.verify.outcome import Check

__all__ = ["FINDING_KEYS", "check_findings", "recompute_findings"]

# Items of findings.json's lists by what identifies them (analyse.verify.compare's list_keys).
FINDING_KEYS: dict[str, tuple[str, ...]] = {
    "runs": ("path",),
    "findings": ("rule", "run"),
    "comparisons": ("baseline", "spec"),
    "log_sources": ("run_id",),
}
_BUNDLE = "BUNDLE"
_PREFIX = re.compile(r"^(?:(.*)/)?runs/[^/]+/")  # the bundle's path before runs/<run>/…


def recompute_findings(bundle: Bundle) -> CheckReport | None:
    """check's report of the bundle's logs, written nowhere; None when no log can be read."""
    if not any(bundle.log_sources(r) for r in bundle.runs()):
        return None
    try:
        return check_paths([bundle.path], write=False)
    except DiagnosticError:
        return None


def _relative(data: Any, root: str) -> Any:
    """findings.json with the bundle's path (as check was given it) written BUNDLE."""
    if not root:
        return data
    text = json.dumps(data, ensure_ascii=False).replace(json.dumps(root)[1:-1] + "/", f"{_BUNDLE}/")
    return json.loads(text)


def _root_of(data: Any) -> str:
    """The bundle path a findings.json names its logs by (samples/x, /tmp/b, …)."""
    for run in data.get("runs", []) if isinstance(data, dict) else []:
        found = _PREFIX.match(str(run.get("path", "")))
        if found:
            return found[1] or ""
    return ""


def _field_names(model: type[BaseModel]) -> set[str]:
    """Every field name of a model and of the models it holds."""
    names: set[str] = set()
    todo, seen = [model], set()
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        for name, info in current.model_fields.items():
            names.add(name)
            todo += [t for t in _models(info.annotation) if t not in seen]
    return names


def _models(tp: Any) -> list[type[BaseModel]]:
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return [tp]
    return [m for arg in typing.get_args(tp) for m in _models(arg)]


def _new_field(difference: Difference, fields: set[str]) -> bool:
    """A field this version writes that an older findings.json did not have."""
    last = difference.path.rsplit(".", 1)[-1]
    return difference.stored is ABSENT and not last.endswith("]") and last in fields


def check_findings(bundle: Bundle, report: CheckReport | None) -> Check:
    """findings.json (what the report shows, when present) against the findings of the logs."""
    path = bundle.path / FINDINGS_FILE
    if not path.is_file():
        return Check("findings", "skipped", f"no {FINDINGS_FILE} in the bundle")
    stored = json.loads(path.read_text(encoding="utf-8"))
    if report is None:
        return Check.failed(
            "findings",
            "deliverable",
            f"{FINDINGS_FILE} holds findings, but no log of the bundle can be read",
            [f"{FINDINGS_FILE}: its findings rest on no log of this bundle"],
        )
    recomputed = json.loads(report.model_dump_json())
    a = _relative(stored, _root_of(stored))
    b = _relative(recomputed, str(Path(bundle.path)))
    result = compare(a, b, ignore=("schema_version",), list_keys=FINDING_KEYS, what="findings")
    version = stored.get("schema_version", 0) if isinstance(stored, dict) else 0
    if isinstance(version, int) and version < SCHEMA_VERSION:
        # Written by an earlier diagnose: a field it did not know is no difference (an item
        # it lacks, a finding deleted, still is).
        fields = _field_names(CheckReport)
        result.differences = [d for d in result.differences if not _new_field(d, fields)]
    n = len(report.findings)
    if result.ok:
        return Check(
            "findings",
            "ok",
            f"{FINDINGS_FILE} equals the findings recomputed from the logs ({n} findings, "
            f"{result.compared} values)",
        )
    # The findings first: what the report shows; then the facts of each log behind them.
    ordered = sorted(result.differences, key=lambda d: not d.path.startswith("findings"))
    problems = [f"{FINDINGS_FILE}: {d}" for d in ordered]
    summary = (
        f"{len(result.differences)} values of {FINDINGS_FILE} differ from the findings "
        "recomputed from the logs (the report shows findings.json's)"
    )
    return Check.failed("findings", "deliverable", summary, problems)
