"""workloads.py: the built-in prompt sets and the JSONL loaders."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from diagnostic.errors import DiagnosticError
from diagnostic.measure.workloads import BUILTIN, builtin, load_prompt_file, select_workloads

DATA = Path(__file__).parent / "data" / "workloads"


@pytest.mark.parametrize("name", BUILTIN)
def test_builtin_sets_are_large_varied_and_unique(name: str) -> None:
    workload = builtin(name)
    texts = [p.prompt or "" for p in workload.prompts]
    assert len(texts) >= 20
    assert len({p.id for p in workload.prompts}) == len(texts)
    assert len(set(texts)) == len(texts)
    # varied: no two prompts share their opening line
    assert len({t.splitlines()[0] for t in texts}) == len(texts)
    assert all(len(t) >= 40 for t in texts)


def test_builtin_ids_are_stable() -> None:
    """Ids name prompts across bundles: recorded ids never change or move (append only)."""
    recorded = json.loads((DATA / "builtin_ids.json").read_text())
    for name, ids in recorded.items():
        assert [p.id for p in builtin(name).prompts][: len(ids)] == ids


def test_code_prompts_leave_code_unfinished() -> None:
    for prompt in builtin("code").prompts:
        text = prompt.prompt or ""
        # an open block or a line to continue, never a finished file
        assert text.endswith(("\n", ":", "{")), prompt.id


def test_unknown_builtin_names_the_known_ones() -> None:
    with pytest.raises(DiagnosticError, match="code, prose"):
        builtin("poetry")


def test_spec_bench_categories_become_workloads() -> None:
    workloads = {w.name: w for w in load_prompt_file(DATA / "question.jsonl")}
    assert list(workloads) == ["writing", "coding", "translation", "summarization"]
    writing = workloads["writing"]
    assert [p.id for p in writing.prompts] == ["81", "82"]
    assert writing.prompts[0].prompt and writing.prompts[0].prompt.startswith("Write a short")
    assert writing.source == str(DATA / "question.jsonl")


def test_plain_prompts_default_to_the_file_stem_and_line_ids() -> None:
    workloads = {w.name: w for w in load_prompt_file(DATA / "plain.jsonl")}
    assert [p.id for p in workloads["plain"].prompts] == ["greeting", "0003"]
    assert [p.prompt for p in workloads["story"].prompts] == ["Once upon a time"]


def test_chat_messages_are_kept() -> None:
    (workload,) = load_prompt_file(DATA / "chat.jsonl")
    assert workload.name == "chat" and workload.prompts[0].prompt is None
    assert workload.prompts[0].messages and workload.prompts[0].messages[1]["role"] == "user"


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("not json", "not valid JSON"),
        ("[1, 2]", "expected a JSON object"),
        ('{"text": "x"}', "no `prompt`, `messages` or `turns`"),
        ('{"prompt": ""}', "non-empty string"),
        ('{"messages": []}', "messages"),
        ('{"messages": [{"content": "x"}]}', "role, content"),
        ('{"question_id": 1, "turns": []}', "turns"),
        ('{"category": "x", "turns": ["q"]}', "question_id"),
        ('{"prompt": "x", "workload": 3}', "workload/category name"),
    ],
)
def test_bad_lines_name_file_and_line(tmp_path: Path, line: str, message: str) -> None:
    path = tmp_path / "prompts.jsonl"
    path.write_text('{"prompt": "fine"}\n' + line + "\n")
    with pytest.raises(DiagnosticError, match=message) as info:
        load_prompt_file(path)
    assert f"{path}:2:" in str(info.value)


def test_duplicate_ids_and_empty_files_are_errors(tmp_path: Path) -> None:
    dup = tmp_path / "dup.jsonl"
    dup.write_text('{"id": "a", "prompt": "x"}\n{"id": "a", "prompt": "y"}\n')
    with pytest.raises(DiagnosticError, match=rf"{dup}:2: duplicate prompt id"):
        load_prompt_file(dup)
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    with pytest.raises(DiagnosticError, match="no prompts"):
        load_prompt_file(empty)
    with pytest.raises(DiagnosticError, match="no such prompt file"):
        load_prompt_file(tmp_path / "missing.jsonl")


def test_select_defaults_and_names() -> None:
    assert [w.name for w in select_workloads(None)] == ["code", "prose"]
    spec = DATA / "question.jsonl"
    assert [w.name for w in select_workloads(None, [spec])][:2] == ["writing", "coding"]
    chosen = select_workloads(["coding", "prose"], [spec])
    assert [(w.name, w.source) for w in chosen] == [("coding", str(spec)), ("prose", "builtin")]
    with pytest.raises(DiagnosticError, match="available: code, coding"):
        select_workloads(["cooking"], [spec])
    with pytest.raises(DiagnosticError, match="listed twice"):
        select_workloads(["code", "code"])
    with pytest.raises(DiagnosticError, match="also in"):
        select_workloads(None, [spec, spec])
