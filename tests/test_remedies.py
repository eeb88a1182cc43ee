"""Remedies as data (checklists/rules `remedies`), launch commands edited flag by flag, and
`diagnose plan` on the real MLA sample (measure/sweep/nextplan.py)."""

from __future__ import annotations

import shutil
import tomllib
from pathlib import Path

import pytest

from diagnostic.engines.edit import edit_command, flag_value
from diagnostic.engines.flags import without_speculation
from diagnostic.errors import PlanError
from diagnostic.logcheck.rules import load_rules
from diagnostic.measure.plan.spec import load_plan, parse_plan
from diagnostic.measure.sweep.nextplan import next_plan

ROOT = Path(__file__).parents[1]
MLA = ROOT / "samples" / "vllm-h200-mla"
SAMPLE_PLAN = ROOT / "samples" / "plans" / "vllm-h200-mla-remedy.toml"
SPEC = '--speculative-config \'{"method":"ngram","num_speculative_tokens":3}\''
VLLM = f"vllm serve $MODEL --port 8000 --attention-backend TRITON_MLA {SPEC}"


def test_edit_sets_replaces_and_removes_flags() -> None:
    edited = edit_command(VLLM, {"--attention-backend": "FLASH_ATTN_MLA", "--enforce-eager": None})
    assert flag_value(edited, "--attention-backend") == "FLASH_ATTN_MLA"
    assert edited.count("--attention-backend") == 1
    assert "$MODEL" in edited.split()  # left for the shell to expand
    bare = edit_command(VLLM, {"--enforce-eager": True})
    assert flag_value(bare, "--enforce-eager") is True


def test_edit_json_keys_and_speculation() -> None:
    k2 = edit_command(VLLM, {"--speculative-config.num_speculative_tokens": "2"})
    assert '"num_speculative_tokens":2' in str(flag_value(k2, "--speculative-config"))
    pinned = edit_command(VLLM, {"--compilation-config.cudagraph_mode": "PIECEWISE"})
    assert flag_value(pinned, "--compilation-config") == '{"cudagraph_mode":"PIECEWISE"}'
    off = edit_command(VLLM, {}, speculation=False, env={"VLLM_USE_V2_MODEL_RUNNER": "0"})
    assert off.startswith("VLLM_USE_V2_MODEL_RUNNER=0 ")
    assert "--speculative-config" not in off


def test_template_makes_port_a_placeholder_and_braces_literal() -> None:
    text = edit_command(VLLM, {}, port_placeholder=True)
    assert "--port {port}" in text and '\'{{"method"' in text
    # the plan loader reads it back, and speculation flags are where the matching finds them
    assert without_speculation(text) == without_speculation(text.replace(SPEC, ""))


def test_every_rule_with_a_fix_carries_remedies() -> None:
    rules = {r.id: r for r in load_rules()}
    for rule in (
        "capture-downgraded-under-spec",
        "capture-none-under-spec",
        "sglang-eagle-with-eagle3-drafter",
        "draft-too-long",
        "model-runner-fallback",
    ):
        assert rules[rule].remedies, rule
    downgrade = rules["capture-downgraded-under-spec"].remedies
    assert any(r.set.get("--attention-backend") == "FLASH_ATTN_MLA" for r in downgrade)
    assert all(r.versions for r in downgrade)  # version-aware
    assert any(r.patch for r in rules["llamacpp-cuda-graphs-disabled"].remedies)


def test_rule_remedy_without_an_action_is_refused(tmp_path: Path) -> None:
    (tmp_path / "r.yaml").write_text(
        "id: r\ntitle: t\nseverity: info\nwhen: {spec.enabled: true}\nmessage: m\nadvice: a\n"
        "remedies:\n  - name: x\n    title: nothing\n"
    )
    with pytest.raises(Exception, match="remedy needs"):
        load_rules(tmp_path)


def test_mla_plan_proposes_the_flash_attn_mla_arms(tmp_path: Path) -> None:
    planned = next_plan(MLA, time_left_s=1800, source=str(tmp_path / "next.toml"))
    assert planned.as_found == "triton-ngram-k3"
    plan = parse_plan(planned.text, source="next.toml")
    assert plan.options.as_found == "triton-ngram-k3" and plan.baseline == "triton-base"
    fa = plan.arm("flash-attn-mla-spec")
    assert "--attention-backend FLASH_ATTN_MLA" in fa.launch and fa.speculative
    base = plan.arm("flash-attn-mla-base")
    assert without_speculation(fa.launch) == without_speculation(base.launch)
    assert any(a.aa_of == "triton-base" for a in plan.arms)
    assert "# Tests capture-downgraded-under-spec on triton-ngram-k3" in planned.text
    assert planned.estimated_s <= 1800 or "WARNING" in planned.text
    assert planned.restarts >= 3


def test_sample_remedy_plan_is_what_the_command_makes() -> None:
    made = parse_plan(next_plan(MLA, time_left_s=1800).text, source="x")
    stored = load_plan(SAMPLE_PLAN)
    assert [(a.name, a.launch) for a in stored.arms] == [(a.name, a.launch) for a in made.arms]
    assert tomllib.loads(SAMPLE_PLAN.read_text())["plan"]["as_found"] == "triton-ngram-k3"


def test_plan_names_a_bad_as_found(tmp_path: Path) -> None:
    with pytest.raises(PlanError, match="not an arm with a launch command"):
        next_plan(MLA, as_found="nope")


def test_plan_of_a_bundle_without_launch_commands(tmp_path: Path) -> None:
    bundle = tmp_path / "b"
    shutil.copytree(MLA, bundle)
    text = (bundle / "manifest.json").read_text()
    import json

    manifest = json.loads(text)
    for arm in manifest["plan"]["arms"]:
        arm["launch"] = None
    (bundle / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(PlanError, match="records no launch command"):
        next_plan(bundle)
