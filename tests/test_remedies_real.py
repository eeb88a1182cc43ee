"""End to end on the real CPU engine: a sweep whose n-gram arm never drafts (llama.cpp's
size-m 1), `check` finds it, `diagnose plan` writes the next plan from its remedies, `sweep`
runs that plan unchanged, and the report leads with the before-and-after."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from conftest import THREADS, free_port, run_diagnose
from pypdf import PdfReader
from test_sweep import SERVER

from diagnostic.logcheck.stage import check_paths
from diagnostic.measure.plan.spec import load_plan
from diagnostic.measure.sweep import sweep

NEVER_DRAFTS = " --spec-type ngram-simple --spec-ngram-simple-size-n 2 --spec-ngram-simple-size-m 1"


def _diagnose(*args: str) -> subprocess.CompletedProcess[str]:
    return run_diagnose(*args, env=THREADS)


def _first_day(tmp_path: Path) -> Path:
    plan = tmp_path / "day.toml"
    plan.write_text(
        f"[plan]\nrestarts = 2\nrequests = 2\nwarmup = 1\nmax_tokens = 16\n"
        f'workloads = ["code"]\nport = {free_port()}\nhealth_timeout_s = 300\nseed = 3\n\n'
        f'[[arms]]\nname = "baseline"\nlaunch = "{SERVER}"\n\n'
        f'[[arms]]\nname = "ngram-k1"\nlaunch = "{SERVER}{NEVER_DRAFTS}"\n'
    )
    bundle = tmp_path / "day1"
    summary = sweep(load_plan(plan), out=bundle)
    assert summary.count("ok") == 4, [o.failure for o in summary.outcomes]
    return bundle


@pytest.mark.usefixtures("real_env")
def test_check_plan_sweep_report(tmp_path: Path) -> None:
    day1 = _first_day(tmp_path)
    found = check_paths([day1])
    assert any(f.rule == "spec-never-drafted" for f in found.findings)

    done = _diagnose(
        "plan", str(day1), "-o", str(tmp_path / "next.toml"), "--requests", "2", "--restarts", "3"
    )
    assert done.returncode == 0, done.stderr
    text = (tmp_path / "next.toml").read_text()
    assert "# Tests spec-never-drafted on ngram-k1" in text
    plan = load_plan(tmp_path / "next.toml")
    assert plan.options.as_found == "ngram-k1" and plan.baseline == "baseline"
    remedy = plan.arm("size-m2-spec")
    assert "--spec-ngram-simple-size-m 2" in remedy.launch and remedy.speculative
    assert any(a.aa_of == "baseline" for a in plan.arms)

    day2 = tmp_path / "day2"
    summary = sweep(plan, out=day2)  # the plan as written, unchanged
    assert summary.count("ok") == len(plan.arms) * 3, [o.failure for o in summary.outcomes]
    manifest = json.loads((day2 / "manifest.json").read_text())
    assert manifest["plan"]["as_found"] == "ngram-k1"

    assert _diagnose("check", str(day2)).returncode in (0, 1)
    done = _diagnose("report", str(day2), "-o", str(tmp_path / "r.pdf"))
    assert done.returncode == 0, done.stderr
    page1 = " ".join(PdfReader(tmp_path / "r.pdf").pages[0].extract_text().split())
    assert "the answer: as found → after the fix" in page1.lower()
    assert "As found: " in page1 and "(ngram-k1)" in page1 and "On code " in page1
    # after the fix against as found, or as found kept when nothing measured beats it
    assert (
        "than as found" in page1 or "nothing measured is shown to beat the configuration" in page1
    )
    verified = _diagnose("verify", str(day2), str(tmp_path / "r.pdf"))
    assert verified.returncode == 0, verified.stdout + verified.stderr


def test_collect_names_the_arm_as_found(
    tmp_path: Path, llama_server: str, llama_server_ngram: str
) -> None:
    """A bundle collected by hand names its as-found arm with `collect --as-found`; the
    report then leads with it (whatever the verdicts: one restart decides none)."""
    from diagnostic.common.progress import NullReporter
    from diagnostic.measure.collect import CollectConfig, collect

    out = tmp_path / "b"
    tiny = {"requests": 2, "warmup": 1, "max_tokens": 8, "workloads": ["code"]}
    for url, arm, found in ((llama_server, "baseline", False), (llama_server_ngram, "ngram", True)):
        config = CollectConfig(base_url=url, out=out, arm=arm, as_found=found, **tiny)
        assert collect(config, reporter=NullReporter()).status == "ok"
    assert json.loads((out / "manifest.json").read_text())["plan"]["as_found"] == "ngram"
    done = _diagnose("report", str(out), "-o", str(tmp_path / "r.html"))
    assert done.returncode == 0, done.stderr
    html = (tmp_path / "r.html").read_text()
    assert 'class="answer"' in html and "As found: " in html and "On code " in html
