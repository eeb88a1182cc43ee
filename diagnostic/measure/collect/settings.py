"""RunSettings: how one run is measured, and the fixed order of its requests."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from diagnostic import defaults
from diagnostic.measure.client import ClientOptions, Job, RequestLabel
from diagnostic.measure.telemetry import TelemetrySettings
from diagnostic.measure.workloads import BUILTIN, Prompt, Workload, builtin, load_prompt_file
from diagnostic.schema.bundle import ConcurrencyLevels, RunInfo

__all__ = ["RunSettings", "plan_jobs"]


class RunSettings(BaseModel):
    """How to measure one server process (one run): the same for every arm of a bundle."""

    model_config = ConfigDict(extra="forbid")

    base_url: str = Field(description="Server base URL, e.g. http://127.0.0.1:8000")
    workloads: list[Workload] = Field(min_length=1, description="Prompt sets, in this order")
    requests: int = Field(defaults.REQUESTS, ge=1, description="Measured requests per workload")
    warmup: int = Field(
        defaults.WARMUP, ge=0, description="Discarded warm-up requests per workload"
    )
    max_tokens: int = Field(
        defaults.MAX_TOKENS, ge=1, description="Output length forced on every request"
    )
    concurrency: ConcurrencyLevels = Field(
        default_factory=lambda: [1], min_length=1, description="Levels of requests in flight"
    )
    processes: int | None = Field(
        None,
        ge=1,
        description="Processes the streams are spread over; None: one per "
        "defaults.STREAMS_PER_PROCESS streams, at most one per core",
    )
    api: Literal["completions", "chat"] = Field("completions", description="OpenAI API used")
    model: str | None = Field(None, description="Model name sent; None asks /v1/models")
    api_key: str | None = Field(None, exclude=True, repr=False, description="Never stored")
    timeout_s: float = Field(
        defaults.REQUEST_TIMEOUT_S, gt=0, description="Longest time one request may take"
    )
    read_timeout_s: float = Field(
        defaults.READ_TIMEOUT_S, gt=0, description="Longest silence within a stream"
    )
    first_token_timeout_s: float = Field(
        defaults.FIRST_TOKEN_TIMEOUT_S,
        gt=0,
        description="Longest time from sending a request to its first token",
    )
    token_timeout_s: float = Field(
        defaults.TOKEN_TIMEOUT_S, gt=0, description="Longest wait between two tokens"
    )
    run_timeout_s: float = Field(
        defaults.RUN_TIMEOUT_S,
        gt=0,
        description="Longest time the run's requests may take in all; past it the run stops, "
        "failed, and --resume continues it",
    )
    seed: int = Field(defaults.SEED, description="Sampler seed (requests are greedy anyway)")
    force_length: bool = Field(True, description="Send ignore_eos and min_tokens")
    extra_body: dict[str, Any] = Field(default_factory=dict, description="Extra request fields")
    max_output_bytes: int = Field(
        defaults.MAX_OUTPUT_BYTES, ge=1024, description="Stream cap per request"
    )
    telemetry: TelemetrySettings | None = Field(
        None, description="GPU and host telemetry sampled during each run; None: off"
    )

    @field_validator("workloads", mode="before")
    @classmethod
    def _named_prompt_lists(cls, value: Any) -> Any:
        """Accept Workload objects, (name, prompts) pairs, built-in names and JSONL paths."""
        if not isinstance(value, list | tuple):
            return value
        return [w for item in value for w in _as_workloads(item)]

    @field_validator("workloads")
    @classmethod
    def _distinct(cls, value: list[Workload]) -> list[Workload]:
        names = [w.name for w in value]
        if len(set(names)) != len(names):
            raise ValueError(
                f"workload names must be distinct (a request is named by workload "
                f"and seq): {', '.join(names)}"
            )
        return value

    def client_options(self, model: str | None) -> ClientOptions:
        """The request options every request of the run uses."""
        return ClientOptions(
            base_url=self.base_url,
            api=self.api,
            model=model,
            max_tokens=self.max_tokens,
            seed=self.seed,
            force_length=self.force_length,
            extra_body=self.extra_body,
            api_key=self.api_key,
            read_timeout_s=min(self.read_timeout_s, self.timeout_s),
            total_timeout_s=self.timeout_s,
            first_token_timeout_s=min(self.first_token_timeout_s, self.timeout_s),
            token_timeout_s=min(self.token_timeout_s, self.timeout_s),
            max_output_bytes=self.max_output_bytes,
        )


def _as_workloads(item: Any) -> list[Any]:
    if isinstance(item, str | Path):
        # A built-in name, or a JSONL file (which may hold several workloads).
        if str(item) in BUILTIN:
            return [builtin(str(item))]
        return list(load_prompt_file(Path(item)))
    if not isinstance(item, tuple):
        return [item]
    name, prompts = item
    made = [
        p if isinstance(p, Prompt) else Prompt(id=f"{name}-{i:02d}", prompt=p)
        for i, p in enumerate(prompts)
    ]
    return [Workload(name=name, prompts=made, source="api")]


def plan_jobs(
    run: RunInfo, settings: RunSettings, workload: Workload, level: int = 0
) -> tuple[list[Job], list[Job]]:
    """Warm-up and measured jobs of one workload at one concurrency level (index into
    settings.concurrency), in their fixed order, numbered by seq.

    Measured request i uses prompt (s + i) mod n (cycling), s = 0 unless a run of a block
    serves fewer requests than the workload has prompts (an adaptive sweep's m*): then block
    b starts at s = b·m mod n, so every arm of a block gets the same prompts (the pairing
    holds) and the blocks rotate through the whole set instead of measuring its first m
    prompts only. Warm-ups take the prompts just before s (from the end of the list when
    s = 0), so a measured request does not find its own prompt in the prefix cache. Each
    level's seqs follow the previous level's, so (workload, seq) names one request.
    """
    n = len(workload.prompts)
    base = level * (settings.warmup + settings.requests)
    start = (run.block or 0) * settings.requests % n if settings.requests < n else 0

    def job(seq: int, prompt: Prompt, warmup: bool) -> Job:
        label = RequestLabel(
            arm=run.arm,
            restart=run.restart,
            seq=seq,
            workload=workload.name,
            prompt_id=prompt.id,
            warmup=warmup,
            concurrency=settings.concurrency[level],
        )
        return Job(label=label, prompt=prompt.prompt, messages=prompt.messages)

    warm = [
        job(base + j, workload.prompts[(start - 1 - j) % n], True) for j in range(settings.warmup)
    ]
    measured = [
        job(base + settings.warmup + i, workload.prompts[(start + i) % n], False)
        for i in range(settings.requests)
    ]
    return warm, measured
