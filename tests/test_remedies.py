"""Remedies as data (checklists/rules `remedies`), launch commands edited flag by flag, and
`diagnose plan` on the real MLA sample (measure/sweep/nextplan.py)."""

from __future__ import annotations

import shutil
import tomllib
from pathlib import Path

import pytest
from real_runs import REAL_RUNS

from diagnostic.engines.command import (
    edit_command,
    flag_value,
    same_launch,
    without_speculation,
)
from diagnostic.errors import PlanError
from diagnostic.logcheck.rules import load_rules
from diagnostic.measure.plan.spec import load_plan, parse_plan
from diagnostic.measure.sweep.nextplan import next_plan

ROOT = Path(__file__).parents[1]
MLA = ROOT / "samples" / "vllm-h200-mla"
REMEDY = ROOT / "samples" / "vllm-h200-mla-remedy"  # SAMPLE_PLAN as run on the H200
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
    one_word = edit_command("vllm serve M --port=9000", {}, port_placeholder=True)
    assert one_word.endswith("--port {port}")
    assert edit_command("vllm serve M", {}, port_placeholder=True).endswith("--port {port}")
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


def test_recorded_remedy_sweep_ran_the_plan_unchanged() -> None:
    """samples/vllm-h200-mla-remedy is `diagnose sweep` of SAMPLE_PLAN on the H200: the
    bundle's plan is the file's, arm by arm (launch, environment, A/A, as found)."""
    from diagnostic.bundle.store import Bundle

    stored, ran = load_plan(SAMPLE_PLAN), Bundle.open(REMEDY).manifest.plan
    assert [(a.name, a.launch, dict(a.env), a.aa_of) for a in stored.arms] == [
        (a.name, a.launch, dict(a.env), a.aa_of) for a in ran.arms
    ]
    assert ran.as_found == "triton-ngram-k3" and ran.restarts == stored.options.restarts
    assert {r.status for r in Bundle.open(REMEDY).runs()} == {"ok"}


def test_recorded_remedy_report_leads_with_before_and_after() -> None:
    """The recorded before-and-after: after the fix (FlashAttention MLA + n-gram) against as
    found (Triton MLA + n-gram, capture downgraded), on the same restarts paired by block, in
    decode tok/s and as one ratio with its range (about 271 → 892 tok/s on code, 3.3×)."""
    from diagnostic.bundle.store import Bundle
    from diagnostic.report.build import report_context

    ctx = report_context(Bundle.open(REMEDY))
    answer = ctx.summary.answer
    assert answer is not None
    assert answer.head.startswith("As found: n-gram at k=3 (triton-ngram-k3).")
    assert "After the fix: n-gram at k=3 (flash-attn-mla-spec)" in answer.head
    assert "--attention-backend FLASH_ATTN_MLA" in answer.head
    from diagnostic.analyse.core import analyse

    a = analyse(Bundle.open(REMEDY))
    pairs = {c.workload: c for c in a.before_after if c.concurrency == 1}
    assert {c.arm for c in pairs.values()} == {"flash-attn-mla-spec"}
    assert {c.baseline for c in pairs.values()} == {"triton-ngram-k3"}
    assert pairs["code"].paired and pairs["code"].reference_tps is not None
    assert abs(pairs["code"].reference_tps - 271) < 2
    assert abs(pairs["code"].reference_tps * (pairs["code"].ratio or 0) - 892) < 3
    code, prose = answer.lines
    c = pairs["code"]
    assert (code.verdict, code.word) == ("WIN", "faster")
    assert code.sentence.startswith(
        f"On code the fixed server decodes {c.ratio:.2f}× faster than as found, "
        f"between {c.ci_low:.2f}× and {c.ci_high:.2f}×: "
    )
    # Issue 45: on prose the fix's WIN rested on a variance borrowed from quieter arms; on its
    # own blocks it is undecided, so nothing is shown to beat the configuration as found
    # there; as found measured slower than no speculation, undecided, and page 1 says so
    # instead of "keep it".
    assert "prose" not in pairs and (prose.verdict, prose.word) == ("INCONCLUSIVE", "not decided")
    own = next(x for x in a.comparisons if x.arm == "triton-ngram-k3" and x.workload == "prose")
    assert own.ratio is not None and own.ratio < 1 and own.verdict == "INCONCLUSIVE"
    assert prose.sentence.endswith(
        f"; without speculation it decoded {1 / own.ratio:.2f}× faster, not decided."
    )
    # The A/A check, simultaneous over code and prose, holds: no warning, and the band gives
    # the widest A/A interval with its own level.
    assert ctx.summary.warning == "" and a.noise_band.aa_check is True
    band = ctx.variance.band
    assert (
        "code, concurrency 1: [simultaneous 95% CI over 2 comparisons (each 97.5%): 0.43–1.91]"
        ", containing 1." in band
    )


def test_plan_names_a_bad_as_found(tmp_path: Path) -> None:
    with pytest.raises(PlanError, match=r"not a speculative arm.*name one of: triton-ngram-k3"):
        next_plan(MLA, as_found="nope")
    with pytest.raises(PlanError, match="not a speculative arm"):
        next_plan(MLA, as_found="triton-base")


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


LOGS = ROOT / "tests" / "data" / "logs"


def _remedies(log: str, rule_id: str, launch: str) -> tuple[list[str], list[str]]:
    """The remedy arms' launches and the notes for `rule_id`'s finding on a real log."""
    from diagnostic.logcheck.stage import check_paths
    from diagnostic.measure.sweep.remedy_arms import candidates

    report = check_paths([LOGS / log], write=False)
    assert any(f.rule == rule_id for f in report.findings), [f.rule for f in report.findings]
    rule = next(r for r in load_rules() if r.id == rule_id)
    found = candidates(rule, report.runs[0], arm="x", launch=launch, env={}, analysis=None)
    return [a.launch for a in found.arms if a.speculative], found.notes


def test_sglang_eagle_gets_eagle3() -> None:
    launch = (
        "python -m sglang.launch_server --model-path M --port 30000 --speculative-algorithm EAGLE"
        " --speculative-draft-model-path D-EAGLE3"
    )
    arms, _ = _remedies(
        "sglang-0.5-eagle-flag-with-eagle3-drafter.log", "sglang-eagle-with-eagle3-drafter", launch
    )
    assert arms and all("--speculative-algorithm EAGLE3" in a for a in arms)


def test_flashinfer_downgrade_gets_flash_attn_and_a_pinned_mode() -> None:
    launch = (
        "vllm serve M --port 8000 -tp 2 --speculative-config "
        '\'{"method":"eagle3","model":"D","num_speculative_tokens":3}\''
    )
    arms, _ = _remedies(
        "vllm-v1-0.11-tp2-flashinfer-eagle3-downgrade.log", "capture-downgraded-under-spec", launch
    )
    assert any("--attention-backend FLASH_ATTN " in a + " " for a in arms)
    assert any("cudagraph_mode" in a for a in arms)
    assert not any("FLASH_ATTN_MLA" in a for a in arms)  # not an MLA model


def test_eager_speculation_gets_graphs_back() -> None:
    from diagnostic.logcheck.stage import check_paths
    from diagnostic.measure.sweep.remedy_arms import candidates

    report = check_paths([REAL_RUNS / "h200-vllm-0.26" / "ngram3-eager"], write=False)
    rule = next(r for r in load_rules() if r.id == "capture-none-under-spec")
    facts = next(r for r in report.runs if r.spec.enabled)
    launch = 'vllm serve M --port 8000 --enforce-eager --speculative-config \'{"method":"ngram"}\''
    found = candidates(rule, facts, arm="x", launch=launch, env={}, analysis=None)
    modes = {str(flag_value(a.launch, "--compilation-config")) for a in found.arms}
    # plan templates: literal braces doubled
    assert modes == {
        '{{"cudagraph_mode":"PIECEWISE"}}',
        '{{"cudagraph_mode":"FULL_AND_PIECEWISE"}}',
    }
    assert not any("--enforce-eager" in a.launch for a in found.arms)
    old = facts.model_copy(update={"version": "0.9.2"})  # before cudagraph_mode existed
    notes = candidates(rule, old, arm="x", launch=launch, env={}, analysis=None)
    assert not notes.arms and any("before 0.10" in n for n in notes.notes)


def test_mla_report_leads_with_before_and_after(tmp_path: Path) -> None:
    """The MLA sample with its as-found arm named (as a plan from `diagnose plan` records it):
    page 1 and chapter 2 lead with as found against after, and page 1 still holds it all."""
    import json
    import subprocess
    import sys

    from pypdf import PdfReader

    bundle = tmp_path / "mla"
    shutil.copytree(MLA, bundle)
    manifest = json.loads((bundle / "manifest.json").read_text())
    manifest["plan"]["as_found"] = "triton-ngram-k3"
    (bundle / "manifest.json").write_text(json.dumps(manifest))
    out = tmp_path / "r.pdf"
    done = subprocess.run(
        [sys.executable, "-m", "diagnostic", "report", str(bundle), "-o", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    pages = [p.extract_text() for p in PdfReader(out).pages]
    page1 = " ".join(pages[0].split())
    assert "As found: n-gram at k=3 (triton-ngram-k3)" in page1
    assert "After the fix: n-gram at k=3 (fa-ngram-k3) with" in page1 and "FLASH_ATTN_MLA" in page1
    assert "On code the fixed server decodes" in page1 and "faster than as found" in page1
    assert "Contents" in pages[1][:200]  # page 1 holds it all: page 2 opens with the contents
    chapter = next(
        p for p in pages if "Before and after" in p and "As found:" in p and p != pages[0]
    )
    assert "Why as found was slow: CUDA-graph capture downgraded under speculation" in " ".join(
        chapter.split()
    )


def test_draft_too_long_gets_shorter_drafts() -> None:
    """Without a sweep's theory, the k values run from the finding's suggestion up to below
    the k the run drafted; the base arm of each is the as-found baseline (no k in it)."""
    from diagnostic.logcheck.rules import finding_values
    from diagnostic.logcheck.stage import check_paths
    from diagnostic.measure.sweep.remedy_arms import candidates

    report = check_paths([LOGS / "vllm-v2-0.17-eagle3-low-acceptance.log"], write=False)
    rule = next(r for r in load_rules() if r.id == "draft-too-long")
    values = finding_values(rule, report.runs[0]) or {}
    ran, suggested = values["k"], values["suggested_k"]
    assert suggested < ran
    launch = (
        "vllm serve M --port 8000 --speculative-config "
        f'\'{{"method":"eagle3","model":"D","num_speculative_tokens":{ran}}}\''
    )
    found = candidates(rule, report.runs[0], arm="x", launch=launch, env={}, analysis=None)
    spec = [a for a in found.arms if a.speculative]
    assert [a.name for a in spec] == [f"k{k}-spec" for k in range(suggested, ran)]
    for a, k in zip(spec, range(suggested, ran), strict=True):
        assert f'"num_speculative_tokens":{k}' in a.launch
    bases = {a.launch for a in found.arms if not a.speculative}
    assert len(bases) == 1 and "--speculative-config" not in bases.pop()


def test_plan_command_prints_writes_and_refuses(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from diagnostic.cli import main

    out = tmp_path / "next.toml"
    dry = CliRunner().invoke(main, ["plan", str(MLA), "--dry-run", "--time-left", "30min"])
    assert dry.exit_code == 0, dry.output
    assert 'as_found = "triton-ngram-k3"' in dry.output and not out.exists()
    wrote = CliRunner().invoke(main, ["plan", str(MLA), "-o", str(out), "--time-left", "30min"])
    assert wrote.exit_code == 0, wrote.output
    assert load_plan(out).options.as_found == "triton-ngram-k3"
    again = CliRunner().invoke(main, ["plan", str(MLA), "-o", str(out)])
    assert again.exit_code != 0 and "already exists" in again.output
    bad = CliRunner().invoke(main, ["plan", str(MLA), "--dry-run", "--time-left", "soon"])
    assert bad.exit_code != 0 and "3h, 45min" in bad.output


def test_same_launch_reads_flags_in_any_order_and_spelling() -> None:
    a = 'vllm serve m --port 8000 --x=1 --speculative-config \'{"method":"ngram","k":3}\''
    b = 'vllm serve m --speculative_config \'{"k": 3, "method": "ngram"}\' --x 1 --port {port}'
    assert same_launch(a, b)
    assert not same_launch(a, b.replace("--x 1", "--x 2"))
    assert not same_launch(a, b.replace("serve m", "serve n"))
    assert not same_launch(a, "vllm serve m 'unbalanced")


def test_plan_never_proposes_an_arm_the_bundle_measured() -> None:
    """The SGLang sample measured the EAGLE3 flag (eagle3-head-k3) beside the wrong EAGLE flag
    (the as-found arm): the flag's remedy arm is that same command, so the plan does not spend
    hours measuring it again, and says what the measured arm gave."""
    from diagnostic.bundle.store import Bundle

    sample = ROOT / "samples" / "sglang-h200-gemma3"
    planned = next_plan(sample)
    measured = [a for a in Bundle.open(sample).manifest.plan.arms if a.launch and a.speculative]
    arms = tomllib.loads(planned.text)["arms"]
    for arm in arms:
        if arm["name"] != planned.as_found and arm.get("launch"):
            assert not any(same_launch(arm["launch"], m.launch or "") for m in measured), arm
    said = [n for n in planned.notes if "is not proposed" in n]
    assert len(said) == 1 and "measured the same command as eagle3-head-k3" in said[0]
    assert "code 0.41× of base, LOSS" in said[0]
