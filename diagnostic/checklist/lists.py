"""The consultant's checklists: load the YAML, evaluate it on a bundle, store ticks, export."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from diagnostic.bundle.files import atomic_write_bytes, atomic_write_text
from diagnostic.bundle.redact import redact_text
from diagnostic.bundle.store import Bundle
from diagnostic.checklist.auto import AUTO_CHECKS, Status, evaluate_check
from diagnostic.checklist.bundle_facts import BundleFacts
from diagnostic.common.resources import checklists_dir, templates_dir
from diagnostic.errors import ChecklistError
from diagnostic.schema.bundle import utc_now

__all__ = [
    "CHECKLIST_SCHEMA_VERSION",
    "STATE_FILE",
    "STATE_SCHEMA_VERSION",
    "STATUS_LABELS",
    "AppliesWhen",
    "Checklist",
    "ChecklistState",
    "Item",
    "ItemState",
    "ItemStatus",
    "available_checklists",
    "checklist_summary",
    "evaluate",
    "load_checklist",
    "load_checklists",
    "read_state",
    "render_markdown",
    "render_pdf",
    "run_checklist",
    "update_state",
    "write_export",
]

# Checklist YAML format history: 1 — 2026-11: title, intro, items (id, text, why, verify,
# section, check, applies_when {engines}).
CHECKLIST_SCHEMA_VERSION = 1
# checklist.json format history: 1 — 2026-11: lists → item id → ticked/ticked_at/note/noted_at.
STATE_SCHEMA_VERSION = 1
STATE_FILE = "checklist.json"
# Lists in the order of the engagement; any other list file follows alphabetically.
_ORDER = ("pre-visit", "onsite", "deliverable")
_ID = re.compile(r"^[a-z0-9][a-z0-9-]*$")
STATUS_LABELS: dict[Status, str] = {
    "done": "done",
    "not_done": "not done",
    "not_applicable": "not applicable",
}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class AppliesWhen(_Strict):
    """When an item applies; an item without it always applies."""

    engines: list[Literal["vllm", "sglang", "llamacpp", "trtllm"]] = Field(
        description="The item applies only when the bundle's engine is one of these"
    )


class Item(_Strict):
    """One step of a checklist."""

    id: str = Field(description="Stable id, lower-case words joined by '-' (used by --tick)")
    text: str = Field(min_length=1, description="What to do, as an imperative sentence")
    why: str = Field(min_length=1, description="Why it matters: what goes wrong without it")
    verify: str = Field(min_length=1, description="How to verify it is done")
    section: str | None = Field(None, description="Heading the item is grouped under")
    check: str | None = Field(None, description="Automatic check evaluated against a bundle")
    applies_when: AppliesWhen | None = Field(None, description="Condition for the item to apply")

    @field_validator("id")
    @classmethod
    def _id_shape(cls, value: str) -> str:
        if not _ID.match(value):
            raise ValueError("use lower-case letters, digits and '-' (e.g. os-engine-version)")
        return value


class Checklist(_Strict):
    """A checklist file (checklists/<name>.yaml): ordered items."""

    schema_version: int = Field(CHECKLIST_SCHEMA_VERSION, description="Checklist format version")
    name: str = Field("", description="File stem, e.g. onsite (set by the loader)")
    title: str = Field(description="Title shown above the list")
    intro: str = Field("", description="One paragraph saying who the list is for and when")
    items: list[Item] = Field(min_length=1, description="The items, in the order they are done")

    def item(self, item_id: str) -> Item:
        """The item with this id, or a ChecklistError listing the valid ids."""
        for item in self.items:
            if item.id == item_id:
                return item
        raise ChecklistError(
            f"no item {item_id!r} in the {self.name} checklist; "
            f"valid ids: {', '.join(i.id for i in self.items)}"
        )


class ItemState(_Strict):
    """What the consultant recorded by hand for one item."""

    ticked: bool = Field(False, description="Ticked as done by the consultant")
    ticked_at: str | None = Field(None, description="UTC time of the last tick or untick")
    note: str | None = Field(None, description="Free note (secrets redacted)")
    noted_at: str | None = Field(None, description="UTC time the note was written")


class ChecklistState(_Strict):
    """checklist.json in a bundle: manual ticks and notes per list and item id."""

    schema_version: int = Field(STATE_SCHEMA_VERSION, description="checklist.json format version")
    updated_at: str = Field(default_factory=utc_now, description="UTC time of the last change")
    lists: dict[str, dict[str, ItemState]] = Field(
        default_factory=dict, description="List name → item id → manual state"
    )

    def get(self, name: str, item_id: str) -> ItemState:
        """Manual state of one item (empty when never touched)."""
        return self.lists.get(name, {}).get(item_id, ItemState())


class ItemStatus(_Strict):
    """One item as the table and the report show it: status, evidence, note."""

    list_name: str = Field(description="Checklist the item belongs to, e.g. onsite")
    id: str = Field(description="Item id")
    text: str = Field(description="What to do")
    section: str | None = Field(None, description="Heading the item is grouped under")
    automatic: bool = Field(description="Whether the tool evaluates the item itself")
    check: str | None = Field(None, description="Name of the automatic check")
    status: Status | None = Field(description="done, not_done, not_applicable; None: no bundle")
    evidence: str = Field("", description="One line: what the check found or who ticked it")
    note: str | None = Field(None, description="The consultant's note")

    @property
    def label(self) -> str:
        """Status in words ('not evaluated' without a bundle)."""
        return STATUS_LABELS[self.status] if self.status else "not evaluated"


# -- loading ---------------------------------------------------------------------------------


class _UniqueKeyLoader(yaml.SafeLoader):
    """A safe YAML loader that refuses a key given twice (PyYAML keeps the last silently)."""


def _construct_mapping(loader: yaml.SafeLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r}", key_node.start_mark
            )
        seen.add(key)
    return loader.construct_mapping(node)


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def available_checklists(folder: Path | None = None) -> list[str]:
    """Names of the checklists (top-level *.yaml; rules/ belongs to `diagnose check`)."""
    folder = folder or checklists_dir()
    names = [p.stem for p in folder.glob("*.yaml") if p.is_file()]
    return sorted(names, key=lambda n: (_ORDER.index(n) if n in _ORDER else len(_ORDER), n))


def load_checklist(name: str, folder: Path | None = None) -> Checklist:
    """Load and validate checklists/<name>.yaml; errors name the file, line and item."""
    folder = folder or checklists_dir()
    path = folder / f"{name}.yaml"
    if not path.is_file():
        known = ", ".join(available_checklists(folder)) or "none"
        raise ChecklistError(f"no checklist {name!r} in {folder}; available: {known}")
    return _parse(path, _read_yaml(path))


def load_checklists(folder: Path | None = None) -> list[Checklist]:
    """Every checklist, in the order of the engagement (pre-visit, onsite, deliverable, …)."""
    return [load_checklist(name, folder) for name in available_checklists(folder)]


def _read_yaml(path: Path) -> Any:
    try:
        return yaml.load(path.read_text(encoding="utf-8"), Loader=_UniqueKeyLoader)
    except UnicodeDecodeError as exc:
        raise ChecklistError(f"{path}: not UTF-8 text ({exc.reason})") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        problem = getattr(exc, "problem", None) or str(exc)
        raise ChecklistError(f"{where}: invalid YAML: {problem}; fix the file") from None


def _parse(path: Path, data: Any) -> Checklist:
    if not isinstance(data, dict):
        raise ChecklistError(f"{path}: expected a mapping with title and items at the top")
    version = data.get("schema_version", CHECKLIST_SCHEMA_VERSION)
    if isinstance(version, int) and version > CHECKLIST_SCHEMA_VERSION:
        raise ChecklistError(
            f"{path}: schema_version {version} is newer than this diagnose reads "
            f"({CHECKLIST_SCHEMA_VERSION}); upgrade diagnose"
        )
    try:
        checklist = Checklist.model_validate({**data, "name": path.stem})
    except ValidationError as exc:
        raise ChecklistError(_validation_message(path, data, exc)) from None
    _check_items(path, checklist)
    return checklist


def _validation_message(path: Path, data: dict[str, Any], exc: ValidationError) -> str:
    first = exc.errors()[0]
    loc = list(first["loc"])
    where = ".".join(str(p) for p in loc) or "(top)"
    if len(loc) >= 2 and loc[0] == "items" and isinstance(loc[1], int):
        raw = data["items"][loc[1]]
        item_id = raw.get("id") if isinstance(raw, dict) else None
        label = f"item {item_id!r}" if item_id else f"item #{loc[1] + 1}"
        where = f"{label}: " + (".".join(str(p) for p in loc[2:]) or "(item)")
    message = first["msg"]
    if first["type"] == "extra_forbidden":
        message = "unknown key (check its spelling)"
    return f"{path}: {where}: {message}"


def _check_items(path: Path, checklist: Checklist) -> None:
    seen: set[str] = set()
    for item in checklist.items:
        if item.id in seen:
            raise ChecklistError(f"{path}: item {item.id!r}: duplicate id; ids must be unique")
        seen.add(item.id)
        if item.check is not None and item.check not in AUTO_CHECKS:
            raise ChecklistError(
                f"{path}: item {item.id!r}: unknown check {item.check!r}; "
                f"known checks: {', '.join(sorted(AUTO_CHECKS))}"
            )


# -- state -----------------------------------------------------------------------------------


def read_state(bundle: Bundle) -> ChecklistState:
    """checklist.json of the bundle, or an empty state."""
    return (
        bundle.read_json(STATE_FILE, ChecklistState, newest=STATE_SCHEMA_VERSION)
        or ChecklistState()
    )


def update_state(
    bundle: Bundle,
    checklist: Checklist,
    *,
    tick: Iterable[str] = (),
    untick: Iterable[str] = (),
    notes: Iterable[tuple[str, str]] = (),
) -> ChecklistState:
    """Record ticks, unticks and notes in the bundle's checklist.json (atomically)."""
    tick, untick, notes = list(tick), list(untick), list(notes)
    for item_id in tick:
        check = checklist.item(item_id).check
        if check:
            raise ChecklistError(
                f"item {item_id!r} is checked automatically against the bundle ({check}); "
                "add what is missing to the bundle, or a --note"
            )
    for item_id in [*untick, *(i for i, _ in notes)]:
        checklist.item(item_id)  # raises for an unknown id before anything is written
    state = read_state(bundle)
    if not (tick or untick or notes):
        return state
    items = state.lists.setdefault(checklist.name, {})
    now = utc_now()
    for item_id, ticked in [*((i, True) for i in tick), *((i, False) for i in untick)]:
        items[item_id] = items.get(item_id, ItemState()).model_copy(
            update={"ticked": ticked, "ticked_at": now}
        )
    for item_id, text in notes:
        note = redact_text(text).strip() or None
        items[item_id] = items.get(item_id, ItemState()).model_copy(
            update={"note": note, "noted_at": now}
        )
    state.updated_at = now
    bundle.write_json(STATE_FILE, state)
    return state


# -- evaluation ------------------------------------------------------------------------------


def evaluate(checklist: Checklist, bundle: Bundle | None = None) -> list[ItemStatus]:
    """Status of every item: automatic checks run on the bundle, ticks read from it."""
    if bundle is None:
        return [_status(checklist, item, None, "") for item in checklist.items]
    facts = BundleFacts(bundle)
    state = read_state(bundle)
    engines = {r.engine.name for r in facts.runs} - {"unknown"}
    out = []
    for item in checklist.items:
        manual = state.get(checklist.name, item.id)
        if item.applies_when and engines and not engines & set(item.applies_when.engines):
            status: Status = "not_applicable"
            evidence = f"engine {_join(engines)}; applies to {_join(item.applies_when.engines)}"
        elif item.check:
            result = evaluate_check(item.check, facts)
            status, evidence = result.status, result.evidence
        elif manual.ticked:
            status, evidence = "done", f"ticked by hand at {manual.ticked_at}"
        else:
            status, evidence = "not_done", "not ticked"
        out.append(_status(checklist, item, status, evidence, manual.note))
    return out


def _join(names: Iterable[str]) -> str:
    return ", ".join(sorted(names))


def _status(
    checklist: Checklist, item: Item, status: Status | None, evidence: str, note: str | None = None
) -> ItemStatus:
    return ItemStatus(
        list_name=checklist.name,
        id=item.id,
        text=item.text,
        section=item.section,
        automatic=item.check is not None,
        check=item.check,
        status=status,
        evidence=evidence,
        note=note,
    )


def checklist_summary(bundle: Bundle, *, names: Sequence[str] | None = None) -> list[ItemStatus]:
    """Every item of the named lists (default: all) evaluated on the bundle, for the report."""
    lists = [load_checklist(n) for n in names] if names is not None else load_checklists()
    return [status for checklist in lists for status in evaluate(checklist, bundle)]


def run_checklist(
    name: str,
    bundle_path: Path | None = None,
    *,
    tick: Sequence[str] = (),
    untick: Sequence[str] = (),
    notes: Sequence[tuple[str, str]] = (),
) -> tuple[Checklist, list[ItemStatus]]:
    """What `diagnose checklist` does: load a list, store ticks and notes, evaluate the bundle."""
    checklist = load_checklist(name)
    if bundle_path is None:
        if tick or untick or notes:
            raise ChecklistError(
                "ticks and notes are stored in a bundle: give the BUNDLE folder "
                "(e.g. diagnose checklist bundle/ --tick ID)"
            )
        return checklist, evaluate(checklist)
    bundle = Bundle.open(bundle_path)
    update_state(bundle, checklist, tick=tick, untick=untick, notes=notes)
    return checklist, evaluate(checklist, bundle)


# -- export ----------------------------------------------------------------------------------


def render_markdown(checklist: Checklist, statuses: Sequence[ItemStatus] | None = None) -> str:
    """The checklist as Markdown: numbered items with why and how to verify (and status)."""
    by_id = {s.id: s for s in statuses or ()}
    lines = [f"# {checklist.title}", ""]
    if checklist.intro:
        lines += [checklist.intro.strip(), ""]
    section: str | None = None
    for number, item in enumerate(checklist.items, start=1):
        if item.section and item.section != section:
            section = item.section
            lines += [f"## {section}", ""]
        lines.append(f"{number}. [ ] **{item.text.strip()}** (`{item.id}`)")
        lines.append(f"   - *Why:* {item.why.strip()}")
        lines.append(f"   - *Verify:* {item.verify.strip()}")
        if item.applies_when:
            lines.append(f"   - *Applies to:* {', '.join(item.applies_when.engines)}")
        status = by_id.get(item.id)
        if status and status.status:
            lines.append(f"   - *Status:* {status.label} — {status.evidence}")
        if status and status.note:
            lines.append(f"   - *Note:* {status.note}")
        lines.append("")
    return "\n".join(lines)


def _code_spans(text: str) -> Any:
    """Escape text, then show `backticked` parts in a monospace font."""
    from markupsafe import Markup, escape

    return Markup(re.sub(r"`([^`]+)`", r"<code>\1</code>", str(escape(text))))


def render_pdf(checklist: Checklist, statuses: Sequence[ItemStatus] | None = None) -> bytes:
    """The checklist as a PDF (jinja2 HTML rendered by WeasyPrint)."""
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(templates_dir() / "checklist"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
    )
    env.filters["code"] = _code_spans
    by_id = {s.id: s for s in statuses or ()}
    html = env.get_template("checklist.html.j2").render(
        checklist=checklist, statuses=by_id, generated_at=utc_now()
    )
    from diagnostic.common.pdf import html_to_pdf  # imported here: WeasyPrint is slow to load

    return html_to_pdf(html, templates_dir() / "checklist")


def write_export(
    checklist: Checklist, fmt: str, out: Path, statuses: Sequence[ItemStatus] | None = None
) -> Path:
    """Write an already evaluated checklist to `out` as md or pdf, atomically."""
    if fmt == "md":
        atomic_write_text(out, render_markdown(checklist, statuses))
    elif fmt == "pdf":
        atomic_write_bytes(out, render_pdf(checklist, statuses))
    else:
        raise ChecklistError(f"unknown export format {fmt!r}; use md or pdf")
    return out
