"""diagnostic.logcheck.rules: rule files, conditions, pattern rules without code, pairing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from diagnostic.engines import parse_log
from diagnostic.errors import RuleError
from diagnostic.logcheck.rules import (
    apply_rules,
    line_patterns,
    load_rules,
    lookup,
    render,
)
from diagnostic.schema.logfacts import AcceptanceSummary, LogFacts
from tests.engine_logs import CASES, REAL_RUNS, fixture_cases, real_cases

RULES = load_rules()
PATTERNS = line_patterns(RULES)
REQUIRED = {
    "capture-downgraded-under-spec",
    "capture-none-under-spec",
    "spec-capture-differs",
    "model-runner-fallback",
    "sglang-eagle-with-eagle3-drafter",
    "acceptance-near-one",
    "decode-without-cuda-graph",
    "llamacpp-cuda-graphs-disabled",
    "draft-too-long",
    "workers-disagree",
}


def findings_of(log: Path) -> set[str]:
    findings, _ = apply_rules(RULES, [parse_log(log, patterns=PATTERNS)])
    return {f.rule for f in findings}


def test_shipped_rules_cover_the_issue() -> None:
    assert {r.id for r in RULES} >= REQUIRED


@pytest.mark.parametrize(
    ("log", "expected"),
    fixture_cases("vllm-") + fixture_cases("sglang-") + fixture_cases("llamacpp-"),
)
def test_findings_of_written_cases(log: Path, expected: dict[str, Any]) -> None:
    assert findings_of(log) == set(expected["findings"])


@pytest.mark.parametrize(("log", "expected"), real_cases(""))
def test_findings_of_real_logs(log: Path, expected: dict[str, Any]) -> None:
    assert findings_of(log) == set(expected["findings"])


def test_downgrade_finding_names_modes_and_lines() -> None:
    log = REAL_RUNS / "h200-vllm-0.26-mla" / "mla-triton-ngram3" / "server.log"
    findings, _ = apply_rules(RULES, [parse_log(log, patterns=PATTERNS)])
    (downgrade,) = [f for f in findings if f.rule == "capture-downgraded-under-spec"]
    assert downgrade.severity == "error"
    assert "from FULL_AND_PIECEWISE to PIECEWISE" in downgrade.message
    assert 39 in [e.line for e in downgrade.evidence]
    assert downgrade.advice and downgrade.reference


def test_spec_runs_pair_with_the_baseline_of_the_same_settings() -> None:
    logs = sorted(REAL_RUNS.glob("h200-vllm-0.26*/*/server.log"))
    runs = [parse_log(log, patterns=PATTERNS) for log in logs]
    for run, log in zip(runs, logs, strict=True):
        run.label = log.parent.name
    findings, pairs = apply_rules(RULES, runs)
    got = {(p.baseline_label, p.spec_label, p.same) for p in pairs}
    assert got == {
        ("base", "ngram3", True),
        ("eager", "ngram3-eager", True),
        ("mla-triton-base", "mla-triton-ngram3", False),
    }
    (differs,) = [f for f in findings if f.rule == "spec-capture-differs"]
    assert "mla-triton-ngram3" in differs.message and "FULL_AND_PIECEWISE" in differs.message
    assert len(differs.runs) == 2


def test_two_equally_close_baselines_are_not_guessed() -> None:
    spec = LogFacts(path="s", engine="vllm", requested={"a": 1})
    spec.spec.enabled = True
    one = LogFacts(path="b1", engine="vllm", requested={"a": 2})
    two = LogFacts(path="b2", engine="vllm", requested={"a": 3})
    one.spec.enabled = two.spec.enabled = False
    _, pairs = apply_rules(RULES, [spec, one, two])
    assert pairs == []


def test_a_pattern_rule_is_a_yaml_file_and_no_code(tmp_path: Path) -> None:
    (tmp_path / "ulimit.yaml").write_text(
        "id: fd-limit\ntitle: File descriptor limit too low\nseverity: warning\n"
        "engines: [vllm]\nmatch:\n  contains: Found ulimit of\n"
        "  regex: 'ulimit of (?P<limit>\\d+)'\n"
        "message: 'ulimit -n is {limit}'\nadvice: Raise ulimit -n.\n"
    )
    rules = load_rules(tmp_path)
    log = REAL_RUNS / "h200-vllm-0.26" / "base" / "server.log"
    findings, _ = apply_rules(rules, [parse_log(log, patterns=line_patterns(rules))])
    assert [(f.rule, f.message, [e.line for e in f.evidence]) for f in findings] == [
        ("fd-limit", "ulimit -n is 20000", [8])
    ]


@pytest.mark.parametrize(
    ("text", "error"),
    [
        (
            "id: x\ntitle: t\nseverity: bad\nwhen: {engine: vllm}\nmessage: m\nadvice: a\n",
            "severity",
        ),
        ("id: x\ntitle: t\nseverity: info\nmessage: m\nadvice: a\n", "needs `when`"),
        ("id: x\ntitle: t\nseverity: info\ncheck: nope\nmessage: m\nadvice: a\n", "unknown check"),
        (
            "id: x\ntitle: t\nseverity: info\nwhen: {a: {near: 1}}\nmessage: m\nadvice: a\n",
            "operator",
        ),
        (
            "id: x\ntitle: t\nseverity: info\nmatch: {contains: a, regex: '('}\n"
            "message: m\nadvice: a\n",
            "regex",
        ),
        ("id: x\ntitle: t\nseverity: info\nwhen: {a: 1}\nmessage: m\nadvice: a\ntypo: 1\n", "typo"),
        ("id: [unclosed\n", "cannot read"),
    ],
)
def test_invalid_rule_files_name_the_file_and_field(tmp_path: Path, text: str, error: str) -> None:
    (tmp_path / "bad.yaml").write_text(text)
    with pytest.raises(RuleError, match=r"bad\.yaml") as info:
        load_rules(tmp_path)
    assert error in str(info.value)


def test_duplicate_ids_and_missing_folder(tmp_path: Path) -> None:
    rule = "- id: x\n  title: t\n  severity: info\n  when: {a: 1}\n  message: m\n  advice: a\n"
    (tmp_path / "two.yaml").write_text(rule + rule)
    with pytest.raises(RuleError, match="used twice"):
        load_rules(tmp_path)
    with pytest.raises(RuleError, match="no rule files"):
        load_rules(tmp_path / "missing")


def test_lookup_and_render() -> None:
    facts = LogFacts(path="p", acceptance_summary=AcceptanceSummary(per_position=[0.5, 0.1]))
    assert lookup(facts, "acceptance_summary.per_position.-1") == 0.1
    assert lookup(facts, "capture.__class__") is None
    assert (
        render("{capture.resolved} {nope} {{x}} {k}", facts, {"k": 0.123456})
        == "UNKNOWN (not in the log) {x} 0.123"
    )


def test_render_leaves_out_what_is_unknown() -> None:
    """A message never prints a placeholder: defaults and optional parts say what is known."""
    facts = LogFacts(path="p")
    template = "Speculation ({spec.method|method not in the log}[[, k={spec.num_draft_tokens}]])"
    assert render(template, facts, {}) == "Speculation (method not in the log)"
    facts.spec.method, facts.spec.num_draft_tokens = "ngram", 3
    assert render(template, facts, {}) == "Speculation (ngram, k=3)"


def test_every_case_file_has_expectations() -> None:
    for log in CASES.glob("*.log"):
        assert log.with_name(log.stem + ".expected.json").is_file(), log


# -- where a rule fires and what it says it is caused by --------------------------------------
WILD = CASES / "wild"
VLLM_026 = REAL_RUNS / "h200-vllm-0.26"


def _check(*logs: Path) -> dict[str, list[tuple[str, str]]]:
    """Rule id -> (run file name, message) of every finding on these logs checked together."""
    runs = []
    for log in logs:
        facts = parse_log(log, patterns=PATTERNS)
        facts.path = facts.label = str(log)
        runs.append(facts)
    findings, _ = apply_rules(RULES, runs)
    out: dict[str, list[tuple[str, str]]] = {}
    for f in findings:
        out.setdefault(f.rule, []).append((Path(f.run or "").parent.name, f.message))
    return out


def test_runner_fallback_where_the_compared_runs_differ() -> None:
    """On a GPU, n-gram leaves Model Runner V2 while its baseline stays: one warning, on the
    n-gram run, naming the baseline's runner; the baseline gets none."""
    found = _check(VLLM_026 / "base" / "server.log", VLLM_026 / "ngram3" / "server.log")
    [(run, message)] = found["model-runner-fallback"]
    assert run == "ngram3"
    assert "ran Model Runner V2" in message and "ngram" in message


def test_runner_fallback_of_a_lone_spec_run_says_what_v2_lacked() -> None:
    [(_, message)] = _check(VLLM_026 / "ngram3" / "server.log")["model-runner-fallback"]
    assert "V2 does not support ngram/ngram_gpu speculative decoding" in message
    assert "without speculation stays on Model Runner V2" in message


def test_cpu_runs_fall_back_alike_and_have_no_graphs_to_lose() -> None:
    """vLLM 0.32 on a CPU: both runs fall back to V1 (so they do not differ), cudagraph_mode is
    NONE with or without --enforce-eager, and a compiling run cut early is not 'before capture'."""
    ngram = WILD / "4-vllm-cpu-0.32-ngram-eager.log"
    base = WILD / "4-vllm-cpu-0.32-no-spec-compiling-cut.log"
    assert _check(ngram, base) == {}
    facts = parse_log(base, patterns=PATTERNS)
    assert (facts.platform, facts.capture.resolved) == ("cpu", "NONE")
    assert "before CUDA-graph capture" not in facts.capture.reason
    assert facts.runner_fallback is not None and not facts.runner_fallback.by_speculation


def test_a_v2_notice_about_a_request_parameter_is_no_fallback() -> None:
    facts = parse_log(WILD / "2-vllm-indented-thinking-budget-notice.log", patterns=PATTERNS)
    assert (facts.model_runner, facts.runner_fallback) == ("V2", None)


def test_llamacpp_graphs_disabled_names_the_cause_the_log_gives() -> None:
    arch = _check(WILD / "6-llamacpp-graphs-disabled-gpu-architecture.log")
    [(_, message)] = arch["llamacpp-cuda-graphs-disabled"]
    assert "GPU's architecture" in message and "verify" not in message
    moe = _check(WILD / "6-llamacpp-graphs-disabled-mul-mat-id.log")
    assert "mixture-of-experts" in moe["llamacpp-cuda-graphs-disabled"][0][1]
    spec = _check(WILD / "6-llamacpp-graphs-disabled-batch-size-spec.log")
    assert "verify batch" in spec["llamacpp-cuda-graphs-disabled"][0][1]


def test_a_downgrade_rule_fires_only_on_a_line_that_names_speculation() -> None:
    line = (
        "(EngineCore pid=1) WARNING 01-01 00:00:01 [vllm.py:1] Overriding cudagraph_mode to "
        "PIECEWISE for the KV connector."
    )
    spec = (
        "(APIServer pid=1) INFO 01-01 00:00:00 [x.py:1] non-default args: "
        "{'speculative_config': {'method': 'ngram', 'num_speculative_tokens': 3}}"
    )
    findings, _ = apply_rules(RULES, [parse_log([spec, line], patterns=PATTERNS)])
    assert "capture-downgraded-under-spec" not in {f.rule for f in findings}


def test_eagle3_rule_needs_drafter_evidence() -> None:
    """Acceptance stuck at 1.0 under EAGLE has several causes: without an EAGLE-3 drafter path
    or architecture the cause the rule states is not in the text."""
    found = _check(WILD / "6-sglang-eagle-accept-one-no-drafter-evidence.log")
    assert "sglang-eagle-with-eagle3-drafter" not in found
    assert "acceptance-near-one" in found


_DECODE = (
    "[2026-06-16 08:40:02 TP0] Decode batch, #running-req: 2, #token: 3300, token usage: 0.02, "
    "accept len: 2.71, accept rate: 0.68, cuda graph: False, gen throughput (token/s): 71.40, "
    "#queue-req: 0,"
)


@pytest.mark.parametrize(
    ("command", "blamed", "not_blamed"),
    [
        (
            "python -m sglang.launch_server --model-path m --disable-cuda-graph",
            "--disable-cuda-graph",
            "captured sizes",
        ),
        (
            "python -m sglang.launch_server --model-path m --cuda-graph-max-bs 8",
            "captured sizes",
            "--disable-cuda-graph",
        ),
    ],
)
def test_decode_without_graphs_blames_what_the_settings_show(
    command: str, blamed: str, not_blamed: str
) -> None:
    """Issue 47: with --disable-cuda-graph in the command, the flag is the cause, not the batch."""
    findings, _ = apply_rules(RULES, [parse_log([command, _DECODE])])
    (decode,) = [f for f in findings if f.rule == "decode-without-cuda-graph"]
    assert blamed in decode.message + decode.advice
    assert not_blamed not in decode.message


def test_an_eagle3_drafter_name_alone_is_a_hint_not_a_finding() -> None:
    command = (
        "python -m sglang.launch_server --model-path m --speculative-algorithm EAGLE "
        "--speculative-draft-model-path /d/Qwen3-32B-Eagle3 --speculative-num-draft-tokens 2"
    )
    facts = parse_log([command])
    findings, _ = apply_rules(RULES, [facts])
    assert "sglang-eagle-with-eagle3-drafter" not in {f.rule for f in findings}
    assert any("nothing in the log confirms it" in n for n in facts.notes)
    accept = _DECODE.replace("accept len: 2.71", "accept len: 1.01").replace("False", "True")
    confirmed, _ = apply_rules(RULES, [parse_log([command, accept, accept])])
    assert "sglang-eagle-with-eagle3-drafter" in {f.rule for f in confirmed}
