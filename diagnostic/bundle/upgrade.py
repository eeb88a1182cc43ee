"""Older bundle formats read as the current one, in memory: a file is never rewritten here."""

from __future__ import annotations

import re
from typing import Any

from diagnostic.schema.bundle import MAIN_SOURCE

__all__ = ["SERVER_LOG", "upgrade", "upgrade_to_2", "upgrade_to_3", "v1_sources"]

SERVER_LOG = "server.log"  # a v1 run's server log (v2: logs/server.log, source `server`)
# v1 logs besides server.log: collect's server-2.log …, a node1.log copied in by hand (plain
# names; an earlier attempt's server.attempt1.log is not a source).
_V1_EXTRA_LOG = re.compile(r"^(?!.*\.attempt\d+\.)([A-Za-z0-9][A-Za-z0-9._+=-]*)\.log$")


def v1_sources(logs: list[str]) -> dict[str, str]:
    """A v1 run's logs as sources: server.log is `server`, another X.log source `X`."""
    extra = {m[1]: n for n in logs if (m := _V1_EXTRA_LOG.match(n))}
    return {MAIN_SOURCE: SERVER_LOG, **extra}


def upgrade_to_2(data: Any) -> Any:
    """A v1 manifest.json or run.json as v2: a run's server.log becomes log source `server`.
    Newer or unversioned data passes unchanged."""
    if not isinstance(data, dict) or data.get("schema_version") != 1:
        return data
    data = {**data, "schema_version": 2}
    if "arm" in data and not data.get("sources"):  # run.json
        logs = data.get("logs")
        data["sources"] = v1_sources(logs if isinstance(logs, list) else [])
    return data


def upgrade_to_3(data: Any) -> Any:
    """A v2 manifest.json or run.json as v3: nothing to map. v3 only adds fields (a run's
    `seal`, the manifest's `bundle_id` and `collected`), so a v2 bundle reads as one recorded
    before sealing: `diagnose verify` says so and checks its consistency only."""
    if not isinstance(data, dict) or data.get("schema_version") != 2:
        return data
    return {**data, "schema_version": 3}


def upgrade(data: Any) -> Any:
    """Any older manifest.json or run.json as the current version, step by step."""
    return upgrade_to_3(upgrade_to_2(data))
