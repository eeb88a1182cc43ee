"""Per-workload medians of a run's records: what `diagnose collect` prints at the end."""

from __future__ import annotations

import math
import statistics
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from diagnostic.schema.analysis import EngineTiming
from diagnostic.schema.requests import RequestRecord, decode_tps, latest_attempts

__all__ = ["CollectRecap", "WorkloadRecap", "recap"]


class WorkloadRecap(BaseModel):
    """One workload's measured requests of a run: the mean decode throughput, medians of the
    rest."""

    model_config = ConfigDict(extra="forbid")

    workload: str = Field(description="Workload name")
    requests: int = Field(description="Measured requests recorded")
    failures: int = Field(description="Measured requests with an error")
    decode_tps: float | None = Field(
        None,
        description="Mean decode tokens/s of the measured requests: the restart summary the "
        "analysis uses, so the report's figure for this run is the same number",
    )
    ttft_s: float | None = Field(None, description="Median time to first chunk")
    tokens_per_chunk: float | None = Field(None, description="Median tokens per content chunk")
    token_sources: list[str] = Field(default_factory=list, description="token_source values seen")


class CollectRecap(BaseModel):
    """What `diagnose collect` did."""

    model_config = ConfigDict(extra="forbid")

    bundle: Path = Field(description="Bundle folder")
    run: str = Field(description="Run folder name, <arm>-r<restart>")
    status: str = Field(description="Run status")
    failure: str | None = Field(None, description="Why the run failed")
    engine: str = Field(description="Engine name")
    version: str | None = Field(None, description="Engine version")
    model: str | None = Field(None, description="Model served")
    resumed: int = Field(0, description="Requests already in the bundle, skipped")
    workloads: list[WorkloadRecap] = Field(default_factory=list, description="Per workload")
    engine_timing: EngineTiming | None = Field(
        None, description="The client's decode tok/s against the engine's own clock, whole run"
    )


def _median(values: list[float | None]) -> float | None:
    kept = [v for v in values if v is not None and math.isfinite(v)]
    return statistics.median(kept) if kept else None


def _mean(values: list[float | None]) -> float | None:
    kept = [v for v in values if v is not None and math.isfinite(v)]
    return statistics.fmean(kept) if kept else None


def recap(records: list[RequestRecord]) -> list[WorkloadRecap]:
    """Per workload: the mean decode tok/s (the analysis' restart summary) and medians of
    TTFT and tokens per chunk over measured requests (warm-ups and errors left out)."""
    records = latest_attempts(records)
    names = list(dict.fromkeys(r.workload for r in records))
    return [_summary(n, [r for r in records if r.workload == n and not r.warmup]) for n in names]


def _summary(name: str, measured: list[RequestRecord]) -> WorkloadRecap:
    ok = [r for r in measured if not r.error]
    client = [decode_tps(r) for r in ok]
    per_chunk = [
        r.completion_tokens / len(r.chunk_times_s)
        for r in ok
        if r.completion_tokens is not None and r.chunk_times_s
    ]
    return WorkloadRecap(
        workload=name,
        requests=len(measured),
        failures=len(measured) - len(ok),
        decode_tps=_mean(client),
        ttft_s=_median([r.ttft_s for r in ok]),
        tokens_per_chunk=_median(list(per_chunk)),
        token_sources=sorted({r.token_source for r in ok}),
    )
