"""A plan file's TOML tables as pydantic models: [plan], [[arms]], [engagement], with the
limits (defaults.LIMIT_*) each value is refused past."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, FiniteFloat

from diagnostic import defaults
from diagnostic.schema.bundle import ConcurrencyLevels, Engagement

__all__ = ["ArmTable", "PlanFile", "PlanTable"]


class _Table(BaseModel):
    """TOML tables: unknown keys and loose types (\"5\" for 5) are errors."""

    model_config = ConfigDict(extra="forbid", strict=True)


class PlanTable(_Table):
    """The [plan] table: what every arm is measured with."""

    restarts: int = Field(
        defaults.RESTARTS, ge=1, le=defaults.LIMIT_RESTARTS, description="Server starts per arm"
    )
    requests: int = Field(
        defaults.REQUESTS,
        ge=1,
        le=defaults.LIMIT_REQUESTS,
        description="Measured requests per restart and workload",
    )
    warmup: int = Field(
        defaults.WARMUP,
        ge=0,
        le=defaults.LIMIT_WARMUP,
        description="Discarded requests per restart and workload",
    )
    workloads: list[str] = Field(
        default_factory=lambda: list(defaults.WORKLOADS),
        min_length=1,
        description="Prompt sets: built-in names or JSONL files",
    )
    max_tokens: int = Field(
        defaults.MAX_TOKENS,
        ge=1,
        le=defaults.LIMIT_MAX_TOKENS,
        description="Output length forced on every request",
    )
    baseline: str | None = Field(
        None, description="Arm the others are compared with (default: the arm named 'baseline')"
    )
    port: int = Field(
        defaults.PORT, ge=1, le=65535, description="Substituted for {port} in templates"
    )
    base_url: str | None = Field(
        None, description="Server URL (template); default http://127.0.0.1:{port}"
    )
    health_timeout_s: float = Field(
        defaults.HEALTH_TIMEOUT_S,
        gt=0,
        le=defaults.LIMIT_TIMEOUT_S,
        description="Seconds a start may take to be healthy",
    )
    request_timeout_s: float = Field(
        defaults.REQUEST_TIMEOUT_S,
        gt=0,
        le=defaults.LIMIT_TIMEOUT_S,
        description="Seconds one request may take in all (sweep --timeout overrides it)",
    )
    first_token_timeout_s: float = Field(
        defaults.FIRST_TOKEN_TIMEOUT_S,
        gt=0,
        le=defaults.LIMIT_TIMEOUT_S,
        description="Seconds from sending a request to its first token; past it the server "
        "has stalled: the start stops, failed, and the sweep goes on",
    )
    token_timeout_s: float = Field(
        defaults.TOKEN_TIMEOUT_S,
        gt=0,
        le=defaults.LIMIT_TIMEOUT_S,
        description="Seconds between two tokens of a stream; past it the server has stalled: "
        "the start stops, failed, and the sweep goes on",
    )
    run_timeout_s: float = Field(
        defaults.RUN_TIMEOUT_S,
        gt=0,
        le=defaults.LIMIT_TIMEOUT_S,
        description="Seconds one start's requests may take in all; past it the start stops, "
        "failed, and the sweep goes on",
    )
    command_timeout_s: float = Field(
        defaults.SHELL_TIMEOUT_S,
        gt=0,
        le=defaults.LIMIT_TIMEOUT_S,
        description="Seconds one run of a stop, health or log command may take; past it its "
        "process group is killed and the start goes on (stop) or fails (health)",
    )
    order: Literal["blocks", "sequential"] = Field(
        "blocks", description="blocks: every block starts each arm once, in seeded random order"
    )
    seed: int = Field(
        defaults.SEED,
        ge=-defaults.LIMIT_SEED,
        le=defaults.LIMIT_SEED,
        description="Seed of the block order",
    )
    concurrency: ConcurrencyLevels = Field(
        default_factory=lambda: [1], description="Concurrency levels"
    )
    api: Literal["completions", "chat"] = Field("completions", description="OpenAI API used")
    model: str | None = Field(None, description="Model name sent in requests (default: discovered)")
    margin: float = Field(
        defaults.MARGIN,
        ge=0,
        lt=1,
        description="δ: a speedup inside [1/(1+δ), 1+δ] is too small to matter (EQUIVALENT)",
    )
    target: float = Field(
        defaults.TARGET,
        gt=0,
        lt=10,
        description="The speedup --adaptive is powered to find (0.1 = +10%): at a look, a "
        "comparison whose data reject a speedup this large stops (futility, INCONCLUSIVE)",
    )
    stop: str | None = Field(
        None, description="Stop command template for every arm (default: signal the group)"
    )
    health: str | None = Field(
        None, description="Health command template for every arm, healthy on exit 0"
    )
    logs: dict[str, str] = Field(
        default_factory=dict, description="Log commands for every arm: source = command"
    )
    telemetry: dict[str, str] = Field(
        default_factory=dict,
        description="Telemetry sources on other nodes: name = a command template printing "
        "nvidia-smi --query-gpu CSV for the whole run (ssh node nvidia-smi … -lms 500), or a "
        "DCGM exporter URL; sampled from before the warm-up to after the last request",
    )
    telemetry_local: bool = Field(
        False, description="Sample this machine during each run: NVML's GPUs and the host's CPU"
    )
    telemetry_interval_s: float = Field(
        defaults.TELEMETRY_INTERVAL_S,
        ge=defaults.TELEMETRY_MIN_INTERVAL_S,
        le=defaults.TELEMETRY_MAX_INTERVAL_S,
        description="Seconds between telemetry samples (GPU; the host's at least "
        "TELEMETRY_HOST_INTERVAL_S)",
    )
    telemetry_quiet_s: float = Field(
        defaults.QUIET_WINDOW_S,
        ge=0,
        le=defaults.QUIET_MAX_S,
        description="With local telemetry: seconds of the quiet window before each run's first "
        "request (VM steal and a probe thread's CPU share, which no arm can move; 0: none)",
    )
    as_found: str | None = Field(
        None,
        description="The arm that is the client's configuration as found: the report's "
        "before-and-after leads with it against the best decided arm",
    )


class ArmTable(_Table):
    """One [[arms]] entry: a server configuration, or a family of them with `sweep`."""

    name: str = Field(min_length=1, description="Arm name; a template such as 'eagle3-k{k}'")
    launch: str | None = Field(
        None, description="Launch command template (run by bash -c); must contain {port}"
    )
    env: dict[str, str] = Field(default_factory=dict, description="Extra environment (templates)")
    sweep: dict[str, list[int | FiniteFloat | str]] = Field(
        default_factory=dict, description="Values substituted for {key}: one arm per combination"
    )
    aa_of: str | None = Field(None, description="Arm this one repeats (A/A noise arm)")
    speculative: bool | None = Field(
        None, description="Whether the arm speculates (default: inferred from the launch flags)"
    )
    stop: str | None = Field(
        None,
        description="Stop command template (bash -c), run before the launch's process group "
        "is signalled; default: signalling it is all",
    )
    health: str | None = Field(
        None,
        description="Health command template: the server is healthy when it exits 0 "
        "(default: GET /health, then a 1-token completion)",
    )
    logs: dict[str, str] = Field(
        default_factory=dict,
        description="Log sources: name = command template whose stdout is that log, run "
        "once healthy and again after the last request",
    )


class PlanFile(_Table):
    """A whole plan file, as written: [plan] and the [[arms]] before sweep expansion."""

    plan: PlanTable = Field(default_factory=PlanTable, description="The [plan] table")
    engagement: Engagement = Field(
        default_factory=Engagement, description="The [engagement] table: client, site, consultant"
    )
    arms: list[ArmTable] = Field(min_length=1, description="The [[arms]] entries")
