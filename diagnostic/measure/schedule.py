"""The order of server starts: interleaved blocks in seeded random order, or sequential."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from diagnostic import defaults

__all__ = ["Estimate", "EstimateAssumptions", "Start", "build_schedule", "estimate"]


class Start(BaseModel):
    """One scheduled server start: arm `arm`, restart `restart`, in block `block`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    index: int = Field(ge=0, description="Position in the schedule (0-based)")
    block: int | None = Field(description="Block of the interleaved order; None when sequential")
    arm: str = Field(description="Arm started")
    restart: int = Field(ge=0, description="Restart index of the arm")


def build_schedule(
    arms: Sequence[str],
    *,
    restarts: int,
    order: Literal["blocks", "sequential"] = "blocks",
    seed: int = defaults.SEED,
) -> list[Start]:
    """Every (arm, restart) once; blocks: block b starts each arm once (restart b), shuffled.

    Interleaving spreads slow drift (thermal, other tenants, cache warm-up) over all arms
    instead of letting it land on whichever arm ran last; the seed makes the order reproducible.
    """
    if restarts < 1:
        raise ValueError("restarts must be >= 1")
    pairs: list[tuple[int | None, str, int]]
    if order == "sequential":
        pairs = [(None, arm, r) for arm in arms for r in range(restarts)]
    else:
        rng = random.Random(seed)
        pairs = []
        for block in range(restarts):
            shuffled = list(arms)
            rng.shuffle(shuffled)
            pairs.extend((block, arm, block) for arm in shuffled)
    return [Start(index=i, block=b, arm=a, restart=r) for i, (b, a, r) in enumerate(pairs)]


class EstimateAssumptions(BaseModel):
    """What a time estimate assumes about the server (stated beside the estimate)."""

    model_config = ConfigDict(extra="forbid")

    startup_s: float = Field(60.0, ge=0, description="Seconds from launch to healthy")
    stop_s: float = Field(5.0, ge=0, description="Seconds to stop a server and free its port")
    decode_tps: float = Field(50.0, gt=0, description="Decode tokens per second per request")
    request_overhead_s: float = Field(0.5, ge=0, description="Prefill and HTTP per request")
    restart_cv: float = Field(
        0.05, ge=0, description="Restart-to-restart CV of a restart's mean (planning m*)"
    )
    request_cv: float = Field(0.05, ge=0, description="Request-to-request CV within a restart")


class Estimate(BaseModel):
    """Expected duration of a schedule."""

    model_config = ConfigDict(extra="forbid")

    starts: int = Field(description="Server starts")
    requests: int = Field(description="Requests sent, warm-up included")
    per_start_s: float = Field(description="Seconds per start (launch, requests, stop)")
    total_s: float = Field(description="Seconds for the whole schedule")
    assumptions: EstimateAssumptions = Field(description="What the estimate assumes")


def estimate(
    starts: int,
    *,
    workloads: int,
    requests: int,
    warmup: int,
    max_tokens: int,
    concurrency_levels: int = 1,
    assumptions: EstimateAssumptions | None = None,
) -> Estimate:
    """Launch + requests + stop per start, requests run one after another at each level."""
    a = assumptions or EstimateAssumptions()
    per_start_requests = workloads * concurrency_levels * (requests + warmup)
    per_request = a.request_overhead_s + max_tokens / a.decode_tps
    per_start = a.startup_s + a.stop_s + per_start_requests * per_request
    return Estimate(
        starts=starts,
        requests=starts * per_start_requests,
        per_start_s=per_start,
        total_s=starts * per_start,
        assumptions=a,
    )
