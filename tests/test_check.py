"""diagnostic.logcheck and `diagnose check`: files, folders, bundles, exit codes, JSON contract."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from diagnostic.bundle.store import Bundle
from diagnostic.cli import main
from diagnostic.common.progress import NullReporter
from diagnostic.errors import DiagnosticError
from diagnostic.logcheck.stage import FINDINGS_FILE, check_paths
from diagnostic.schema.bundle import Manifest, RunInfo
from diagnostic.schema.logfacts import CheckReport, LogFacts
from tests.engine_logs import CASES, REAL_RUNS

VLLM = REAL_RUNS / "h200-vllm-0.26"
SAMPLES = Path(__file__).parents[1] / "samples"
MLA = REAL_RUNS / "h200-vllm-0.26-mla"


def make_bundle(root: Path, logs: dict[str, Path | None]) -> Path:
    bundle = Bundle.create(root, Manifest(tool_version="test"))
    for arm, log in logs.items():
        bundle.write_run(RunInfo(arm=arm, restart=0, status="ok"))
        if log is not None:
            bundle.write_run_file(arm, 0, "server.log", log.read_bytes())
    return root


def test_folder_of_logs_labels_runs_by_folder() -> None:
    report = check_paths([MLA])
    assert [r.label for r in report.runs] == ["mla-fa-base", "mla-triton-base", "mla-triton-ngram3"]
    assert report.exit_code() == 1
    assert report.findings[0].severity == "error"  # errors first


def test_bundle_runs_are_checked_and_findings_json_written(tmp_path: Path) -> None:
    root = make_bundle(
        tmp_path / "b",
        {
            "baseline": MLA / "mla-triton-base" / "server.log",
            "ngram-k3": MLA / "mla-triton-ngram3" / "server.log",
            "remote": None,  # collected without access to the server's log
        },
    )
    notes: list[str] = []

    class Notes:
        def start(self, label: str, total: int | None) -> None: ...
        def advance(self, label: str, steps: int = 1, status: str | None = None) -> None: ...
        def note(self, message: str) -> None:
            notes.append(message)

    report = check_paths([root], reporter=Notes())
    assert [r.label for r in report.runs] == ["baseline-r0", "ngram-k3-r0"]
    stored = Bundle.open(root).read_json(FINDINGS_FILE, CheckReport)
    assert stored == report
    assert {f.rule for f in stored.findings} >= {"spec-capture-differs"}
    assert any("remote-r0" in n and "no server.log" in n for n in notes)


def test_bundle_without_any_server_log(tmp_path: Path) -> None:
    root = make_bundle(tmp_path / "b", {"baseline": None})
    with pytest.raises(DiagnosticError, match=r"no run of this bundle has a server\.log"):
        check_paths([root])


@pytest.mark.parametrize(
    ("content", "message"),
    [(b"", "the file is empty"), (b"hello\nworld\n", "nothing recognised.*looked for")],
)
def test_unusable_input_is_an_error(tmp_path: Path, content: bytes, message: str) -> None:
    log = tmp_path / "x.log"
    log.write_bytes(content)
    with pytest.raises(DiagnosticError, match=message):
        check_paths([log])


def test_unusable_log_beside_good_ones_is_a_warning(tmp_path: Path) -> None:
    (tmp_path / "empty.log").write_bytes(b"")
    shutil.copy(VLLM / "base" / "server.log", tmp_path / "base.log")
    report = check_paths([tmp_path])
    assert [(f.rule, f.severity) for f in report.findings] == [("unusable-log", "warning")]
    assert report.exit_code() == 0


def test_missing_path_and_empty_folder(tmp_path: Path) -> None:
    with pytest.raises(DiagnosticError, match="no such file or folder"):
        check_paths([tmp_path / "nope.log"])
    with pytest.raises(DiagnosticError, match=r"no \*\.log file"):
        check_paths([tmp_path])


def test_cli_exit_codes(tmp_path: Path) -> None:
    runner = CliRunner()
    ok = runner.invoke(main, ["check", str(VLLM / "base" / "server.log")])
    assert ok.exit_code == 0, ok.output
    bad = runner.invoke(main, ["check", str(MLA / "mla-triton-ngram3" / "server.log")])
    assert bad.exit_code == 1
    (tmp_path / "e.log").write_bytes(b"")
    unusable = runner.invoke(main, ["check", str(tmp_path / "e.log")])
    assert unusable.exit_code == 2
    assert "Error:" in unusable.output and "empty" in unusable.output


def test_cli_json_is_the_design_contract() -> None:
    result = CliRunner().invoke(main, ["check", "--json", str(MLA)])
    assert result.exit_code == 1
    data = json.loads(result.output)
    assert {"runs", "findings", "schema_version"} <= set(data)
    run = next(r for r in data["runs"] if r["path"].endswith("mla-triton-ngram3/server.log"))
    assert (run["engine"], run["version"]) == ("vllm", "0.26.0")
    assert set(run["spec"]) == {"enabled", "method", "num_draft_tokens", "drafter"}
    assert run["spec"] == {
        "enabled": True,
        "method": "ngram",
        "num_draft_tokens": 3,
        "drafter": None,
    }
    assert (run["capture"]["configured"], run["capture"]["resolved"]) == (
        "FULL_AND_PIECEWISE",
        "PIECEWISE",
    )
    assert all(set(e) == {"line", "text"} for e in run["capture"]["evidence"])
    for finding in data["findings"]:
        assert {"rule", "severity", "message", "evidence", "advice"} <= set(finding)
        assert finding["severity"] in ("info", "warning", "error")


def test_cli_human_output_has_runs_comparison_and_findings() -> None:
    # COLUMNS, not console.width: setting the shared console's width would outlive the test
    result = CliRunner().invoke(
        main,
        ["check", str(VLLM / "base" / "server.log"), str(VLLM / "ngram3" / "server.log"), str(MLA)],
        env={"COLUMNS": "200"},
    )
    out = result.output
    assert "Runs: what the engine resolved" in out
    assert "FULL_AND_PIECEWISE → PIECEWISE" in out  # on one line where the width allows
    assert "mla-triton-ngram3: capture bars" in out.replace("\n", " ") or "capture bars" in out
    assert "Speculation vs no speculation" in out and "DIFFERENT" in out
    assert "ERROR capture-downgraded-under-spec" in out
    assert "L39:" in out and "→" in out


def test_written_cases_check_together() -> None:
    report = check_paths(sorted(CASES.glob("*.log")))
    assert len(report.runs) == len(list(CASES.glob("*.log")))
    assert all(r.engine != "unknown" for r in report.runs)


LONE_DOWNGRADE = (
    "(EngineCore_DP0 pid=2291) WARNING 10-14 16:02:57 [gpu_model_runner.py:3687] "
    "CUDAGraphMode.FULL_AND_PIECEWISE is not supported with spec-decode for attention backend "
    "FlashInferMetadataBuilder (support: AttentionCGSupport.UNIFORM_SINGLE_TOKEN_DECODE); "
    "setting cudagraph_mode=PIECEWISE\n"
)


def test_cli_reads_a_paste_from_stdin() -> None:
    result = CliRunner().invoke(main, ["check", "-", "--json"], input=LONE_DOWNGRADE)
    assert result.exit_code == 1, result.output
    run = json.loads(result.output)["runs"][0]
    assert (run["path"], run["label"], run["engine"]) == ("<stdin>", "stdin", "vllm")
    assert run["capture"]["resolved"] == "PIECEWISE"
    assert "excerpt ends before capture finished" in run["capture"]["reason"]
    assert run["sources"]["spec.enabled"] == {
        "kind": "startup",
        "line": 1,
        "text": LONE_DOWNGRADE.strip(),
    }
    nothing = CliRunner().invoke(main, ["check", "-"], input="meeting notes\n")
    assert nothing.exit_code == 2
    assert "nothing recognised" in nothing.output and "launch commands" in nothing.output


def test_cli_engine_option_overrides_detection(tmp_path: Path) -> None:
    log = tmp_path / "paste.txt"
    log.write_text("Capture cuda graph end. Time elapsed: 3.1 s. mem usage=1.0 GB.\n")
    detected = json.loads(CliRunner().invoke(main, ["check", str(log), "--json"]).output)
    assert detected["runs"][0]["engine"] == "sglang"
    forced = CliRunner().invoke(main, ["check", str(log), "--json", "--engine", "vllm"])
    assert json.loads(forced.output)["runs"][0]["engine"] == "vllm"
    bad = CliRunner().invoke(main, ["check", str(log), "--engine", "tgi"])
    assert bad.exit_code == 2


def test_pasted_command_is_what_was_configured() -> None:
    report = check_paths([CASES / "excerpts" / "3-vllm-serve-spec-config-eagle3.log"])
    run = report.runs[0]
    assert run.sources["spec.method"].kind == "command"
    assert run.capture.resolved == "UNKNOWN"  # a command says nothing about what was resolved


def _nodes_bundle(root: Path, logs: dict[str, Path]) -> Path:
    """One run whose log sources are the given files (v2 layout: logs/<source>.log)."""
    bundle = Bundle.create(root, Manifest(tool_version="test"))
    sources = {name: f"logs/{name}.log" for name in logs}
    bundle.write_run(RunInfo(arm="tp16", restart=0, status="ok", sources=sources))
    for name, log in logs.items():
        bundle.write_log("tp16", 0, name, log.read_bytes())
    return root


def test_nodes_of_one_run_that_resolved_differently_are_an_error(tmp_path: Path) -> None:
    # head: vLLM 0.26 over Ray, all four workers captured FULL_AND_PIECEWISE; node2: the
    # H200 n-gram run that fell to PIECEWISE: another flag and another mode on one "server"
    root = _nodes_bundle(
        tmp_path / "b",
        {
            "head": CASES / "vllm-v1-0.26-ray-two-nodes-agree.log",
            "node2": MLA / "mla-triton-ngram3" / "server.log",
        },
    )
    result = CliRunner().invoke(main, ["check", "--json", str(root)])
    assert result.exit_code == 1, result.output
    data = json.loads(result.stdout)
    [table] = data["log_sources"]
    assert table["run_id"] == "tp16-r0"
    assert [(s["source"], s["resolved"]) for s in table["sources"]] == [
        ("head", "FULL_AND_PIECEWISE"),
        ("node2", "PIECEWISE"),
    ]
    assert table["sources"][0]["per_worker"]["Worker_DP0_TP3 pid=7202 ip=10.0.0.2"] == (
        "FULL_AND_PIECEWISE"
    )
    assert table["differences"] == [
        "capture mode: FULL_AND_PIECEWISE on head (4 workers); PIECEWISE on node2",
        "speculation: head off, node2 ngram k=3",
    ]
    [nodes] = [f for f in data["findings"] if f["rule"] == "nodes-disagree"]
    assert nodes["severity"] == "error" and "tp16-r0" in nodes["message"]
    assert any(e["text"].startswith("node2: ") for e in nodes["evidence"])
    assert [r["label"] for r in data["runs"]] == ["tp16-r0/head", "tp16-r0/node2"]
    # two nodes of one run are not a spec/no-spec pair
    assert not [f for f in data["findings"] if f["rule"] == "spec-capture-differs"]


def test_nodes_that_agree_give_no_finding_and_an_empty_launch_log_is_skipped(
    tmp_path: Path,
) -> None:
    head = CASES / "vllm-v1-0.26-ray-two-nodes-agree.log"
    empty = tmp_path / "empty.log"
    empty.write_bytes(b"")  # an ssh launch printed nothing: the node logs say it all
    root = _nodes_bundle(tmp_path / "b", {"server": empty, "node1": head, "node2": head})
    notes: list[str] = []

    class Notes(NullReporter):
        def note(self, message: str) -> None:
            notes.append(message)

    report = check_paths([root], reporter=Notes())
    assert [r.source for r in report.runs] == ["node1", "node2"]
    assert not report.log_sources[0].differences
    assert not [f for f in report.findings if f.rule in ("nodes-disagree", "unusable-log")]
    assert any("server.log: empty" in n for n in notes)
    assert any("RAY_DEDUP_LOGS=0" in n for n in report.runs[0].notes)


def test_one_ray_log_names_each_node_s_workers(tmp_path: Path) -> None:
    # The head's log carries every Ray worker's lines; the remote node's two workers fell to
    # PIECEWISE (FlashInfer there): before Ray prefixes were read, all four looked alike.
    report = check_paths([CASES / "vllm-v1-0.11-ray-two-nodes-workers-disagree.log"])
    [run] = report.runs
    remote = {w: m for w, m in run.capture.per_worker.items() if "ip=10.0.0.2" in w}
    assert set(remote.values()) == {"PIECEWISE"} and len(remote) == 2
    assert "workers-disagree" in {f.rule for f in report.findings}


def test_the_platform_of_each_run_in_json_and_text() -> None:
    """Issue 32 item 3: the platform per run; a CPU pair gives no CUDA-graph finding."""
    wild = CASES / "wild"
    logs = [str(wild / "4-vllm-cpu-0.32-ngram-eager.log"), str(VLLM / "ngram3" / "server.log")]
    data = json.loads(CliRunner().invoke(main, ["check", "--json", *logs]).output)
    assert [r["platform"] for r in data["runs"]] == ["cpu", "cuda"]
    cpu_run = data["runs"][0]["path"]
    assert not [f for f in data["findings"] if f["run"] == cpu_run]
    text = CliRunner().invoke(main, ["check", logs[0]]).output
    # the Engine cell reads "vllm 0.32.0 on cpu" (folded by the table at 80 columns)
    assert "vllm 0.32.0" in text and re.search(r"\bon cpu\b", text)
    assert "No findings." in text


def test_unread_facts_are_listed_under_the_run() -> None:
    log = CASES / "wild" / "7-trtllm-run-py-draft-len.log"
    out = CliRunner().invoke(main, ["check", str(log)], terminal_width=200).output
    assert "not in the log: speculation method" in out.replace("\n", " ")


def test_a_findings_json_written_before_the_platform_still_reads() -> None:
    """Bundles keep the findings.json an older check wrote; its `backend` is the platform."""
    old = {"runs": [{"path": "server.log", "engine": "vllm", "backend": "cpu"}], "findings": []}
    report = CheckReport.model_validate(old)
    assert report.runs[0].platform == "cpu"
    none = CheckReport.model_validate({"runs": [{"path": "s.log", "backend": None}]})
    assert none.runs[0].platform == "unknown"


@pytest.mark.parametrize("sample", ["llamacpp-cpu-gemma3", "vllm-h200-mla"])
def test_80_columns_keep_names_whole_and_say_a_repeated_finding_once(
    tmp_path: Path, sample: str
) -> None:
    """At 80 columns every run name, engine, method and capture mode stays whole (the table
    wraps between words), and a finding of several runs is printed once, naming them."""
    bundle = tmp_path / sample
    shutil.copytree(SAMPLES / sample, bundle)  # check writes findings.json into it
    env = {**os.environ, "COLUMNS": "80", "NO_COLOR": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "diagnostic", "check", str(bundle)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert done.returncode in (0, 1), done.stderr
    lines = done.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    report = CheckReport.model_validate_json((bundle / FINDINGS_FILE).read_text())
    table = [line for line in lines if line.startswith("│")]
    for facts in report.runs:  # each run's row names it, whole
        assert sum(f"│ {facts.label} " in line for line in table) == 1, facts.label
    words = {w for f in report.runs for w in (facts_words(f))}
    text = " ".join(done.stdout.split())
    for word in words:
        assert word in text, word
    for finding in {f.rule for f in report.findings}:
        runs = [f for f in report.findings if f.rule == finding]
        heads = [re.match(r"(ERROR|WARNING|INFO) ([\w-]+)", line) for line in lines]
        assert sum(h is not None and h[2] == finding for h in heads) == 1, finding
        if len(runs) > 1:
            assert f"in {len(runs)} runs: " in text or f"in all {len(runs)} runs" in text


def facts_words(facts: LogFacts) -> set[str]:
    """The words of a run's table row that must not be cut: engine, method, capture modes."""
    found = {facts.engine, facts.capture.resolved}
    found |= {w for w in (facts.version, facts.spec.method, facts.capture.configured) if w}
    return found


def test_an_earlier_start_attempt_is_read_but_is_no_run(tmp_path: Path) -> None:
    """The noise sample's base-r0 started twice (a first attempt's log ends before capture):
    that log is read and shown, counted apart from the 10 runs, and draws no finding, since
    the server it started never served the run."""
    from diagnostic.schema.logfacts import EARLIER_ATTEMPT

    sample = SAMPLES / "vllm-h200-gemma3-noise"
    report = check_paths([sample], write=False)
    attempts = [r for r in report.runs if r.source == EARLIER_ATTEMPT]
    assert [r.label for r in attempts] == ["base-r0/server.attempt1.log"]
    assert len(report.runs) - len(attempts) == len(Bundle.open(sample).runs()) == 10
    assert not any(f.run == attempts[0].path for f in report.findings)
    copy = tmp_path / "noise"
    shutil.copytree(sample, copy)  # check writes findings.json into the bundle it reads
    out = CliRunner().invoke(main, ["check", str(copy)])
    assert "10 run(s) and 1 earlier start attempt(s)" in " ".join(out.output.split())
