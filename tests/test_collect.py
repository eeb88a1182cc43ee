"""collect/: runs into bundles against the real llama-server (spec off, n-gram on), resume."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
from collections.abc import Callable
from pathlib import Path

import pytest
import sse_server
from click.testing import CliRunner
from conftest import collect_until
from real_runs import REAL_RUNS

from diagnostic.bundle.store import METRICS_AFTER, METRICS_BEFORE, Bundle, workload_metrics
from diagnostic.cli import main
from diagnostic.common.progress import NullReporter
from diagnostic.engines.metrics import SpecDelta, parse_spec_counters, spec_delta
from diagnostic.errors import BundleError, DiagnosticError
from diagnostic.measure.collect import (
    CollectConfig,
    RunSettings,
    collect,
    collect_run,
    plan_jobs,
    preflight,
    recap,
)
from diagnostic.measure.workloads import builtin
from diagnostic.schema.bundle import Manifest, PlanSpec, RunInfo
from diagnostic.schema.requests import RequestRecord, decode_tps

ROOT = Path(__file__).parents[1]
VLLM = REAL_RUNS / "h200-vllm-0.26"
MAX_TOKENS = 16


# -- settings and order (no server) ----------------------------------------------------------
def test_settings_accept_names_pairs_files_and_one_level(tmp_path: Path) -> None:
    prompts = tmp_path / "mine.jsonl"
    prompts.write_text('{"prompt": "x"}\n')
    settings = RunSettings(
        base_url="http://x",
        workloads=["code", ("tiny", ["a", "b"]), str(prompts), builtin("prose")],
        concurrency=2,
        api_key="sk-secret",
    )
    assert [w.name for w in settings.workloads] == ["code", "tiny", "mine", "prose"]
    assert [p.id for p in settings.workloads[1].prompts] == ["tiny-00", "tiny-01"]
    assert settings.concurrency == [2]
    assert "sk-secret" not in settings.model_dump_json() and "sk-secret" not in repr(settings)
    with pytest.raises(ValueError, match="distinct integers"):
        RunSettings(base_url="http://x", workloads=["code"], concurrency=[1, 1])


def test_jobs_cycle_prompts_in_fixed_order_after_warmups_from_the_end() -> None:
    settings = RunSettings(
        base_url="http://x",
        workloads=[("w", ["p0", "p1", "p2"])],
        requests=4,
        warmup=2,
        concurrency=[1, 4],
    )
    run = RunInfo(arm="a", restart=0)
    warm, measured = plan_jobs(run, settings, settings.workloads[0])
    assert [(j.label.seq, j.prompt, j.label.warmup) for j in warm] == [
        (0, "p2", True),
        (1, "p1", True),
    ]
    assert [(j.label.seq, j.prompt) for j in measured] == [
        (2, "p0"),
        (3, "p1"),
        (4, "p2"),
        (5, "p0"),
    ]
    warm4, measured4 = plan_jobs(run, settings, settings.workloads[0], level=1)
    assert [j.label.seq for j in warm4 + measured4] == list(range(6, 12))
    assert {j.label.concurrency for j in measured4} == {4}


def test_a_block_serving_fewer_requests_than_prompts_rotates_through_them() -> None:
    """m = 2 requests of 5 prompts: block b starts at prompt 2b mod 5, the same for every arm
    of the block (pairing), so 5 blocks measure each prompt exactly twice; the warm-up is the
    prompt before the block's first. Without a block (collect) or with m ≥ n: unchanged."""
    prompts = [f"p{i}" for i in range(5)]
    settings = RunSettings(base_url="http://x", workloads=[("w", prompts)], requests=2, warmup=1)
    w = settings.workloads[0]
    seen = []
    for block in range(5):
        runs = [RunInfo(arm=arm, restart=block, block=block) for arm in ("base", "spec")]
        jobs = [plan_jobs(run, settings, w) for run in runs]
        per_arm = [[j.prompt for j in measured] for _, measured in jobs]
        assert per_arm[0] == per_arm[1] == [f"p{2 * block % 5}", f"p{(2 * block + 1) % 5}"]
        assert jobs[0][0][0].prompt == f"p{(2 * block - 1) % 5}"  # warm-up: the one before
        seen += per_arm[0]
    assert sorted(seen) == sorted(prompts * 2)
    _, plain = plan_jobs(RunInfo(arm="a", restart=3), settings, w)
    assert [j.prompt for j in plain] == ["p0", "p1"]
    whole = settings.model_copy(update={"requests": 5})
    _, blocked = plan_jobs(RunInfo(arm="a", restart=3, block=3), whole, w)
    assert [j.prompt for j in blocked] == prompts


def test_summary_of_real_vllm_requests_matches_their_readme() -> None:
    """Decode tok/s of the recorded H200 runs: README says base ~590, ngram3 ~1070-1170."""
    medians = {}
    for name in ("base", "ngram3"):
        records = [
            _from_recorded(json.loads(line), seq)
            for seq, line in enumerate((VLLM / name / "requests.jsonl").read_text().splitlines())
        ]
        medians[name] = {w.workload: w for w in recap(records)}
    for w in medians["base"].values():
        assert w.decode_tps is not None and 540 < w.decode_tps < 640
        assert w.tokens_per_chunk == pytest.approx(1.0, abs=0.05)
    for w in medians["ngram3"].values():
        assert w.decode_tps is not None and 1000 < w.decode_tps < 1250
        assert w.tokens_per_chunk is not None and w.tokens_per_chunk > 3.5  # 256 in 67-69 chunks


def _from_recorded(row: dict, seq: int) -> RequestRecord:
    times = row["chunk_arrival_s"]
    return RequestRecord(
        arm="a",
        restart=0,
        seq=seq,
        workload=row["workload"],
        prompt_id="p",
        warmup=row["warmup"],
        t_send=0.0,
        ttft_s=times[0],
        e2e_s=row["t_total_s"],
        chunk_times_s=times,
        completion_tokens=row["usage"]["completion_tokens"],
        text=row["text"],
    )


def test_decode_tps_needs_two_chunks_and_a_count() -> None:
    base = {
        "arm": "a",
        "restart": 0,
        "seq": 0,
        "workload": "w",
        "prompt_id": "p",
        "warmup": False,
        "t_send": 0.0,
    }
    assert decode_tps(RequestRecord(**base, chunk_times_s=[0.1], completion_tokens=1)) is None
    assert decode_tps(RequestRecord(**base, chunk_times_s=[0.1, 0.2])) is None
    record = RequestRecord(
        **base, chunk_times_s=[1.0, 2.0], chunk_tokens=[3, 5], completion_tokens=8
    )
    assert decode_tps(record) == pytest.approx(5.0)  # the first chunk's 3 tokens are prefill's


def test_unreachable_server_fails_before_any_bundle(tmp_path: Path, dead_url: str) -> None:
    with pytest.raises(DiagnosticError, match="cannot reach"):
        collect(CollectConfig(base_url=dead_url, out=tmp_path / "b"), reporter=NullReporter())
    assert not (tmp_path / "b").exists()


def test_user_mistakes_fail_before_any_request(tmp_path: Path, dead_url: str) -> None:
    out = tmp_path / "b"
    chat = ROOT / "tests" / "data" / "workloads" / "chat.jsonl"
    with pytest.raises(DiagnosticError, match="chat messages; measure it with --api chat"):
        collect(CollectConfig(base_url=dead_url, out=out, prompts=[chat]), reporter=NullReporter())
    with pytest.raises(DiagnosticError, match="no such log file"):
        bad = CollectConfig(base_url=dead_url, out=out, logs=[tmp_path / "nope.log"])
        collect(bad, reporter=NullReporter())
    result = CliRunner().invoke(
        main, ["collect", dead_url, "--out", str(out), "--api-key-env", "DIAGNOSE_UNSET_VAR"]
    )
    assert result.exit_code == 2 and "DIAGNOSE_UNSET_VAR is not set" in result.output
    assert not out.exists()


def test_collect_run_marks_an_unreachable_server_failed(tmp_path: Path, dead_url: str) -> None:
    bundle = Bundle.create(tmp_path / "b", Manifest(tool_version="t"))
    settings = RunSettings(base_url=dead_url, workloads=["code"])
    run = collect_run(bundle, RunInfo(arm="a", restart=0), settings, reporter=NullReporter())
    assert run.status == "failed" and run.failure and "cannot connect" in run.failure
    assert bundle.find_run("a", 0) == run


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("127.0.0.1:8000", "not an http:// or https:// URL; give the server's base URL with its "
         "scheme, e.g. http://127.0.0.1:8000"),
        ("localhost:8000", "e.g. http://localhost:8000"),
        ("ftp://h:8000", "e.g. http://h:8000"),
        ("http://h:8000/v1", "give the server's base URL, without /v1: http://h:8000 "),
        ("http://h:8000/v1/", "without /v1: http://h:8000 "),
        ("https://h/proxy/v1/chat/completions", "without /v1/chat/completions: https://h/proxy "),
    ],
)  # fmt: skip
def test_a_url_that_is_no_base_url_is_refused_first(tmp_path: Path, url: str, said: str) -> None:
    """Without a scheme httpx raised UnsupportedProtocol; with /v1 every request 404ed."""
    out = tmp_path / "b"
    with pytest.raises(DiagnosticError) as raised:
        collect(CollectConfig(base_url=url, out=out), reporter=NullReporter())
    assert said in str(raised.value)
    assert not out.exists()


@pytest.mark.parametrize(
    ("reply", "said"),
    [
        (
            sse_server.error(404, b"<html><head><title>Not Found</title></head></html>"),
            "does not answer as an OpenAI-compatible server: GET /v1/models answered HTTP 404 "
            "(no content type: 'Not Found'); POST /v1/completions answered HTTP 404",
        ),
        (
            sse_server.error(503, b'{"error": {"code": 503, "message": "Loading model"}}'),
            "is not ready: GET /v1/models answered HTTP 503",
        ),
        (sse_server.normal(), "does not answer as an OpenAI-compatible server"),
    ],
)
def test_a_server_that_does_not_answer_the_api_is_refused_first(
    tmp_path: Path, reply: sse_server.Reply, said: str
) -> None:
    """An HTML error page, a model still loading, an event stream for every path: one error
    naming what answered, before any bundle (the CLI: before any warning or bar)."""
    out = tmp_path / "b"
    with sse_server.serving(reply) as server:
        result = CliRunner().invoke(main, ["collect", server.url, "-o", str(out)])
    assert result.exit_code == 2 and said in result.output, result.output
    assert result.output.startswith("Error: ") and "Warning" not in result.output
    assert not out.exists()


def test_a_model_the_server_refuses_is_named_first(tmp_path: Path) -> None:
    """/v1/models answers, the one-token request does not (a misspelt --model): every request
    of the run would fail the same way."""

    def reply(conn: socket.socket, server: sse_server.Server) -> bool:
        listing = json.dumps({"object": "list", "data": [{"id": "gemma"}]}).encode()
        refused = b'{"error": {"message": "The model `gema` does not exist."}}'
        status, body = (404, refused) if server.requests[-1] else (200, listing)
        conn.sendall(b"HTTP/1.1 %d X\r\nContent-Type: application/json\r\n" % status)
        conn.sendall(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
        return True

    with sse_server.serving(reply) as server, pytest.raises(DiagnosticError) as raised:
        preflight(CollectConfig(base_url=server.url, out=tmp_path / "b", model="gema"))
    message = str(raised.value)
    assert "lists models but refused a one-token request" in message
    assert "'The model `gema` does not exist.'" not in message  # the JSON, quoted whole
    assert "does not exist" in message and "check --model (the server lists gemma)" in message
    assert server.requests[-1]["model"] == "gema" and server.requests[-1]["max_tokens"] == 1


@pytest.mark.parametrize(
    ("status", "hint"),
    [("ok", "is already measured"), ("interrupted", "is already there, interrupted")],
)
def test_collecting_a_run_again_never_suggests_force(
    tmp_path: Path, dead_url: str, status: str, hint: str
) -> None:
    """--force would delete the whole bundle (every arm and restart) to measure one run again:
    the message says what does what the user wants instead; refused before the server is asked."""
    out = tmp_path / "b"
    bundle = Bundle.create(
        out, Manifest(tool_version="t", plan=PlanSpec(workloads=["code", "prose"]))
    )
    for arm, restart in (("baseline", 0), ("baseline", 1), ("ngram-k3", 0)):
        bundle.write_run(RunInfo(arm=arm, restart=restart, status=status))
    with pytest.raises(BundleError) as raised:
        preflight(CollectConfig(base_url=dead_url, out=out, arm="baseline", restart=1))
    message = str(raised.value)
    assert f"run baseline-r1 {hint}" in message and "--force" not in message
    assert ("--resume continues it" in message) == (status != "ok")
    assert "--restart 2 to measure the server again after restarting it" in message
    assert "--arm NAME for another configuration, or -o OTHER for another bundle" in message


def test_a_server_without_metrics_is_said_once(tmp_path: Path) -> None:
    """/metrics is read before and after the run and each workload: one note, not six."""
    notes: list[str] = []

    class Notes(NullReporter):
        def note(self, message: str) -> None:
            notes.append(message)

    bundle = Bundle.create(tmp_path / "b", Manifest(tool_version="t"))
    settings = RunSettings(base_url="", workloads=["code", "prose"], requests=1, warmup=0)
    with sse_server.serving(sse_server.error(404, b"no such path")) as server:
        settings = settings.model_copy(update={"base_url": server.url})
        collect_run(bundle, RunInfo(arm="a", restart=0), settings, reporter=Notes())
    assert len(notes) == 1 and notes[0].startswith("a-r0: GET /metrics answered HTTP 404"), notes


# -- the real server -------------------------------------------------------------------------
def config(url: str, out: Path, **kw: object) -> CollectConfig:
    base = {"requests": 3, "warmup": 1, "max_tokens": MAX_TOKENS}
    return CollectConfig.model_validate({"base_url": url, "out": out, **base, **kw})


def check_run(bundle: Bundle, arm: str, n_records: int) -> list[RequestRecord]:
    run = bundle.find_run(arm, 0)
    assert run is not None and run.status == "ok" and run.ended_at
    assert (run.engine.name, run.model) == ("llamacpp", "gemma")
    assert {"/props", "/slots", "/v1/models"} <= set(run.endpoints)
    assert run.environment["python"] and run.environment["server_is_local"] is True
    for name in (METRICS_BEFORE, METRICS_AFTER):
        assert bundle.run_file(arm, 0, name).read_text().startswith("# HELP")
    records = bundle.read_requests(arm, 0).records
    assert len(records) == n_records
    assert len({(r.workload, r.seq) for r in records}) == n_records
    for r in records:
        assert r.error is None, r.error
        assert r.completion_tokens == MAX_TOKENS and r.token_source == "usage"
        assert 2 <= len(r.chunk_times_s) <= r.completion_tokens  # chunks never outnumber tokens
        assert r.server_timings and r.server_timings["predicted_n"] == MAX_TOKENS
        # Both clocks timed this request; how close they agree depends on the machine's load
        # (benchmarks/client_fidelity.py measures it), so only that both did is asserted.
        tps, own = decode_tps(r), r.server_timings["predicted_per_second"]
        assert tps is not None and tps > 0 and own > 0, (tps, own)
    return records


def run_delta(bundle: Bundle, arm: str) -> SpecDelta:
    """Speculation counter differences between the run's two /metrics snapshots."""
    before, after = (
        parse_spec_counters(bundle.run_file(arm, 0, name).read_text())
        for name in (METRICS_BEFORE, METRICS_AFTER)
    )
    return spec_delta(before, after)


@pytest.mark.engine
def test_spec_off_and_ngram_arms_into_one_bundle(
    tmp_path: Path,
    llama_server: str,
    llama_server_ngram: str,
    server_log: Callable[[str], Path],
) -> None:
    out = tmp_path / "bundle"
    log = server_log(llama_server_ngram)
    nodes = tmp_path / "nodes"  # a glob matching two files: one source each, named by stem
    nodes.mkdir()
    for name in ("gpu-a.log", "gpu-b.log"):
        (nodes / name).write_text(f"{name} --api-key sk-abcdefghijklmnopqrstuvwx\n")
    off = collect(config(llama_server, out), reporter=NullReporter())
    logs = [log, f"node={nodes}/*.log"]
    on = collect(
        config(llama_server_ngram, out, arm="ngram-k3", logs=logs), reporter=NullReporter()
    )
    bundle = Bundle.open(out)
    assert [a.name for a in bundle.manifest.plan.arms] == ["baseline", "ngram-k3"]
    check_run(bundle, "baseline", 8)
    check_run(bundle, "ngram-k3", 8)
    # speculation: off in one, on in the other, seen by the engine itself
    plain, ngram = bundle.find_run("baseline", 0), bundle.find_run("ngram-k3", 0)
    assert plain and plain.server_args["speculative"] is False
    assert ngram and "ngram-simple" in ngram.server_args["speculative.types"]
    assert ngram.sources == {
        "server": "logs/server.log",
        "node-gpu-a": "logs/node-gpu-a.log",
        "node-gpu-b": "logs/node-gpu-b.log",
    }
    assert ngram.logs == list(ngram.sources.values())
    assert "print_timing" in bundle.log_sources(ngram)["server"].read_text()
    node = bundle.log_sources(ngram)["node-gpu-b"].read_text()
    assert node.startswith("gpu-b.log") and "sk-abc" not in node  # redacted like every log
    delta = run_delta(bundle, "ngram-k3")
    assert delta.num_drafts and delta.num_drafts > 0
    assert not run_delta(bundle, "baseline").num_drafts
    # /metrics around each workload's measured requests (after its warm-up): the counters
    # move by exactly what the engine reported per request (issue 18: acceptance per workload)
    records = bundle.read_requests("ngram-k3", 0).records
    for w in ("code", "prose"):
        before, after = (
            parse_spec_counters(
                bundle.run_file("ngram-k3", 0, workload_metrics(w, 0, s)).read_text()
            )
            for s in ("before", "after")
        )
        per_workload = spec_delta(before, after)
        timings = [r.server_timings or {} for r in records if r.workload == w and not r.warmup]
        assert per_workload.num_draft_tokens == sum(t.get("draft_n", 0) for t in timings)
        assert per_workload.num_accepted_tokens == sum(
            t.get("draft_n_accepted", 0) for t in timings
        )
    for arm, summary in (("baseline", off), ("ngram-k3", on)):
        assert summary.status == "ok"
        assert [w.workload for w in summary.workloads] == ["code", "prose"]
        for w in summary.workloads:
            assert (w.requests, w.failures, w.token_sources) == (3, 0, ["usage"])
            assert w.tokens_per_chunk == 1.0  # llama.cpp streams one token per chunk
        # the client's decode speed against the server's own timings: same requests and
        # tokens; the engine's figure is llama.cpp's own clock (Σ(predicted_n − 1) / Σ
        # predicted_ms), the ratio the two figures' (their agreement is load's to change)
        t = summary.engine_timing
        assert t is not None and t.client_requests == t.engine_requests == 8  # warm-ups too
        assert t.engine_tokens == t.client_tokens == 8 * MAX_TOKENS
        own = [r.server_timings or {} for r in bundle.read_requests(arm, 0).records]
        engine = sum(o["predicted_n"] - 1 for o in own) / sum(o["predicted_ms"] for o in own)
        assert t.engine_tps == pytest.approx(1000 * engine)
        assert t.ratio == pytest.approx(t.client_tps / t.engine_tps)
    # every arm measured alike: another --max-tokens is refused
    with pytest.raises(BundleError, match="--max-tokens 16"):
        collect(config(llama_server, out, arm="x", max_tokens=32), reporter=NullReporter())
    with pytest.raises(BundleError, match="run baseline-r0 is already measured"):
        collect(config(llama_server, out), reporter=NullReporter())


@pytest.mark.engine
def test_resume_after_sigkill_completes_without_duplicates(
    tmp_path: Path, llama_server: str
) -> None:
    out = tmp_path / "bundle"
    args = [
        llama_server,
        "--out",
        str(out),
        "--workloads",
        "code",
        "--requests",
        "5",
        "--warmup",
        "1",
        "--max-tokens",
        str(MAX_TOKENS),
    ]
    requests = out / "runs" / "baseline-r0" / "requests.jsonl"
    child = collect_until(args, requests, 2)
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    with requests.open("ab") as fh:  # a record cut mid-write, as a kill can leave it
        fh.write(b'{"arm": "baseline", "restart": 0, "se')
    before = Bundle.open(out).find_run("baseline", 0)
    assert before is not None and before.status == "running"

    result = CliRunner().invoke(main, ["collect", *args, "--resume"])
    assert result.exit_code == 0, result.output
    assert "decode" in result.output and re.search(r"Resumed: [2-5] requests", result.output)
    bundle = Bundle.open(out)
    records = check_run(bundle, "baseline", 6)
    assert sorted(r.seq for r in records) == list(range(6))
    sends = [r.t_send for r in records]
    assert sends == sorted(sends)  # one clock across the kill
    again = CliRunner().invoke(main, ["collect", *args])  # complete: --resume has nothing to do
    assert again.exit_code == 2 and "run baseline-r0 is already measured" in again.output
    assert "--restart 1" in again.output and "--force" not in again.output


@pytest.mark.engine
def test_concurrency_levels_keep_every_stream(tmp_path: Path, llama_server: str) -> None:
    bundle = Bundle.create(tmp_path / "b", Manifest(tool_version="t"))
    settings = RunSettings(
        base_url=llama_server,
        workloads=[("tiny", ["The sky is", "Rivers flow"])],
        requests=3,
        warmup=0,
        max_tokens=8,
        concurrency=[1, 2],
    )
    run = collect_run(bundle, RunInfo(arm="c", restart=0), settings, reporter=NullReporter())
    assert run.status == "ok"
    records = bundle.read_requests("c", 0).records
    assert sorted(r.seq for r in records) == list(range(6))
    assert [r.concurrency for r in sorted(records, key=lambda r: r.seq)] == [1, 1, 1, 2, 2, 2]
    assert all(r.error is None and r.completion_tokens == 8 for r in records)


def test_collect_prints_the_centre_the_report_uses(tmp_path: Path) -> None:
    """One centre everywhere (issue 18): collect's decode tok/s for a run is the mean of its
    measured requests — the restart summary behind the report's geometric means — not a
    median that the report never shows."""
    records = [
        _from_recorded(json.loads(line), seq)
        for seq, line in enumerate((VLLM / "ngram3" / "requests.jsonl").read_text().splitlines())
    ]
    measured = [r for r in records if not r.warmup and r.error is None]
    for w in recap(records):
        values = [decode_tps(r) for r in measured if r.workload == w.workload]
        assert w.decode_tps == pytest.approx(sum(v for v in values if v) / len(values))
