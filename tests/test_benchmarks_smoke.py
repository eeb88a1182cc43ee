"""Smoke tests of benchmarks/: the paced server keeps its count and pace; the scripts run small."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import httpx
import numpy as np
import pytest

BENCHMARKS = Path(__file__).parents[1] / "benchmarks"


def load_benchmark(name: str) -> ModuleType:
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def paced() -> ModuleType:
    return load_benchmark("paced_server")


def _events(body: bytes) -> list[str]:
    return [line[6:] for line in body.decode().split("\n") if line.startswith("data: ")]


@pytest.mark.parametrize("tpc", [1, 4])
def test_paced_server_streams_the_asked_tokens_at_the_asked_pace(
    paced: ModuleType, tpc: int
) -> None:
    payload = {
        "prompt": f"smoke-{tpc}",
        "max_tokens": 40,
        "stream": True,
        "stream_options": {"include_usage": True, "continuous_usage_stats": True},
        "pace_rate": 400,
        "pace_tpc": tpc,
    }
    with paced.PacedServer() as server, httpx.Client(base_url=server.url) as client:
        response = client.post("/v1/completions", json=payload)
        emits = client.get("/v1/emits").json()
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/event-stream"
    events = _events(response.content)
    assert events[-1] == "[DONE]"
    *content, usage_event = [httpx.Response(200, content=e).json() for e in events[:-1]]
    assert usage_event["choices"] == []
    assert usage_event["usage"]["completion_tokens"] == 40
    assert len(content) == 40 // tpc
    assert all(c["choices"][0]["text"].count("x") == tpc for c in content)
    assert [c["usage"]["completion_tokens"] for c in content] == list(range(tpc, 41, tpc))
    assert content[-1]["choices"][0]["finish_reason"] == "length"
    record = emits[f"smoke-{tpc}"]
    assert sum(record["tokens"]) == 40 and len(record["times"]) == 40 // tpc
    # The pace: never ahead of the schedule (a lower bound only; no timing assertion).
    dt = tpc / 400
    assert record["times"][-1] >= record["t0"] + (len(content) - 1) * dt
    assert paced.decode_rate(record["times"], record["tokens"]) > 0


def test_paced_server_without_usage_request_sends_no_usage(paced: ModuleType) -> None:
    payload = {"prompt": "plain", "max_tokens": 3, "stream": True, "pace_rate": 1000}
    with paced.PacedServer() as server, httpx.Client(base_url=server.url) as client:
        events = _events(client.post("/v1/completions", json=payload).content)
        missing = client.get("/nowhere")
    assert events[-1] == "[DONE]" and len(events) == 4
    assert all("usage" not in e for e in events[:-1])
    assert missing.status_code == 404


def test_paced_server_never_sends_a_chunk_early(paced: ModuleType) -> None:
    # Chunk i leaves no earlier than t0 + i·dt (the absolute schedule).
    payload = {"prompt": "clock", "max_tokens": 20, "stream": True, "pace_rate": 200}
    with paced.PacedServer() as server, httpx.Client(base_url=server.url) as client:
        client.post("/v1/completions", json=payload)
        record = client.get("/v1/emits").json()["clock"]
    times, t0 = record["times"], record["t0"]
    assert len(times) == 20
    assert all(t >= t0 + i * 0.005 for i, t in enumerate(times))


def test_decode_rate_counts_tokens_after_the_first_chunk(paced: ModuleType) -> None:
    assert paced.decode_rate([0.0, 0.5, 1.0], [4, 4, 4]) == 8.0
    assert paced.decode_rate([1.0], [4]) is None


def test_telemetry_overhead_runs_one_tiny_point_both_ways() -> None:
    bench = load_benchmark("telemetry_overhead")
    paced = load_benchmark("paced_server")
    args = type("Args", (), {"requests": 2, "tokens": 16, "interval": 0.1})()
    with paced.PacedServer() as server:
        off = bench.run_once(server.url, 2000.0, 1, False, 0, args)
        on = bench.run_once(server.url, 2000.0, 1, True, 0, args)
    assert off.requests == on.requests == 2 and off.samples == 0 and on.samples > 0
    assert "| 1 × 2000 tok/s | on |" in bench.table([off, on])


def test_client_fidelity_measures_one_tiny_point() -> None:
    fidelity = load_benchmark("client_fidelity")
    paced = load_benchmark("paced_server")
    point = fidelity.Point(2000.0, 4, 2)
    clients = [*fidelity.CLIENTS, f"{fidelity.FORCED}2"]  # collect's path over 2 processes too
    with paced.PacedServer() as server:
        for client in clients:
            result = fidelity.measure(server.url, point, client, 0, 2, 32)
            assert result.failed == 0 and len(result.true) == 2
            assert all(m > 0 for m in result.measured)
            assert len(result.lags_ms) == 2 * 32 // 4
            assert result.cpu is not None
    assert result.cpu.workers > 0  # the two worker processes' CPU, counted once joined
    row = fidelity.summarise(point, [result])
    assert "| 2000 | 4 | 2 |" in fidelity.table([row], [clients[-1]])
    many = fidelity.grid(False, many_rates=[10.0], many=[1024])
    assert [p.key for p in many[-2:]] == ["r10-t1-c1024", "r10-t4-c1024"]
    assert many[-1].goal() == (1.0, 2.0)


def test_time_to_verdict_runs_a_few_simulations(capsys: pytest.CaptureFixture[str]) -> None:
    ttv = load_benchmark("time_to_verdict")
    ttv.main(["--sims", "20", "--restart-cv", "0.05", "--check", "3"])
    out = capsys.readouterr().out
    assert "| 5% | 14 blocks (28) | 5/9/14/18" in out and "adaptive 5/9/14/18" in out
    assert "30 decisions re-checked with stats.paired_ratio_ci" in out


def test_time_to_verdict_adaptive_stops_at_a_planned_look() -> None:
    ttv = load_benchmark("time_to_verdict")
    import numpy as np

    rng = np.random.default_rng(1)
    big = ttv.Scenario(effect=0.5, restart_cv=0.01, request_cv=0.01)
    logs = ttv.simulate(rng, big, 50, 12)
    blocks, codes = ttv.adaptive(logs[0] - logs[1], (4, 8, 12), 0.02, 0.02)
    assert (blocks == 4).all() and (codes == ttv.WIN).all()
    none = ttv.Scenario(effect=0.0, restart_cv=0.3, request_cv=0.1)
    logs = ttv.simulate(rng, none, 50, 12)
    blocks, codes = ttv.adaptive(logs[0] - logs[1], (4, 8, 12), 0.02, 0.02)
    assert set(blocks) <= {4, 8, 12} and (codes[blocks < 12] != ttv.INCONCLUSIVE).all()


def test_time_to_verdict_takes_more_looks_than_pocock_tabulates(
    capsys: pytest.CaptureFixture[str],
) -> None:
    ttv = load_benchmark("time_to_verdict")
    looks = ["4", "6", "8", "10", "12"]
    ttv.main(["--sims", "20", "--restart-cv", "0.05", "--check", "0", "--looks", *looks])
    assert "4/6/8/10/12" in capsys.readouterr().out.split("\n")[2]


def test_sequential_bound_reproduces_pococks_constants() -> None:
    bound = load_benchmark("sequential_bound")
    import numpy as np

    theta = 1.959964 + 1.281552  # z(0.025) + z(0.10): 90% power at the fixed plan's size
    ts, cs, size = bound.plan(bound.Path(1001), theta, 0.9, 0.5, np.arange(1, 4) / 4)
    # Jennison & Turnbull, Table 2.1 / 2.3: c = 2.361, R = 1.183 for 4 looks, α 0.05, β 0.1
    assert cs == pytest.approx([2.361] * 4, abs=0.01)
    assert ts[-1] == pytest.approx(1.183, abs=0.01)
    assert 0.68 < size < 0.71


def test_time_on_site_runs_a_few_simulations(capsys: pytest.CaptureFixture[str]) -> None:
    """Tiny run, both m* rules on shared prompt effects: a table per rule and the summary;
    the vectorised verdicts and futility stops were re-checked against stats (it exits
    otherwise)."""
    tos = load_benchmark("time_on_site")
    argv = ["--sims", "30", "--restart-cv", "0.05", "--request-cv", "0.03", "--prompts"]
    argv += ["shared", "--effect", "0.1", "0.2", "--max-blocks", "40", "--check", "2"]
    tos.main(argv)
    out = capsys.readouterr().out
    assert "m* rule: raw" in out and "m* rule: pairing" in out
    assert out.count("| 5% | 3% | shared |") == 2
    assert "| raw | all |" in out and "| pairing | all |" in out


def test_time_on_site_rotates_prompts_as_collect_does() -> None:
    """Blocks 1-2 of 15 requests over 20 prompts: 0-14, then 15-19 and 0-9. Block 3 (b = 3)
    of 5 requests starts at 3 · 5 mod 20 = 15; 25 requests (≥ n) start at 0 and serve
    prompts 0-4 twice."""
    tos = load_benchmark("time_on_site")
    prompts = tos.first_prompts(20)
    assert prompts[0].tolist() == list(range(15))
    assert prompts[1].tolist() == [*range(15, 20), *range(10)]
    effect = np.arange(20.0)[None, None, :]
    m = np.array([[15, 15, 5, 5], [15, 15, 5, 25]])
    got = tos.window_mean(np.repeat(effect, 2, axis=0), m)
    assert got[0, 0, 3] == pytest.approx(np.mean(range(15, 20)))
    assert got[1, 0, 3] == pytest.approx((sum(range(20)) + sum(range(5))) / 25)


def test_the_secret_corpus_is_what_the_redaction_benchmark_generates() -> None:
    redaction = load_benchmark("redaction")
    stored = [json.loads(line) for line in redaction.SHAPES.read_text().splitlines()]
    assert stored == redaction.generate()  # regenerate with `redaction.py --write`
    assert all(redaction.leaked(case) == [] for case in stored)


def test_verdict_power_runs_small(capsys: pytest.CaptureFixture[str]) -> None:
    power = load_benchmark("verdict_power")
    argv = ["--sims", "2", "--null-sims", "2", "--cv", "0.05", "--arms", "4", "--effects", "0.2"]
    assert power.main([*argv, "--designs", "fixed", "--startup-s", "3000"]) == 0
    table = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| 4 |")]
    assert len(table) == 1 and table[0].count("%") == 3  # restart CV, one power, false decisions


def test_family_coverage_runs_small(capsys: pytest.CaptureFixture[str]) -> None:
    coverage = load_benchmark("family_coverage")
    coverage.main(["--families", "2", "--arms", "3", "--blocks", "3"])
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ")][1:]
    assert [r.split(" | ")[0].removeprefix("| ") for r in rows] == list(coverage.CONDITIONS)


def test_logscan_wild_prints_every_engine(capsys: pytest.CaptureFixture[str]) -> None:
    wild = load_benchmark("logscan_wild")
    assert wild.main(["--about", "Third round"]) == 0
    out = capsys.readouterr().out
    rows = [line.split(" | ")[0].removeprefix("| ") for line in out.splitlines()]
    assert {"vllm", "sglang", "llamacpp", "trtllm", "**all**"} <= set(rows)
