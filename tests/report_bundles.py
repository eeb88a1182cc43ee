"""Bundles for the report tests and benchmark: a full synthetic k sweep with known truth."""

from __future__ import annotations

import math
import random
from pathlib import Path

from diagnostic.bundle.store import Bundle
from diagnostic.schema.bundle import (
    ArmSpec,
    Engagement,
    EngineInfo,
    LaunchInfo,
    Manifest,
    PlanSpec,
    RunInfo,
    Target,
)
from diagnostic.schema.logfacts import (
    CaptureFacts,
    CheckReport,
    Comparison,
    Evidence,
    Finding,
    LogFacts,
    SpecFacts,
)
from diagnostic.schema.requests import RequestRecord

# Text a hostile or merely unlucky bundle can carry: markup, CSS, jinja syntax, a local file.
HOSTILE = (
    '<script>alert("x")</script><img src="file:///etc/passwd" onerror=alert(1)>'
    "<style>body{display:none}</style>{{ 7*7 }}{% if 1 %}jinja{% endif %}"
    '<link rel="stylesheet" href="http://attacker.invalid/x.css">'
)
BASE_TPS = {"code": 100.0, "prose": 90.0, "qa": 95.0, "rag": 85.0, "math": 98.0, "summary": 88.0}
# per-token acceptance of the n-gram drafter
ALPHA = {"code": 0.75, "prose": 0.45, "qa": 0.5, "rag": 0.7, "math": 0.6, "summary": 0.65}
STEP_A, STEP_B = 1.05, 0.08  # step cost ρ_k = a + b·k of the simulated engine
MODEL = "meta-llama/Llama-3.1-8B-Instruct"
ENVIRONMENT = {
    "tool_version": "0.1.0",
    "host": "gpu-node-07",
    "os": "Linux-6.8.0-x86_64-with-glibc2.39",
    "cpu": "AMD EPYC 9654 96-Core Processor",
    "cpu_count": 192,
    "python": "3.12.3",
    "gpus": [{"name": "NVIDIA H200", "driver": "580.159.04", "memory_mib": "143771"}],
    "driver": "580.159.04",
    "cuda": "13.0",
    "server_is_local": True,
}


def tau(alpha: float, k: int) -> float:
    """Expected tokens per verify step (Leviathan et al.)."""
    return (1 - alpha ** (k + 1)) / (1 - alpha) if k else 1.0


def true_speedup(workload: str, k: int) -> float:
    """The speedup the simulated engine has at k on a workload."""
    return tau(ALPHA[workload], k) / (STEP_A + STEP_B * k) if k else 1.0


def arm_specs(ks: tuple[int, ...]) -> list[ArmSpec]:
    """baseline, its A/A repeat, and one n-gram arm per k."""
    serve = f"vllm serve {MODEL} --port {{port}}"
    arms = [
        ArmSpec(name="base", launch=serve, speculative=False),
        ArmSpec(name="base-aa", launch=serve, speculative=False, aa_of="base"),
    ]
    for k in ks:
        cfg = f'--speculative-config \'{{"method":"ngram","num_speculative_tokens":{k}}}\''
        arms.append(
            ArmSpec(
                name=f"ngram-k{k}",
                launch=f"{serve} {cfg}",
                speculative=True,
                params={"k": k, "method": "ngram"},
            )
        )
    return arms


def _record(
    arm: ArmSpec,
    restart: int,
    seq: int,
    workload: str,
    tps: float,
    text: str,
    *,
    warmup: bool = False,
    error: str | None = None,
) -> RequestRecord:
    k = int(arm.params.get("k", 0))
    tokens = 128
    per_chunk = max(1, round(tau(ALPHA[workload], k)))
    chunks = [1] + [per_chunk] * ((tokens - 1) // per_chunk)
    chunks[-1] += tokens - sum(chunks)
    span = (tokens - 1) / tps
    times = [0.03 + span * i / (len(chunks) - 1) for i in range(len(chunks))]
    return RequestRecord(
        arm=arm.name, restart=restart, seq=seq, workload=workload,
        prompt_id=f"{workload}-{seq % 4}", warmup=warmup, t_send=float(seq),
        ttft_s=None if error else times[0], e2e_s=None if error else times[-1],
        chunk_times_s=[] if error else times, chunk_tokens=None if error else chunks,
        completion_tokens=None if error else tokens, prompt_tokens=40,
        finish_reason=None if error else "length", text="" if error else text,
        error=error, max_tokens=tokens,
    )  # fmt: skip


def _metrics(k: int, drafts: float, alpha: float) -> str:
    if not k:
        return ""
    per_pos = [round(drafts * alpha ** (i + 1)) for i in range(k)]
    rows = [
        ("num_drafts", drafts),
        ("num_draft_tokens", drafts * k),
        ("num_accepted_tokens", sum(per_pos)),
    ]
    out = []
    for name, value in rows:
        out += [
            f"# TYPE vllm:spec_decode_{name} counter",
            f'vllm:spec_decode_{name}_total{{engine="0"}} {value}',
        ]
    out.append("# TYPE vllm:spec_decode_num_accepted_tokens_per_pos counter")
    out += [
        f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine="0",position="{i}"}} {v}'
        for i, v in enumerate(per_pos)
    ]
    return "\n".join(out) + "\n"


def _text(workload: str, seq: int, hostile: bool) -> str:
    text = f"{workload} answer {seq % 4}: def f(x):\n    return x * {seq % 4}\n"
    return text[:12] + HOSTILE if hostile and seq % 4 == 1 else text


def max_k_of(arm: ArmSpec) -> int:
    """The k of an arm (0 without speculation)."""
    return int(arm.params.get("k", 0))


def sweep_bundle(
    path: Path,
    *,
    ks: tuple[int, ...] = (1, 3, 6),
    restarts: int = 3,
    requests: int = 6,
    workloads: tuple[str, ...] = ("code", "prose"),
    seed: int = 7,
    hostile: bool = False,
) -> Bundle:
    """A blocked k sweep with an A/A arm: restart noise 3%, request noise 4%, vLLM counters.

    With `hostile`, the largest k diverges from the baseline on one prompt with HOSTILE text,
    one request fails with HOSTILE in its error, and the client name carries markup."""
    rng = random.Random(seed)
    specs = arm_specs(ks)
    plan = PlanSpec(arms=specs, workloads=list(workloads), requests=requests, warmup=1,
                    restarts=restarts, max_tokens=128, baseline="base", order="blocks",
                    seed=seed)  # fmt: skip
    client = "Acme <b>Corp</b>" if hostile else "Acme Corp"
    manifest = Manifest(
        tool_version="0.1.0",
        created_at="2026-11-29T10:00:00+00:00",
        engagement=Engagement(client=client, site="cluster-a", consultant="J. Doe"),
        target=Target(base_url="http://127.0.0.1:8000", model=MODEL),
        plan=plan,
    )
    bundle = Bundle.create(path, manifest)
    top_k = max(ks)
    for r in range(restarts):
        for arm in specs:
            _write_run(bundle, arm, r, rng, workloads, requests, hostile and max_k_of(arm) == top_k)
    return bundle


def _write_run(
    bundle: Bundle,
    arm: ArmSpec,
    r: int,
    rng: random.Random,
    workloads: tuple[str, ...],
    requests: int,
    hostile: bool,
) -> None:
    k = max_k_of(arm)
    bundle.write_run(RunInfo(
        arm=arm.name, restart=r, block=r, status="ok", base_url="http://127.0.0.1:8000",
        engine=EngineInfo(name="vllm", version="0.26.0"), model=MODEL,
        environment=ENVIRONMENT, launch=LaunchInfo(command=arm.launch or "", pid=1000 + r),
        started_at="2026-11-29T10:00:00+00:00", ended_at="2026-11-29T10:05:00+00:00",
    ))  # fmt: skip
    restart_effect = math.exp(rng.gauss(0, 0.03))
    alpha = sum(ALPHA[w] for w in workloads) / len(workloads)
    bundle.write_run_file(arm.name, r, "metrics_before.prom", _metrics(k, 0, alpha))
    bundle.write_run_file(arm.name, r, "metrics_after.prom", _metrics(k, 400.0, alpha))
    for w in workloads:
        mean = BASE_TPS[w] * true_speedup(w, k) * restart_effect
        bundle.append_request(_record(arm, r, 0, w, mean, _text(w, 0, False), warmup=True))
        for j in range(1, requests + 1):
            tps = mean * math.exp(rng.gauss(0, 0.04))
            error = f"HTTP 500 from server: {HOSTILE}" if hostile and j == 2 and r == 0 else None
            text = _text(w, j, hostile)
            bundle.append_request(_record(arm, r, j, w, tps, text, error=error))


def check_report(bundle: Bundle, *, hostile: bool = False) -> CheckReport:
    """A check report shaped like `diagnose check` writes for this bundle: capture resolved
    to PIECEWISE under speculation (a downgrade) and one finding with quoted lines."""
    runs, comparisons = [], []
    for info in bundle.runs():
        k = int(next(a for a in bundle.manifest.plan.arms if a.name == info.arm).params.get("k", 0))
        resolved = "PIECEWISE" if k else "FULL_AND_PIECEWISE"
        path = str(bundle.run_file(info.arm, info.restart, "server.log"))
        line = "(EngineCore pid=1) INFO [core.py:116] cudagraph_mode=FULL_AND_PIECEWISE"
        evidence = [
            Evidence(line=16, text=line),
            Evidence(line=44, text=f"Capturing CUDA graphs (mixed prefill-decode, {resolved})"),
        ]
        if hostile and k:
            evidence.append(Evidence(line=45, text=HOSTILE))
        runs.append(LogFacts(
            path=path, label=f"{info.arm}-r{info.restart}", engine="vllm", version="0.26.0",
            model=MODEL, spec=SpecFacts(enabled=bool(k), method="ngram" if k else None,
                                        num_draft_tokens=k or None),
            capture=CaptureFacts(configured="FULL_AND_PIECEWISE", resolved=resolved,
                                 reason="bars show PIECEWISE only" if k else "both bars seen",
                                 evidence=evidence),
            model_runner="V1" if k else "V2", attention_backend="FLASH_ATTN",
        ))  # fmt: skip
    base = next(x for x in runs if not x.spec.enabled)
    for spec in [x for x in runs if x.spec.enabled]:
        comparisons.append(Comparison(
            engine="vllm", baseline=base.path, baseline_label=base.label,
            baseline_resolved=base.capture.resolved, spec=spec.path, spec_label=spec.label,
            spec_method="ngram", spec_resolved=spec.capture.resolved, same=False,
            matched_on="same settings",
        ))  # fmt: skip
    message = "capture resolved to PIECEWISE under speculation (FULL_AND_PIECEWISE without)"
    finding = Finding(
        rule="capture-downgraded-under-spec", severity="error",
        title="Speculation downgraded CUDA-graph capture",
        message=message + (f" {HOSTILE}" if hostile else ""),
        evidence=runs[-1].capture.evidence,
        advice="Patch or configure capture so the verify pass is graphed (FULL decode graphs).",
        runs=[base.path, runs[-1].path],
    )  # fmt: skip
    return CheckReport(runs=runs, findings=[finding], comparisons=comparisons)
