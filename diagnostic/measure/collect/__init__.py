"""`diagnose collect`: measure a running server into a run of a bundle (the API sweep uses)."""

from diagnostic.measure.collect.recap import CollectSummary, WorkloadSummary, summarize
from diagnostic.measure.collect.run import METRICS_AFTER, METRICS_BEFORE, collect_run
from diagnostic.measure.collect.settings import RunSettings, plan_jobs
from diagnostic.measure.collect.stage import CollectConfig, collect

__all__ = [
    "METRICS_AFTER",
    "METRICS_BEFORE",
    "CollectConfig",
    "CollectSummary",
    "RunSettings",
    "WorkloadSummary",
    "collect",
    "collect_run",
    "plan_jobs",
    "summarize",
]
