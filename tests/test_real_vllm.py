"""The second real engine: vLLM 0.32 (CPU build) serving Gemma 3 270M, live (scripts/real-vllm).

One start per configuration for the whole module (no speculation, n-gram k = 3, started side
by side), then collect, check and report on what they served; a two-arm sweep restarts its own.
Nothing here asserts a speed, a rate or a verdict: the machine's load changes those.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import run_diagnose
from pypdf import PdfReader

from diagnostic.analyse.core import analyse
from diagnostic.bundle.store import Bundle
from diagnostic.engines.metrics import parse_spec_counters, spec_delta
from diagnostic.logcheck.stage import check_paths
from tests.real_vllm import (
    NGRAM_CONFIG,
    SCRIPT,
    START_TIMEOUT_S,
    K,
    free_port,
    installed,
    start_all,
)
from tests.real_vllm import stop_all as stop_servers

pytestmark = pytest.mark.vllm
ARMS = {"base": [], f"ngram-k{K}": ["--speculative-config", NGRAM_CONFIG]}
MAX_TOKENS = 24
REQUESTS = 2


@pytest.fixture(scope="module")
def servers() -> Iterator[dict[str, tuple[int, str]]]:
    installed()
    running = start_all(ARMS)
    yield running
    stop_servers(running)


@pytest.fixture(scope="module")
def bundle(servers: dict[str, tuple[int, str]], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One bundle, one run per arm, collected by the CLI (its log found by asking the host)."""
    out = tmp_path_factory.mktemp("vllm") / "b"
    for arm, (_, url) in servers.items():
        done = run_diagnose(
            "collect", url, "-o", str(out), "--arm", arm, "--requests", str(REQUESTS),
            "--warmup", "1", "--max-tokens", str(MAX_TOKENS),
        )  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
        said = done.stdout + done.stderr
        assert "Server log:" in said and "listening on" in said  # found by asking the host
    return out


def test_collect_counts_tokens_from_usage_with_and_without_speculation(bundle: Path) -> None:
    b = Bundle.open(bundle)
    runs = {r.arm: r for r in b.runs()}
    assert set(runs) == set(ARMS)
    for arm, run in runs.items():
        assert run.status == "ok"
        assert (run.engine.name, run.engine.version) == ("vllm", "0.32.0")
        records = [
            json.loads(line)
            for line in b.run_file(arm, 0, "requests.jsonl").read_text().splitlines()
        ]
        assert len(records) == 2 * (REQUESTS + 1)  # code and prose, one warm-up each
        for rec in records:
            assert rec["error"] is None, rec["error"]
            assert rec["token_source"] == "usage"
            assert rec["completion_tokens"] == MAX_TOKENS  # ignore_eos: every request full
            assert rec["prompt_tokens"] > 0


@pytest.mark.parametrize("workload", ["code", "prose"])
def test_metrics_around_each_workload_give_its_acceptance(bundle: Path, workload: str) -> None:
    b = Bundle.open(bundle)

    def delta(arm: str):  # type: ignore[no-untyped-def]
        texts = [
            b.run_file(arm, 0, f"metrics_{workload}_{side}.prom").read_text()
            for side in ("before", "after")
        ]
        return spec_delta(*(parse_spec_counters(t) for t in texts))

    spec = delta(f"ngram-k{K}")
    assert spec.engine == "vllm" and spec.num_drafts and spec.num_drafts > 0
    assert spec.num_draft_tokens is not None and spec.num_accepted_tokens is not None
    assert spec.num_accepted_tokens <= spec.num_draft_tokens <= K * spec.num_drafts
    assert len(spec.accepted_per_pos) == K
    assert not delta("base").num_drafts  # no speculation, no drafts
    arm = next(a for a in analyse(b).arms if a.id == f"ngram-k{K}")
    row = next(w for w in arm.workloads if w.workload == workload)
    (restart,) = row.restarts
    assert restart.acceptance_source == "metrics around the workload"
    assert restart.acceptance_length == pytest.approx(spec.mean_acceptance_length)
    assert 1.0 <= restart.acceptance_length <= K + 1


def test_check_reads_the_runs_own_logs(bundle: Path) -> None:
    report = check_paths([bundle])
    runs = {r.label: r for r in report.runs}
    assert set(runs) == {f"{arm}-r0" for arm in ARMS}
    for label, run in runs.items():
        assert (run.engine, run.version, run.platform) == ("vllm", "0.32.0", "cpu"), label
        assert run.capture.resolved == "NONE" and "CPU" in run.capture.reason
        assert "enable-scale-out" not in run.requested
    spec = runs[f"ngram-k{K}-r0"].spec
    assert (spec.enabled, spec.method, spec.num_draft_tokens) == (True, "ngram", K)
    assert runs["base-r0"].spec.enabled is False
    # No false finding: no graphs to lose on a CPU, both runs on the V1 runner alike, async
    # scheduling off on both (the CPU platform's doing).
    assert report.findings == []


def test_report_renders_a_pdf(bundle: Path, tmp_path: Path) -> None:
    pdf = tmp_path / "report.pdf"
    done = run_diagnose("report", str(bundle), "-o", str(pdf))
    assert done.returncode == 0, done.stdout + done.stderr
    text = "\n".join(page.extract_text() for page in PdfReader(pdf).pages)
    assert "vllm 0.32.0" in text.lower() and f"ngram-k{K}" in text


def test_a_two_arm_sweep_restarts_vllm_per_arm(tmp_path: Path) -> None:
    installed()
    # A flag after `--` in both arms: their launches then differ only in speculation.
    launch = f"{SCRIPT} start --foreground --port {{port}} -- --served-model-name gemma-3-270m"
    spec = NGRAM_CONFIG.replace("{", "{{").replace("}", "}}").replace('"', '\\"')
    plan = tmp_path / "plan.toml"
    plan.write_text(
        "[plan]\nrestarts = 1\nrequests = 1\nwarmup = 1\nmax_tokens = 16\n"
        f'workloads = ["code"]\nbaseline = "base"\nport = {free_port()}\n'
        f"health_timeout_s = {START_TIMEOUT_S}\n"
        f'[[arms]]\nname = "base"\nlaunch = "{launch}"\n'
        f'[[arms]]\nname = "ngram-k{K}"\nlaunch = "{launch} --speculative-config \'{spec}\'"\n'
    )
    done = run_diagnose("sweep", str(plan), "-o", str(tmp_path / "b"), timeout=2 * START_TIMEOUT_S)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    b = Bundle.open(tmp_path / "b")
    assert sorted((r.arm, r.status) for r in b.runs()) == [("base", "ok"), (f"ngram-k{K}", "ok")]
    report = check_paths([tmp_path / "b"])
    assert {r.platform for r in report.runs} == {"cpu"}
    ngram = next(r for r in report.runs if r.label == f"ngram-k{K}-r0")
    assert (ngram.spec.method, ngram.spec.num_draft_tokens) == ("ngram", K)
    assert report.findings == []
    # The baseline is matched by the launches (they differ only in speculation).
    compared = [c for c in analyse(b).comparisons if c.kind == "spec"]
    assert compared and all(c.baseline == "base" and c.matched for c in compared)
