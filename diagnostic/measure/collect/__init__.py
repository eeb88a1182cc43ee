"""`diagnose collect`: measure a running server into a run of a bundle (the API sweep uses)."""

from diagnostic.measure.collect.recap import CollectRecap, WorkloadRecap, recap
from diagnostic.measure.collect.run import collect_run
from diagnostic.measure.collect.settings import RunSettings, plan_jobs
from diagnostic.measure.collect.stage import CollectConfig, collect, preflight

__all__ = [
    "CollectConfig",
    "CollectRecap",
    "RunSettings",
    "WorkloadRecap",
    "collect",
    "collect_run",
    "plan_jobs",
    "preflight",
    "recap",
]
