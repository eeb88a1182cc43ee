"""Checklists: shipped YAML, loader errors, automatic checks on real-log bundles, state, export."""

from __future__ import annotations

import io
import json
import shutil
import textwrap
from pathlib import Path
from typing import Any

import pytest
from checklist_bundles import ENVIRONMENT, GOOD_ARMS, H200, make_bundle, record
from pypdf import PdfReader

from diagnostic.bundle.store import Bundle
from diagnostic.checklist.auto import AUTO_CHECKS, CheckResult, evaluate_check
from diagnostic.checklist.lists import (
    STATE_FILE,
    Checklist,
    ChecklistState,
    available_checklists,
    checklist_summary,
    evaluate,
    load_checklist,
    load_checklists,
    read_state,
    render_markdown,
    render_pdf,
    run_checklist,
    update_state,
    write_export,
)
from diagnostic.errors import BundleError, ChecklistError
from diagnostic.logcheck.stage import check_paths
from diagnostic.schema.bundle import ArmSpec, EngineInfo, LaunchInfo

SAMPLES = Path(__file__).parents[1] / "samples"

# -- the shipped lists --------------------------------------------------------------------


def test_shipped_lists_load_in_the_order_of_the_engagement() -> None:
    lists = load_checklists()
    assert [c.name for c in lists] == ["pre-visit", "onsite", "deliverable"]
    assert all(len(c.items) >= 10 for c in lists)


def test_every_automatic_check_is_used_by_the_onsite_list() -> None:
    used = {item.check for item in load_checklist("onsite").items if item.check}
    assert used == set(AUTO_CHECKS)


def test_onsite_list_covers_the_day() -> None:
    text = " ".join(i.text + i.why for i in load_checklist("onsite").items).lower()
    for topic in ("startup log", "every node", "a/a", "draft length", "capture", "per-position"):
        assert topic in text, topic


def test_loader_reads_only_top_level_yaml(tmp_path: Path) -> None:
    _write(tmp_path / "mine.yaml", _minimal())
    (tmp_path / "rules").mkdir()
    _write(tmp_path / "rules" / "capture.yaml", "id: not-a-checklist\n")
    assert available_checklists(tmp_path) == ["mine"]
    assert load_checklist("mine", tmp_path).name == "mine"


# -- loader errors ------------------------------------------------------------------------


def _minimal(item: str = "") -> str:
    return textwrap.dedent(
        """\
        title: A list
        items:
          - id: a-one
            text: Do one thing.
            why: Because.
            verify: Look.
        """
    ) + textwrap.indent(textwrap.dedent(item), "  ")


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def _error(tmp_path: Path, text: str) -> str:
    _write(tmp_path / "bad.yaml", text)
    with pytest.raises(ChecklistError) as info:
        load_checklist("bad", tmp_path)
    message = str(info.value)
    assert str(tmp_path / "bad.yaml") in message
    return message


def test_yaml_syntax_error_names_the_line(tmp_path: Path) -> None:
    message = _error(tmp_path, _minimal("- id: a-two\n  text: broken: here\n"))
    assert "bad.yaml:8:" in message and "invalid YAML" in message


def test_unknown_key_names_the_item(tmp_path: Path) -> None:
    item = "- id: a-two\n  text: t\n  why: w\n  verify: v\n  chek: metrics_snapshots\n"
    message = _error(tmp_path, _minimal(item))
    assert "item 'a-two'" in message and "chek" in message and "unknown key" in message


def test_duplicate_id_is_refused(tmp_path: Path) -> None:
    message = _error(tmp_path, _minimal("- id: a-one\n  text: t\n  why: w\n  verify: v\n"))
    assert "'a-one'" in message and "duplicate id" in message


def test_unknown_check_lists_the_known_ones(tmp_path: Path) -> None:
    item = "- id: a-two\n  text: t\n  why: w\n  verify: v\n  check: gpu_is_fast\n"
    message = _error(tmp_path, _minimal(item))
    assert "'gpu_is_fast'" in message and "metrics_snapshots" in message


def test_duplicate_yaml_key_is_refused(tmp_path: Path) -> None:
    message = _error(tmp_path, _minimal("- id: a-two\n  text: t\n  text: u\n  why: w\n"))
    assert "duplicate key 'text'" in message


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("- just a list\n", "expected a mapping"),
        ("title: t\nitems: []\n", "items"),
        ("schema_version: 9\ntitle: t\nitems: []\n", "newer"),
        (_minimal("- id: Bad_Id\n  text: t\n  why: w\n  verify: v\n"), "item 'Bad_Id': id"),
        (_minimal("- id: a-two\n  text: t\n  why: w\n"), "item 'a-two': verify"),
        (
            _minimal(
                "- id: a-two\n  text: t\n  why: w\n  verify: v\n  applies_when: {engines: [x]}"
            ),
            "applies_when.engines",
        ),
    ],
)
def test_malformed_files_name_what_is_wrong(tmp_path: Path, text: str, expected: str) -> None:
    assert expected in _error(tmp_path, text)


def test_unknown_list_names_the_available_ones(tmp_path: Path) -> None:
    _write(tmp_path / "mine.yaml", _minimal())
    with pytest.raises(ChecklistError, match="available: mine"):
        load_checklist("yours", tmp_path)


# -- automatic checks ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def good(tmp_path_factory: pytest.TempPathFactory) -> Bundle:
    """A complete bundle (read only): 5 arms × 3 restarts × 2 workloads × 15 requests."""
    bundle = make_bundle(tmp_path_factory.mktemp("good") / "b")
    check_paths([bundle.path])  # findings.json from every run's log
    return bundle


def test_a_complete_bundle_passes_every_check(good: Bundle) -> None:
    results = {name: evaluate_check(name, good) for name in AUTO_CHECKS}
    assert results.pop("logs_every_worker").status == "not_applicable"
    # synthetic requests beside real /metrics: not the requests vLLM timed
    assert results.pop("client_matches_engine").status == "not_applicable"
    assert {n: r.status for n, r in results.items()} == dict.fromkeys(results, "done")
    assert "vllm 0.26.0" in results["engine_version_recorded"].evidence
    assert "all 30 (run, workload)" in results["requests_per_restart"].evidence
    assert "baseline-aa repeats baseline (3 + 3 runs)" in results["aa_arm_present"].evidence
    assert "2, 3, 4" in results["draft_length_sweep"].evidence
    assert "all 450 measured requests" in results["equal_output_lengths"].evidence


def test_an_empty_bundle_has_nothing_done(tmp_path: Path) -> None:
    bundle = make_bundle(tmp_path / "b", arms=())
    for name in AUTO_CHECKS:
        result = evaluate_check(name, bundle)
        assert result.status in {"not_done", "not_applicable"}, name
        assert result.evidence


def _bundle(tmp_path: Path, *, restarts: int = 1, **kw: Any) -> Bundle:
    return make_bundle(tmp_path / "b", restarts=restarts, **kw)


def test_missing_engine_version_names_the_run(tmp_path: Path) -> None:
    bundle = _bundle(tmp_path, arms=GOOD_ARMS[:2])
    info = bundle.find_run("baseline-aa", 0)
    assert info is not None
    bundle.write_run(
        info.model_copy(update={"engine": info.engine.model_copy(update={"version": None})})
    )
    result = evaluate_check("engine_version_recorded", bundle)
    assert result.status == "not_done"
    assert result.evidence == "no version in 1 of 2 runs: baseline-aa-r0"


def test_missing_startup_log_and_metrics(tmp_path: Path) -> None:
    bundle = _bundle(tmp_path, arms=GOOD_ARMS[:1], logs=False, metrics=False)
    assert evaluate_check("startup_log_every_run", bundle).status == "not_done"
    assert evaluate_check("metrics_snapshots", bundle).status == "not_done"
    bundle.write_run_file("baseline", 0, "server.log", (H200 / "base" / "server.log").read_bytes())
    bundle.write_run_file("baseline", 0, "metrics_before.prom", "# empty\n")
    assert evaluate_check("startup_log_every_run", bundle).status == "done"
    assert "1 of 1 runs" in evaluate_check("metrics_snapshots", bundle).evidence


def test_logs_listed_by_the_run_are_the_ones_looked_at(tmp_path: Path) -> None:
    bundle = _bundle(tmp_path, arms=GOOD_ARMS[:1], logs=False, run={"logs": ["node1.log"]})
    bundle.write_run_file("baseline", 0, "node1.log", "INFO started\n")
    assert evaluate_check("startup_log_every_run", bundle).status == "done"


def test_too_few_requests_names_run_workload_and_count(tmp_path: Path) -> None:
    bundle = _bundle(tmp_path, arms=GOOD_ARMS[:1], requests=14)
    result = evaluate_check("requests_per_restart", bundle)
    assert result.status == "not_done"
    assert (
        result.evidence
        == "2 of 2 (run, workload) below 15: baseline-r0 code: 14, baseline-r0 prose: 14"
    )


def test_warmup_and_failed_requests_do_not_count(tmp_path: Path) -> None:
    bundle = _bundle(tmp_path, arms=GOOD_ARMS[:1], workloads=("code",))
    records = [record("baseline", 0, "code", seq) for seq in range(14)]
    records.append(record("baseline", 0, "code", 14, warmup=True))
    records.append(record("baseline", 0, "code", 15, error="connection reset"))
    lines = "".join(r.model_dump_json() + "\n" for r in records)
    bundle.run_file("baseline", 0, "requests.jsonl").write_text(lines)
    assert evaluate_check("requests_per_restart", bundle).evidence.endswith("code: 14")


def test_restarts_count_only_usable_runs(tmp_path: Path) -> None:
    bundle = _bundle(tmp_path, arms=GOOD_ARMS[:2], restarts=3)
    assert evaluate_check("restarts_per_arm", bundle).status == "done"
    info = bundle.find_run("baseline", 2)
    assert info is not None
    bundle.write_run(info.model_copy(update={"status": "failed"}))
    result = evaluate_check("restarts_per_arm", bundle)
    assert (result.status, result.evidence) == (
        "not_done",
        "restarts with measured requests below 3: baseline 2",
    )


def test_a_planned_arm_without_runs_has_zero_restarts(tmp_path: Path) -> None:
    bundle = _bundle(tmp_path, arms=GOOD_ARMS[:1], restarts=3)
    manifest = bundle.manifest.model_copy(deep=True)
    manifest.plan.arms.append(ArmSpec(name="eagle3-k3", params={"k": 3}))
    bundle.write_manifest(manifest)
    assert evaluate_check("restarts_per_arm", bundle).evidence.endswith("eagle3-k3 0")


def test_aa_arm(tmp_path: Path) -> None:
    no_aa = _bundle(tmp_path, arms=[GOOD_ARMS[0], GOOD_ARMS[3]])
    assert "no arm of the plan sets aa_of" in evaluate_check("aa_arm_present", no_aa).evidence
    manifest = no_aa.manifest.model_copy(deep=True)
    manifest.plan.arms.append(ArmSpec(name="again", aa_of="baseline"))
    no_aa.write_manifest(manifest)
    result = evaluate_check("aa_arm_present", no_aa)
    assert result.status == "not_done" and "again = baseline" in result.evidence


def test_spec_on_and_off(tmp_path: Path) -> None:
    only_on = _bundle(tmp_path, arms=[GOOD_ARMS[3], ArmSpec(name="mystery")])
    result = evaluate_check("spec_on_and_off", only_on)
    assert result.status == "not_done"
    assert result.evidence.startswith("no spec-off run; speculation unknown for mystery")
    manifest = only_on.manifest.model_copy(deep=True)
    manifest.plan.arms[1] = ArmSpec(name="mystery", params={"k": 0})  # k = 0 is speculation off
    only_on.write_manifest(manifest)
    result = evaluate_check("spec_on_and_off", only_on)
    assert (result.status, result.evidence) == ("done", "spec off: mystery; spec on: ngram-k3")


def test_draft_length_sweep_needs_three_values(tmp_path: Path) -> None:
    bundle = _bundle(tmp_path, arms=[GOOD_ARMS[0], GOOD_ARMS[2], GOOD_ARMS[3]])
    result = evaluate_check("draft_length_sweep", bundle)
    assert (result.status, result.evidence.rsplit(": ", 1)[1]) == ("not_done", "2, 3")


def test_workloads_and_same_prompts(tmp_path: Path) -> None:
    bundle = _bundle(tmp_path, arms=GOOD_ARMS[:2], workloads=("code",))
    assert evaluate_check("workloads_measured", bundle).status == "not_done"
    assert evaluate_check("same_prompts", bundle).status == "done"
    path = bundle.run_file("baseline-aa", 0, "requests.jsonl")
    path.write_text(path.read_text().replace('"code-7"', '"code-99"'))
    result = evaluate_check("same_prompts", bundle)
    assert (result.status, result.evidence) == (
        "not_done",
        "prompt set differs from the others in code: baseline-aa-r0",
    )


def test_workloads_missing_in_one_arm(tmp_path: Path) -> None:
    bundle = _bundle(tmp_path, arms=GOOD_ARMS[:2])
    path = bundle.run_file("baseline-aa", 0, "requests.jsonl")
    path.write_text(
        "".join(line + "\n" for line in path.read_text().splitlines() if "prose" not in line)
    )
    assert evaluate_check("workloads_measured", bundle).evidence == "baseline-aa lacks prose"


def test_output_lengths(tmp_path: Path) -> None:
    bundle = _bundle(tmp_path, arms=GOOD_ARMS[:1], workloads=("code",))
    path = bundle.run_file("baseline", 0, "requests.jsonl")
    short = record("baseline", 0, "code", 16, completion_tokens=90, finish_reason="stop")
    unknown = record("baseline", 0, "code", 17, completion_tokens=None)
    path.write_text(
        path.read_text() + short.model_dump_json() + "\n" + unknown.model_dump_json() + "\n"
    )
    result = evaluate_check("equal_output_lengths", bundle)
    assert result.status == "not_done"
    assert result.evidence == (
        "2 of 17 measured requests not at max_tokens: "
        "baseline-r0 code#16 90/256, baseline-r0 code#17 unknown/256"
    )


def test_environment(tmp_path: Path) -> None:
    bundle = _bundle(tmp_path, arms=GOOD_ARMS[:3])
    result = evaluate_check("environment_recorded", bundle)
    assert result == CheckResult(
        "done", "GPU and driver recorded in all 3 runs (NVIDIA H200, driver 580.159.04)"
    )
    info = bundle.find_run("ngram-k2", 0)
    assert info is not None
    bundle.write_run(info.model_copy(update={"environment": {"gpus": [{"name": "NVIDIA H200"}]}}))
    result = evaluate_check("environment_recorded", bundle)
    assert result.evidence == "no GPU and driver recorded in 1 of 3 runs: ngram-k2-r0"
    bundle.write_run(info.model_copy(update={"environment": CPU_RUN}))
    result = evaluate_check("environment_recorded", bundle)
    assert result.status == "done" and result.evidence.startswith(
        "GPU and driver recorded in 2 of 3"
    )
    assert "; 1 of 3 runs on a machine without a GPU" in result.evidence


CPU_RUN = {"host": "ci", "gpus": [], "nvidia_smi": "not found", "server_is_local": True}


@pytest.mark.parametrize(
    ("environment", "said"),
    [
        ({"host": "ci-runner", "gpus": [], "python": "3.12"}, "no GPU and driver recorded"),
        ({**CPU_RUN, "server_is_local": False}, "the server ran on another machine"),
        ({**ENVIRONMENT, "server_is_local": False}, "the server ran on another machine"),
        ({**CPU_RUN, "nvidia_smi": "failed"}, "no GPU and driver recorded"),
    ],
)
def test_environment_ticks_only_what_the_runs_show(
    tmp_path: Path, environment: dict[str, Any], said: str
) -> None:
    """No GPU listed and nothing saying the server ran here without one; or a server on
    another machine (the GPU listed, if any, is the measuring machine's): not done."""
    bundle = _bundle(tmp_path, arms=GOOD_ARMS[:2])
    for run in bundle.runs():
        bundle.write_run(run.model_copy(update={"environment": environment}))
    result = evaluate_check("environment_recorded", bundle)
    assert result.status == "not_done" and result.evidence.startswith(said), result.evidence
    assert "baseline-r0, baseline-aa-r0" in result.evidence


def test_cpu_runs_have_no_gpu_to_record() -> None:
    """The recorded CPU sample (llama.cpp, `gpus: []`): nothing claims a GPU was recorded."""
    result = evaluate_check("environment_recorded", Bundle.open(SAMPLES / "llamacpp-cpu-gemma3"))
    assert result.status == "not_applicable"
    assert result.evidence.startswith("no GPU to record: all 27 runs on a machine without a GPU")


def test_runs_whose_requests_all_failed_show_nothing_about_their_arm(tmp_path: Path) -> None:
    bundle = _bundle(tmp_path, arms=GOOD_ARMS)
    for arm in ("baseline-aa", "ngram-k4"):
        path = bundle.run_file(arm, 0, "requests.jsonl")
        failed = [
            record(arm, 0, w, seq, error="HTTP 404", completion_tokens=None)
            for w in ("code", "prose")
            for seq in range(1, 16)
        ]
        path.write_text("".join(r.model_dump_json() + "\n" for r in failed))
    aa = evaluate_check("aa_arm_present", bundle)
    assert aa.status == "not_done" and aa.evidence.endswith("not both arms have usable runs")
    sweep = evaluate_check("draft_length_sweep", bundle)
    assert (sweep.status, sweep.evidence.rsplit(": ", 1)[1]) == ("not_done", "2, 3")


def test_findings_json_must_cover_every_run(tmp_path: Path) -> None:
    bundle = _bundle(tmp_path, arms=GOOD_ARMS[:1])
    check_paths([bundle.path])
    assert evaluate_check("logs_checked", bundle).status == "done"
    later = make_bundle(tmp_path / "more", arms=GOOD_ARMS[2:3], restarts=1)
    shutil.copytree(later.path / "runs" / "ngram-k2-r0", bundle.path / "runs" / "ngram-k2-r0")
    result = evaluate_check("logs_checked", bundle)
    assert result == CheckResult(
        "not_done",
        "findings.json has not read the logs of 1 of 2 runs with logs (ngram-k2-r0): "
        "run `diagnose check BUNDLE` again",
    )


def test_launch_command_from_the_run_or_the_plan(tmp_path: Path) -> None:
    bundle = _bundle(tmp_path, arms=[ArmSpec(name="baseline", speculative=False)])
    assert evaluate_check("launch_command_recorded", bundle).status == "not_done"
    info = bundle.find_run("baseline", 0)
    assert info is not None
    bundle.write_run(info.model_copy(update={"launch": LaunchInfo(command="vllm serve m")}))
    assert evaluate_check("launch_command_recorded", bundle).status == "done"


def _worker_log(*workers: str) -> str:
    """vLLM lines as a TP=2 server prints them (prefixes: docs/engines.md), ANSI colour included."""
    base = (H200 / "ngram3" / "server.log").read_text()
    lines = [
        f"\x1b[1;36m({w} pid={4100 + i})\x1b[0;0m INFO 11-29 10:00:0{i} [gpu_model_runner.py:4512] "
        "Graph capturing finished in 6 secs, took 0.52 GiB"
        for i, w in enumerate(workers)
    ]
    return base + "\n".join(lines) + "\n"


def test_logs_from_every_worker(tmp_path: Path) -> None:
    bundle = _bundle(
        tmp_path, arms=GOOD_ARMS[3:4], run={"server_args": {"tensor_parallel_size": 2}}
    )
    bundle.write_run_file("ngram-k3", 0, "server.log", _worker_log("Worker_TP0"))
    result = evaluate_check("logs_every_worker", bundle)
    assert (result.status, result.evidence) == (
        "not_done",
        "workers seen in the logs below the parallel size: ngram-k3-r0 1/2",
    )
    bundle.write_run_file("ngram-k3", 0, "server.log", _worker_log("Worker_TP0", "Worker_TP1"))
    assert evaluate_check("logs_every_worker", bundle).status == "done"


def test_sglang_workers_and_pipeline_stages(tmp_path: Path) -> None:
    args = {"tp_size": "2", "pp_size": 2}
    bundle = _bundle(tmp_path, arms=GOOD_ARMS[3:4], run={"server_args": args})
    lines = [
        f"[2025-05-02 16:13:35 PP{p} TP{t}] Capture cuda graph end." for p in (0, 1) for t in (0, 1)
    ]
    bundle.write_run_file("ngram-k3", 0, "server.log", "\n".join(lines[:3]) + "\n")
    assert evaluate_check("logs_every_worker", bundle).evidence.endswith("ngram-k3-r0 3/4")
    bundle.write_run_file("ngram-k3", 0, "server.log", "\n".join(lines) + "\n")
    assert evaluate_check("logs_every_worker", bundle).status == "done"


def test_single_gpu_runs_make_the_worker_check_not_applicable(tmp_path: Path) -> None:
    bundle = _bundle(tmp_path, arms=GOOD_ARMS[:1], run={"server_args": {"tensor_parallel_size": 1}})
    assert evaluate_check("logs_every_worker", bundle).status == "not_applicable"


def test_findings_json_marks_the_logs_checked(tmp_path: Path) -> None:
    bundle = _bundle(tmp_path, arms=GOOD_ARMS[:1])
    assert "run `diagnose check BUNDLE`" in evaluate_check("logs_checked", bundle).evidence


def test_items_for_another_engine_are_not_applicable(tmp_path: Path) -> None:
    bundle = _bundle(tmp_path, arms=GOOD_ARMS[:1])
    info = bundle.find_run("baseline", 0)
    assert info is not None
    bundle.write_run(
        info.model_copy(update={"engine": EngineInfo(name="llamacpp", version="b7000")})
    )
    statuses = {s.id: s for s in evaluate(load_checklist("onsite"), Bundle.open(bundle.path))}
    assert statuses["os-worker-logs"].status == "not_applicable"
    assert statuses["os-worker-logs"].evidence == "engine llamacpp; applies to sglang, trtllm, vllm"
    assert statuses["os-algorithm"].label == "not applicable"


# -- manual state -------------------------------------------------------------------------


def test_tick_and_note_round_trip(tmp_path: Path) -> None:
    bundle = _bundle(tmp_path, arms=GOOD_ARMS[:1])
    onsite = load_checklist("onsite")
    update_state(
        bundle, onsite, tick=["os-gpu-idle"], notes=[("os-gpu-idle", "clocks at 1980 MHz")]
    )
    again = Bundle.open(bundle.path)
    state = read_state(again)
    item = state.get("onsite", "os-gpu-idle")
    assert item.ticked and item.ticked_at and item.note == "clocks at 1980 MHz" and item.noted_at
    raw = json.loads((bundle.path / STATE_FILE).read_text())
    assert raw["schema_version"] == 1 and "os-gpu-idle" in raw["lists"]["onsite"]
    status = {s.id: s for s in evaluate(onsite, again)}["os-gpu-idle"]
    assert (status.status, status.note) == ("done", "clocks at 1980 MHz")
    assert status.evidence.startswith("ticked by hand at ")
    update_state(again, onsite, untick=["os-gpu-idle"], notes=[("os-gpu-idle", "")])
    item = read_state(again).get("onsite", "os-gpu-idle")
    assert (item.ticked, item.note) == (False, None)
    assert {s.id: s for s in evaluate(onsite, again)}["os-gpu-idle"].status == "not_done"


def test_notes_are_redacted(tmp_path: Path) -> None:
    bundle = _bundle(tmp_path, arms=GOOD_ARMS[:1])
    secret = "sk-proj-" + "a1B2c3D4e5F6g7H8i9J0"
    update_state(bundle, load_checklist("onsite"), notes=[("os-access", f"key {secret} works")])
    assert secret not in (bundle.path / STATE_FILE).read_text()


def test_automatic_and_unknown_items_cannot_be_ticked(tmp_path: Path) -> None:
    bundle = _bundle(tmp_path, arms=GOOD_ARMS[:1])
    onsite = load_checklist("onsite")
    with pytest.raises(ChecklistError, match="checked automatically"):
        update_state(bundle, onsite, tick=["os-startup-log"])
    with pytest.raises(ChecklistError, match=r"no item 'os-nope'.*valid ids: os-access"):
        update_state(bundle, onsite, notes=[("os-nope", "x")])
    assert not (bundle.path / STATE_FILE).exists()


def test_ticks_need_a_bundle() -> None:
    with pytest.raises(ChecklistError, match="stored in a bundle"):
        run_checklist("onsite", None, tick=["os-gpu-idle"])


def test_a_newer_state_file_is_refused(tmp_path: Path) -> None:
    bundle = _bundle(tmp_path, arms=GOOD_ARMS[:1])
    (bundle.path / STATE_FILE).write_text(json.dumps({"schema_version": 2, "lists": {}}))
    with pytest.raises(BundleError, match="newer"):
        read_state(bundle)
    assert ChecklistState().schema_version == 1


def test_summary_covers_every_list_in_order(good: Bundle) -> None:
    summary = checklist_summary(good)
    assert summary[0].list_name == "pre-visit"
    assert {s.list_name for s in summary} == {"pre-visit", "onsite", "deliverable"}
    assert len(summary) == sum(len(c.items) for c in load_checklists())
    assert all(s.status and s.evidence for s in summary)
    onsite = checklist_summary(good, names=["onsite"])
    assert {s.id: s.label for s in onsite}["os-restarts"] == "done"


# -- export -------------------------------------------------------------------------------


def test_markdown_export(tmp_path: Path) -> None:
    out = write_export(load_checklist("pre-visit"), "md", tmp_path / "sub" / "pre-visit.md")
    text = out.read_text()
    checklist = load_checklist("pre-visit")
    assert text.startswith(f"# {checklist.title}\n")
    for item in checklist.items:
        assert f"(`{item.id}`)" in text
    assert "*Why:*" in text and "*Verify:*" in text and "## Access" in text


def test_markdown_with_a_bundle_shows_status(good: Bundle) -> None:
    onsite = load_checklist("onsite")
    text = render_markdown(onsite, evaluate(onsite, good))
    assert "*Status:* done — usable restarts per arm: baseline 3" in text
    assert "*Status:* not applicable — no run records a tensor" in text


def test_pdf_export_opens_and_carries_the_list(tmp_path: Path) -> None:
    out = write_export(load_checklist("pre-visit"), "pdf", tmp_path / "pre-visit.pdf")
    reader = PdfReader(io.BytesIO(out.read_bytes()))
    assert 1 <= len(reader.pages) <= 6
    text = " ".join(page.extract_text() for page in reader.pages)
    assert "Before the visit" in text and "pv-data-policy" in text and "Why:" in text


def test_pdf_escapes_notes(tmp_path: Path) -> None:
    bundle = _bundle(tmp_path, arms=GOOD_ARMS[:1])
    update_state(bundle, load_checklist("deliverable"), notes=[("dl-bundle", "<b>sent</b> & done")])
    deliverable = load_checklist("deliverable")
    out = write_export(deliverable, "pdf", tmp_path / "d.pdf", evaluate(deliverable, bundle))
    text = " ".join(p.extract_text() for p in PdfReader(str(out)).pages)
    assert "<b>sent</b> & done" in text and "not done" in text


def test_checklist_model_rejects_unknown_fields() -> None:
    with pytest.raises(ValueError, match="extra"):
        Checklist.model_validate({"title": "t", "items": [], "colour": "red"})


def test_pdf_escapes_backticked_markup(tmp_path: Path) -> None:
    item = {
        "id": "x-one",
        "text": "Run `<img src=file:///etc/passwd>` now",
        "why": "w",
        "verify": "v",
    }
    checklist = Checklist.model_validate({"name": "x", "title": "T & <i>U</i>", "items": [item]})
    text = PdfReader(io.BytesIO(render_pdf(checklist))).pages[0].extract_text()
    assert "<img src=file:///etc/passwd>" in text and "T & <i>U</i>" in text


def test_log_names_cannot_leave_the_run_folder(tmp_path: Path) -> None:
    bundle = _bundle(
        tmp_path, arms=GOOD_ARMS[:1], logs=False, run={"logs": ["../../manifest.json"]}
    )
    assert evaluate_check("startup_log_every_run", bundle).status == "not_done"


def test_client_clock_against_the_engines_on_the_real_samples(tmp_path: Path) -> None:
    samples = Path(__file__).resolve().parent.parent / "samples"
    gpu = evaluate_check("client_matches_engine", Bundle.open(samples / "vllm-h200-validation"))
    assert gpu.status == "done" and "over 15 of 16 runs" in gpu.evidence
    # a client 10% slow on one run: llama.cpp's own timings say the answers came faster
    copy = tmp_path / "cpu"
    shutil.copytree(samples / "llamacpp-cpu-gemma3", copy)
    path = copy / "runs" / "ngram-k3-r1" / "requests.jsonl"
    lines = []
    for line in path.read_text().splitlines():
        rec = json.loads(line)
        rec["server_timings"]["predicted_ms"] /= 1.1
        lines.append(json.dumps(rec))
    path.write_text("\n".join(lines) + "\n")
    cpu = evaluate_check("client_matches_engine", Bundle.open(copy))
    assert cpu.status == "not_done" and "ngram-k3-r1 (0.9" in cpu.evidence
