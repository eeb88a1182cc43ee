"""`diagnose collect`: measure a running server into a run of a bundle (the API sweep uses)."""

from diagnostic.collect.run import METRICS_AFTER, METRICS_BEFORE, collect_run
from diagnostic.collect.settings import RunSettings, plan_jobs
from diagnostic.collect.stage import CollectConfig, collect
from diagnostic.collect.summary import CollectSummary, WorkloadSummary, summarize

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
