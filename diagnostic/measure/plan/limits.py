"""What a plan may ask for in all: levels of concurrency, arms after sweep expansion and the
requests the whole plan schedules, each under its limit (defaults.LIMIT_*), checked at load
before anything expands, so an absurd plan is refused with the limit, not run for ever."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence, Sized

from diagnostic import defaults
from diagnostic.errors import PlanError

__all__ = ["check_limits"]


def check_limits(
    source: str,
    *,
    sweeps: Sequence[Mapping[str, Sized]],
    concurrency: Sequence[int],
    restarts: int,
    per_level: int,
    workloads: int,
) -> None:
    """Raise PlanError naming the limit a plan passes: `sweeps` are the [[arms]]' sweep
    tables, `per_level` the requests (measured and warm-up) per workload and level."""
    for level in concurrency:
        if not 1 <= level <= defaults.LIMIT_CONCURRENCY:
            raise PlanError(
                f"{source}: [plan] concurrency {level} is outside 1 to "
                f"{defaults.LIMIT_CONCURRENCY:,} (streams in flight at once)"
            )
    arms = sum(math.prod(len(values) for values in sweep.values()) for sweep in sweeps)
    if arms > defaults.LIMIT_ARMS:
        raise PlanError(
            f"{source}: the sweeps make {arms:,} arms, more than {defaults.LIMIT_ARMS:,}; "
            "sweep fewer values (each arm is restarted and measured)"
        )
    per_start = workloads * len(concurrency) * per_level
    planned = arms * restarts * per_start
    if planned > defaults.LIMIT_PLANNED_REQUESTS:
        raise PlanError(
            f"{source}: the plan schedules {planned:,} requests ({arms:,} arms × {restarts:,} "
            f"restarts × {per_start:,} per start), more than "
            f"{defaults.LIMIT_PLANNED_REQUESTS:,}; lower [plan] restarts or requests"
        )
