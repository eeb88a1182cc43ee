"""Small bundles for the checklist tests, built with diagnostic.bundle from real vLLM logs."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from real_runs import REAL_RUNS

from diagnostic.bundle.store import Bundle
from diagnostic.schema.bundle import ArmSpec, EngineInfo, Manifest, PlanSpec, RunInfo
from diagnostic.schema.requests import RequestRecord

H200 = REAL_RUNS / "h200-vllm-0.26"

# A plan a consultant would be happy with: baseline, its A/A twin and a k sweep.
GOOD_ARMS = (
    ArmSpec(name="baseline", speculative=False, launch="vllm serve m"),
    ArmSpec(name="baseline-aa", speculative=False, aa_of="baseline", launch="vllm serve m"),
    ArmSpec(name="ngram-k2", params={"k": 2}, launch="vllm serve m --speculative-config …"),
    ArmSpec(name="ngram-k3", params={"k": 3}, launch="vllm serve m --speculative-config …"),
    ArmSpec(name="ngram-k4", params={"k": 4}, launch="vllm serve m --speculative-config …"),
)
ENVIRONMENT = {"gpus": [{"name": "NVIDIA H200", "driver": "580.159.04"}], "cuda": "13.0"}


def record(arm: str, restart: int, workload: str, seq: int, **kw: Any) -> RequestRecord:
    """One measured request that reached max_tokens=256."""
    base: dict[str, Any] = dict(
        arm=arm,
        restart=restart,
        seq=seq,
        workload=workload,
        prompt_id=f"{workload}-{seq}",
        warmup=False,
        t_send=float(seq),
        ttft_s=0.02,
        e2e_s=0.5,
        chunk_times_s=[0.02, 0.5],
        completion_tokens=256,
        max_tokens=256,
        finish_reason="length",
    )
    base.update(kw)
    return RequestRecord.model_validate(base)


def make_bundle(
    path: Path,
    *,
    arms: Sequence[ArmSpec] = GOOD_ARMS,
    restarts: int = 3,
    requests: int = 15,
    workloads: Sequence[str] = ("code", "prose"),
    logs: bool = True,
    metrics: bool = True,
    run: dict[str, Any] | None = None,
) -> Bundle:
    """A bundle with every arm × restart × workload filled with real vLLM logs and metrics."""
    plan = PlanSpec(
        arms=list(arms),
        workloads=list(workloads),
        requests=requests,
        restarts=restarts,
        max_tokens=256,
    )
    bundle = Bundle.create(path, Manifest(tool_version="0.1.0", plan=plan))
    for arm in arms:
        source = H200 / ("ngram3" if arm.params.get("k") else "base")
        for restart in range(restarts):
            info = RunInfo(
                arm=arm.name,
                restart=restart,
                status="ok",
                engine=EngineInfo(name="vllm", version="0.26.0"),
                environment=ENVIRONMENT,
                **(run or {}),
            )
            bundle.write_run(info)
            lines = [
                record(arm.name, restart, w, seq, warmup=seq == 0).model_dump_json()
                for w in workloads
                for seq in range(requests + 1)  # seq 0 is the warm-up
            ]
            # written directly: write_run_file redacts, and the redactor masks "token_source"
            bundle.run_file(arm.name, restart, "requests.jsonl").write_text("\n".join(lines) + "\n")
            if logs:
                log = (source / "server.log").read_bytes()
                bundle.write_run_file(arm.name, restart, "server.log", log)
            if metrics:
                for name in ("metrics_before.prom", "metrics_after.prom"):
                    bundle.write_run_file(arm.name, restart, name, (source / name).read_bytes())
    return bundle
