"""Prompt sets: the built-in `code` and `prose` workloads and loaders for JSONL prompt files."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from diagnostic.errors import DiagnosticError

__all__ = [
    "BUILTIN",
    "Prompt",
    "Workload",
    "builtin",
    "load_prompt_file",
    "select_workloads",
]


class Prompt(BaseModel):
    """One prompt: plain text for the completions API, or chat messages."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(description="Stable id within its workload")
    prompt: str | None = Field(None, description="Text for /v1/completions")
    messages: list[dict[str, Any]] | None = Field(None, description="Chat messages")

    @model_validator(mode="after")
    def _one_form(self) -> Prompt:
        if (self.prompt is None) == (self.messages is None):
            raise ValueError("a prompt has either `prompt` text or chat `messages`, not both")
        return self


class Workload(BaseModel):
    """A named prompt set, used in its fixed order."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="Workload name, e.g. code, prose, or a Spec-Bench category")
    prompts: list[Prompt] = Field(min_length=1, description="Prompts in their fixed order")
    source: str = Field("builtin", description="builtin, or the file the prompts came from")


# Built-in prompt sets, written for this project, shipped as JSONL beside this module (ids are
# stable: never renumber). `code` prompts end inside unfinished code (Python, JS/TS, Go, Rust,
# C/C++, Java, SQL, bash, HTML), so the model continues it: the case where drafters that copy
# from context (n-gram, EAGLE) accept the most. `prose` prompts open a text without quoting
# material to copy, so the output is new prose: the case where they accept the least.
_BUILTIN_DIR = Path(__file__).resolve().parent / "prompts"
BUILTIN: tuple[str, ...] = ("code", "prose")


def builtin(name: str) -> Workload:
    """A built-in workload by name (`code` or `prose`)."""
    if name not in BUILTIN:
        raise DiagnosticError(
            f"unknown workload {name!r}; built-in workloads: {', '.join(BUILTIN)}"
        )
    (workload,) = load_prompt_file(_BUILTIN_DIR / f"{name}.jsonl")
    return workload.model_copy(update={"name": name, "source": "builtin"})


def load_prompt_file(path: Path) -> list[Workload]:
    """Workloads from a JSONL file, one prompt per line.

    Accepted lines: `{"prompt": "…"}` and `{"messages": [...]}` (optional `id`, and
    `workload` or `category` to split the file; else the workload is the file's stem), and
    Spec-Bench's question.jsonl (`question_id`, `category`, `turns`: the first turn is the
    prompt, because later turns need the model's own earlier answers; categories become
    workloads).
    """
    path = Path(path)
    groups: dict[str, list[Prompt]] = {}
    for number, data in _json_lines(path):
        where = f"{path}:{number}"
        name, prompt = _parse_line(data, where, default_workload=path.stem, number=number)
        bucket = groups.setdefault(name, [])
        if any(p.id == prompt.id for p in bucket):
            raise DiagnosticError(
                f"{where}: duplicate prompt id {prompt.id!r} in workload {name!r}"
            )
        bucket.append(prompt)
    if not groups:
        raise DiagnosticError(f"{path}: no prompts; expected one JSON object per line")
    return [Workload(name=n, prompts=ps, source=str(path)) for n, ps in groups.items()]


def _json_lines(path: Path) -> Iterable[tuple[int, Any]]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DiagnosticError(f"{path}: no such prompt file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise DiagnosticError(f"{path}: cannot read the prompt file ({exc})") from None
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            yield number, json.loads(line)
        except json.JSONDecodeError as exc:
            raise DiagnosticError(
                f"{path}:{number}: not valid JSON ({exc.msg}); one JSON object per line"
            ) from None


def _parse_line(data: Any, where: str, *, default_workload: str, number: int) -> tuple[str, Prompt]:
    if not isinstance(data, dict):
        raise DiagnosticError(f"{where}: expected a JSON object, got {type(data).__name__}")
    if "turns" in data:
        return _spec_bench(data, where)
    workload = data.get("workload", data.get("category", default_workload))
    pid = data.get("id", data.get("prompt_id", f"{number:04d}"))
    if "prompt" in data:
        text = data["prompt"]
        if not isinstance(text, str) or not text:
            raise DiagnosticError(f"{where}: `prompt` must be a non-empty string")
        return _name(workload, where), Prompt(id=str(pid), prompt=text)
    if "messages" in data:
        return _name(workload, where), Prompt(id=str(pid), messages=_messages(data, where))
    raise DiagnosticError(
        f"{where}: no `prompt`, `messages` or `turns` key; "
        'write {"prompt": "..."} or {"messages": [{"role": "user", "content": "..."}]}'
    )


def _spec_bench(data: dict[str, Any], where: str) -> tuple[str, Prompt]:
    turns = data["turns"]
    if not isinstance(turns, list) or not turns or not isinstance(turns[0], str):
        raise DiagnosticError(f"{where}: `turns` must be a non-empty list of strings")
    if "question_id" not in data:
        raise DiagnosticError(f"{where}: Spec-Bench line without `question_id`")
    category = data.get("category", "spec-bench")
    return _name(category, where), Prompt(id=str(data["question_id"]), prompt=turns[0])


def _messages(data: dict[str, Any], where: str) -> list[dict[str, Any]]:
    messages = data["messages"]
    ok = isinstance(messages, list) and len(messages) > 0
    ok = ok and all(isinstance(m, dict) and "role" in m and "content" in m for m in messages)
    if not ok:
        raise DiagnosticError(
            f"{where}: `messages` must be a non-empty list of {{role, content}} objects"
        )
    return list(messages)


def _name(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise DiagnosticError(f"{where}: the workload/category name must be a non-empty string")
    return value.strip()


def select_workloads(names: list[str] | None, prompt_files: Iterable[Path] = ()) -> list[Workload]:
    """The workloads to run: `names` from the built-ins and the files (files win a name clash).

    With no names: every workload of the files, or `code` and `prose` when there are no files.
    """
    from_files: dict[str, Workload] = {}
    for path in prompt_files:
        for workload in load_prompt_file(path):
            if workload.name in from_files:
                other = from_files[workload.name].source
                raise DiagnosticError(f"{path}: workload {workload.name!r} is also in {other}")
            from_files[workload.name] = workload
    if names is None:
        return list(from_files.values()) if from_files else [builtin("code"), builtin("prose")]
    if len(set(names)) != len(names):
        raise DiagnosticError(f"workload listed twice in {','.join(names)}")
    return [from_files[n] if n in from_files else _builtin_or_explain(n, from_files) for n in names]


def _builtin_or_explain(name: str, from_files: dict[str, Workload]) -> Workload:
    if name in BUILTIN:
        return builtin(name)
    known = sorted(set(BUILTIN) | set(from_files))
    raise DiagnosticError(f"unknown workload {name!r}; available: {', '.join(known)}")
