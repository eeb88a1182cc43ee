"""Bundles for the analysis tests: real H200 runs converted to schema 1, and synthetic ones."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from real_runs import REAL_RUNS

from diagnostic.bundle.store import Bundle
from diagnostic.schema.bundle import ArmSpec, EngineInfo, Manifest, PlanSpec, RunInfo
from diagnostic.schema.requests import RequestRecord

H200 = REAL_RUNS / "h200-vllm-0.26"

# folder → (speculative, params): k comes from the folder's --speculative-config.
H200_ARMS = {
    "base": (False, {}),
    "ngram3": (True, {"k": 3}),
    "eager": (False, {}),
    "ngram3-eager": (True, {"k": 3, "enforce_eager": 1}),
    "flex-base": (False, {}),
}


def convert_requests(folder: Path, arm: str, restart: int = 0) -> list[RequestRecord]:
    """The harness layout (i, warmup, workload, t_total_s, chunk_arrival_s, usage, text) as
    RequestRecords: one prompt per workload, sends back to back (t_send accumulates)."""
    records, t_send, seq = [], 0.0, {"code": 0, "prose": 0}
    for line in (folder / "requests.jsonl").read_text().splitlines():
        row = json.loads(line)
        chunks = row["chunk_arrival_s"]
        workload = row["workload"]
        records.append(
            RequestRecord(
                arm=arm,
                restart=restart,
                seq=seq[workload],
                workload=workload,
                prompt_id=f"{workload}-0",
                warmup=row["warmup"],
                t_send=t_send,
                ttft_s=chunks[0] if chunks else None,
                e2e_s=row["t_total_s"],
                chunk_times_s=chunks,
                completion_tokens=row["usage"]["completion_tokens"],
                prompt_tokens=row["usage"]["prompt_tokens"],
                finish_reason="length",
                text=row["text"],
                max_tokens=256,
            )
        )
        seq[workload] += 1
        t_send += row["t_total_s"]
    return records


def build_h200_bundle(path: Path, arms: dict[str, tuple[bool, dict]] | None = None) -> Bundle:
    """One restart per arm, with the run's real server.log and /metrics snapshots."""
    arms = arms or H200_ARMS
    plan = PlanSpec(
        arms=[ArmSpec(name=n, speculative=s, params=p) for n, (s, p) in arms.items()],
        workloads=["code", "prose"],
        requests=15,
        warmup=2,
        restarts=1,
        max_tokens=256,
        baseline="base",
    )
    bundle = Bundle.create(path, Manifest(tool_version="test", plan=plan))
    for arm in arms:
        folder = H200 / arm
        endpoints = json.loads((folder / "endpoints.json").read_text())
        bundle.write_run(
            RunInfo(
                arm=arm,
                restart=0,
                status="ok",
                engine=EngineInfo(name="vllm", version=endpoints["version"]["version"]),
                endpoints=endpoints,
            )
        )
        for name in ("server.log", "metrics_before.prom", "metrics_after.prom"):
            bundle.write_run_file(arm, 0, name, (folder / name).read_bytes())
        for record in convert_requests(folder, arm):
            bundle.append_request(record)
    return bundle


# -- synthetic bundles (known truth) ------------------------------------------------------------
def synthetic_record(
    arm: str,
    restart: int,
    seq: int,
    tps: float,
    *,
    workload: str = "code",
    concurrency: int = 1,
    warmup: bool = False,
    tokens: int = 256,
    chunk_tokens: list[int] | None = None,
    text: str = "def f():\n    return 1\n",
    error: str | None = None,
) -> RequestRecord:
    """A request whose decode throughput is exactly `tps` (tokens after the first chunk over
    first-to-last chunk time); 64 evenly spaced chunks unless chunk_tokens says otherwise."""
    n_chunks = len(chunk_tokens) if chunk_tokens else 64
    first = chunk_tokens[0] if chunk_tokens else 1
    span = (tokens - first) / tps
    ttft = 0.02
    times = [ttft + span * i / max(1, n_chunks - 1) for i in range(n_chunks)]
    return RequestRecord(
        arm=arm,
        restart=restart,
        seq=seq,
        workload=workload,
        prompt_id=f"{workload}-{seq % 3}",
        warmup=warmup,
        t_send=float(seq),
        ttft_s=ttft,
        e2e_s=times[-1],
        chunk_times_s=times,
        chunk_tokens=chunk_tokens,
        completion_tokens=tokens,
        max_tokens=256,
        concurrency=concurrency,
        text=text,
        error=error,
    )


def vllm_metrics(drafts: float, accepted_per_pos: list[float]) -> str:
    """/metrics text with vLLM's spec-decode counters (cumulative per-position counts)."""
    k = len(accepted_per_pos)
    lines = [
        "# TYPE vllm:spec_decode_num_drafts counter",
        f'vllm:spec_decode_num_drafts_total{{engine="0"}} {drafts}',
        "# TYPE vllm:spec_decode_num_draft_tokens counter",
        f'vllm:spec_decode_num_draft_tokens_total{{engine="0"}} {drafts * k}',
        "# TYPE vllm:spec_decode_num_accepted_tokens counter",
        f'vllm:spec_decode_num_accepted_tokens_total{{engine="0"}} {sum(accepted_per_pos)}',
        "# TYPE vllm:spec_decode_num_accepted_tokens_per_pos counter",
    ]
    lines += [
        f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine="0",position="{i}"}} {v}'
        for i, v in enumerate(accepted_per_pos)
    ]
    return "\n".join(lines) + "\n"


def synthetic_bundle(
    path: Path,
    arm_tps: dict[str, list[list[float]]],
    *,
    specs: list[ArmSpec] | None = None,
    order: Literal["blocks", "sequential", "manual"] = "manual",
    workloads: tuple[str, ...] = ("code",),
    metrics: dict[str, str] | None = None,
) -> Bundle:
    """arm → per restart → request throughputs; restart r of every arm runs in block r when
    order is 'blocks'. Each workload gets the same throughputs; one warm-up per restart."""
    specs = specs or [ArmSpec(name=a, speculative=a != "base") for a in arm_tps]
    plan = PlanSpec(
        arms=specs,
        workloads=list(workloads),
        baseline="base",
        order=order,
        restarts=max(len(v) for v in arm_tps.values()),
    )
    bundle = Bundle.create(path, Manifest(tool_version="test", plan=plan))
    for arm, restarts in arm_tps.items():
        for r, values in enumerate(restarts):
            block = r if order == "blocks" else None
            bundle.write_run(RunInfo(arm=arm, restart=r, block=block, status="ok"))
            if metrics and arm in metrics:
                bundle.write_run_file(arm, r, "metrics_after.prom", metrics[arm])
            for w in workloads:
                bundle.append_request(
                    synthetic_record(arm, r, 0, values[0], workload=w, warmup=True)
                )
                for j, v in enumerate(values):
                    bundle.append_request(synthetic_record(arm, r, j + 1, v, workload=w))
    return bundle
