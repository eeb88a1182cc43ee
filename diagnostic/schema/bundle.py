"""Pydantic models of the bundle format (schema_version 3) shared by every stage; no I/O."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BeforeValidator,
    Field,
    StringConstraints,
    model_validator,
)

from diagnostic import defaults
from diagnostic.schema.base import Stored, Strict
from diagnostic.schema.telemetry import QuietWindow, TelemetrySource

# Bundle format history (bump SCHEMA_VERSION and add an upgrade in bundle.py on any change
# that an older reader would misread; adding an optional field is not such a change):
#   1 — 2026-11: manifest.json, runs/<arm>-r<restart>/{run.json, server.log, metrics_*.prom,
#       requests.jsonl}, findings.json.
#   2 — 2026-12: several logs per run: runs/<arm>-r<restart>/logs/<source>.log, run.json
#       `sources` (source name -> file in the run folder) and `log_errors`; a v1 run opens
#       with its server.log as source `server` (bundle/upgrade.py: upgrade_to_2).
#   3 — 2027-01: seals. run.json `seal` (the sha256 of each file of the run, taken when the run
#       ended), manifest.json `bundle_id` (named by every seal) and `collected` (the runs
#       `collect` was asked for: the schedule of a bundle measured by hand), time_plan
#       `ended_early`. A v2 bundle opens unchanged as one recorded before sealing
#       (bundle/upgrade.py: upgrade_to_3); an older diagnose refuses a v3 bundle with
#       "newer than this diagnose reads" instead of a field it does not know.
#   (3, an optional field) 2026-12: run.json `telemetry` and runs/<run>/telemetry/<source>.csv
#       (schema/telemetry.py: the CSV's own format line, diagnose-telemetry/1).
#   (3, an optional field) 2026-12: run.json `log_notes` (a plan log command's copy cut to its
#       tail, or a log rotated between two fetches).
#   (3, optional fields) 2027-02: manifest.json `sealing` (written when the bundle is created:
#       its runs are sealed, so a run without a seal is a seal removed) and `seal` (the
#       manifest's own digest, taken at each write); seals of format diagnose-seal/2, whose
#       digest covers `sealed_at` too (bundle/seal.py).
#   (3, an optional field) 2026-12: run.json `quiet`, the host measured in a quiet window before
#       the run's first request (schema/telemetry.py QuietWindow); a run without it has none.
SCHEMA_VERSION = 3
MAIN_SOURCE = "server"  # the log source of the server process itself (its stdout, --log PATH)
_SOURCE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+=-]*$")

RunStatus = Literal["running", "ok", "failed", "interrupted"]
# The first line of the text a seal's digest is taken over: /2 (today) covers sealed_at too.
SealFormat = Literal["diagnose-seal/1", "diagnose-seal/2"]
SEAL_FORMAT: SealFormat = "diagnose-seal/2"
MANIFEST_SEAL_FORMAT: Literal["diagnose-manifest/1"] = "diagnose-manifest/1"
TokenSource = Literal["usage", "chunks", "tokenizer"]


def _one_level(value: Any) -> Any:
    return [value] if isinstance(value, int) and not isinstance(value, bool) else value


def _distinct_levels(value: list[int]) -> list[int]:
    if not value or any(level < 1 for level in value) or len(set(value)) != len(value):
        raise ValueError("concurrency levels must be distinct integers >= 1")
    return value


# Concurrency levels as plans and settings take them: one integer or a list of distinct ones.
ConcurrencyLevels = Annotated[
    list[int], BeforeValidator(_one_level), AfterValidator(_distinct_levels)
]


_FOLDER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+=-]{0,63}$")
NAME_RULE = "1 to 64 letters, digits and . _ + = -, starting with a letter or digit"


def folder_name(kind: str, name: str) -> str:
    """An arm or workload name, checked: it names a folder (runs/<arm>-r<n>) or a file
    (metrics_<workload>_….prom), so it holds no / or NUL and fits a file name."""
    if not _FOLDER_NAME.match(name):
        shown = repr(name[:40] + "…") if len(name) > 40 else repr(name)
        why = f"is {len(name)} characters long" if len(name) > 64 else "cannot name a folder"
        raise ValueError(f"{kind} name {shown} {why}; use {NAME_RULE}")
    return name


def source_name(name: str) -> str:
    """A log source name, checked: it becomes the file name logs/<source>.log."""
    if not _SOURCE_NAME.match(name) or name.endswith(".log") or len(name) > 100:
        raise ValueError(
            f"log source name {name!r} cannot name a file; use letters, digits and . _ + = - "
            "(starting with a letter or digit, without .log)"
        )
    return name


def _relative_file(path: str) -> str:
    parts = path.split("/")
    if not path or path.startswith("/") or any(p in ("", ".", "..") for p in parts):
        raise ValueError(f"{path!r} is not a file inside the run folder")
    return path


# Log sources of a run: name -> file relative to the run folder (logs/<name>.log).
LogSources = dict[
    Annotated[str, AfterValidator(source_name)], Annotated[str, AfterValidator(_relative_file)]
]


def utc_now() -> str:
    """Current UTC time as an ISO 8601 string (what every timestamp in a bundle uses)."""
    return datetime.now(UTC).isoformat(timespec="seconds")


class Engagement(Stored):
    """Who the measurement is for."""

    client: str | None = Field(None, description="Client organisation shown on the report cover")
    site: str | None = Field(None, description="Cluster or site name")
    consultant: str | None = Field(None, description="Who ran the measurements")

    def merged(self, override: Engagement | None) -> Engagement:
        """These fields, each replaced by `override`'s where that one is set."""
        if override is None:
            return self
        given = {k: v for k, v in override.model_dump().items() if v}
        return self.model_copy(update=given)


class Target(Stored):
    """The server being measured."""

    base_url: str | None = Field(None, description="Base URL of the OpenAI-compatible server")
    model: str | None = Field(None, description="Model name sent in requests")


class ArmSpec(Stored):
    """One server configuration of the plan."""

    name: str = Field(description="Arm identifier, e.g. 'baseline' or 'ngram-k3'")
    launch: str | None = Field(None, description="Launch command (secrets redacted), if any")
    stop: str | None = Field(None, description="Stop command, when the plan gave one")
    health: str | None = Field(None, description="Health command, when the plan gave one")
    logs: dict[str, str] = Field(
        default_factory=dict, description="Log commands by source, when the plan gave them"
    )
    env: dict[str, str] = Field(default_factory=dict, description="Extra environment (redacted)")
    params: dict[str, int | float | str] = Field(
        default_factory=dict, description="Sweep parameters of this arm, e.g. {'k': 3}"
    )
    speculative: bool | None = Field(None, description="Whether the arm turns speculation on")
    aa_of: str | None = Field(None, description="Name of the arm this one repeats (A/A noise arm)")
    baseline: str | None = Field(
        None,
        description="Arm this one is compared with (default: the arm whose launch "
        "differs only in speculation flags, else the plan's baseline)",
    )


class Design(Strict):
    """How the sweep decided when to stop: the report decides with the same design."""

    kind: Literal["fixed", "adaptive"] = Field(
        "fixed", description="fixed: every planned restart; adaptive: group-sequential looks"
    )
    looks: list[int] = Field(
        default_factory=list, description="Adaptive: restarts (blocks) per arm at each look"
    )
    alpha: float = Field(
        0.05, gt=0, lt=1, description="Overall two-sided level, before multiplicity"
    )
    target: float | None = Field(
        None,
        gt=0,
        lt=10,
        description="Adaptive: the relative speedup the plan is powered to find (0.1 = +10%); "
        "at an interim look a comparison whose data reject a speedup this large (one-sided t "
        "test at futility_alpha) can stop, INCONCLUSIVE. None: no futility stop",
    )
    futility_alpha: float = Field(
        defaults.FUTILITY_ALPHA,
        gt=0,
        lt=0.5,
        description="One-sided level of the futility test at each interim look",
    )
    pool_aa: bool = Field(
        False,
        description="Adaptive: a speculative arm is compared with the mean of its baseline "
        "and the baseline's A/A repeat in each block (two starts of the baseline per block); "
        "the A/A check still compares the two",
    )


class PlanSpec(Stored):
    """What the bundle set out to measure."""

    arms: list[ArmSpec] = Field(default_factory=list, description="Server configurations")
    workloads: list[str] = Field(default_factory=list, description="Prompt sets, e.g. code, prose")
    requests: int = Field(
        defaults.REQUESTS, ge=1, description="Measured requests per restart and workload"
    )
    warmup: int = Field(
        defaults.WARMUP, ge=0, description="Discarded requests per restart and workload"
    )
    restarts: int = Field(1, ge=1, description="Server starts per arm")
    max_tokens: int = Field(
        defaults.MAX_TOKENS, ge=1, description="Output length forced on every request"
    )
    concurrency: list[int] = Field(default_factory=lambda: [1], description="Concurrency levels")
    baseline: str | None = Field(None, description="Arm the others are compared with")
    seed: int = Field(defaults.SEED, description="Seed of the schedule and the sampler")
    order: Literal["blocks", "sequential", "manual"] = Field(
        "manual", description="How restarts were scheduled"
    )
    api: Literal["completions", "chat"] = Field("completions", description="OpenAI API used")

    @model_validator(mode="after")
    def _aa_arms_exist(self) -> PlanSpec:
        names = {arm.name for arm in self.arms}
        for arm in self.arms:
            if arm.aa_of is not None and arm.aa_of not in names:
                raise ValueError(
                    f"arm {arm.name!r} has aa_of {arm.aa_of!r}, which names no arm of the plan"
                )
        return self

    margin: float = Field(
        defaults.MARGIN, ge=0, lt=1, description="δ: ratios inside [1/(1+δ), 1+δ] are no difference"
    )
    design: Design = Field(default_factory=Design, description="Fixed or adaptive stopping")
    as_found: str | None = Field(
        None,
        description="The arm that is the client's configuration as found (the report's "
        "before-and-after leads with it); None when the plan names none",
    )


class TimePlan(Stored):
    """What the sweep planned for the day and what it took: the report's methodology states
    it (written by `sweep`, updated after each block)."""

    design: Literal["fixed", "adaptive"] = Field(description="The design that ran")
    costs_source: str = Field(description="Where the cost figures come from")
    startup_s: float = Field(ge=0, description="Seconds of one start-up (launch to healthy)")
    request_s: float = Field(ge=0, description="Seconds of one measured request, mean")
    requests: int = Field(ge=1, description="Measured requests per restart planned now")
    requests_why: str = Field(description="Why that many requests per restart")
    estimated_s: float = Field(ge=0, description="Wall-clock the sweep expected at its start")
    likely_s: float | None = Field(None, ge=0, description="Latest expectation, from measurements")
    took_s: float | None = Field(None, ge=0, description="Wall-clock taken so far / in all")
    restarts: dict[str, int] = Field(default_factory=dict, description="Restarts run, per arm")
    stopped: dict[str, str] = Field(
        default_factory=dict, description="Arms that stopped early, and why"
    )
    ended_early: str | None = Field(
        None, description="Why the sweep ended before its schedule did (--stop-on-failure)"
    )


class ManifestSeal(Stored):
    """manifest.json `seal`: the digest of every other field of the manifest as written
    (bundle/manifest_seal.py says how), so that a field edited by hand shows."""

    format: Literal["diagnose-manifest/1"] = Field(
        MANIFEST_SEAL_FORMAT, description="How the digest is made"
    )
    sealed_at: str = Field(description="UTC time the manifest was written")
    digest: str = Field(pattern=r"^[0-9a-f]{64}$", description="sha256 of the manifest's seal text")


class Manifest(Stored):
    """manifest.json: the bundle's identity and plan."""

    schema_version: int = Field(SCHEMA_VERSION, description="Bundle format version")
    tool_version: str = Field(description="diagnose version that created the bundle")
    created_at: str = Field(default_factory=utc_now, description="UTC creation time")
    engagement: Engagement = Field(default_factory=Engagement, description="Client and people")
    target: Target = Field(default_factory=Target, description="Server measured")
    plan: PlanSpec = Field(default_factory=PlanSpec, description="What was planned")
    notes: str | None = Field(None, description="Free text, e.g. how a sample was recorded")
    time_plan: TimePlan | None = Field(None, description="Sweep: the plan's estimates, and took")
    bundle_id: str | None = Field(
        None,
        description="Random id given when the bundle was created; every run's seal names it "
        "(None: recorded before seals)",
    )
    collected: list[str] = Field(
        default_factory=list,
        description="collect: every run (<arm>-r<restart>) it was asked to measure, in order: "
        "the schedule of a bundle measured by hand",
    )
    sealing: SealFormat | None = Field(
        None,
        description="How the bundle's runs are sealed, written when the bundle is created "
        "(None: recorded before this field; verify then judges by bundle_id and the seals)",
    )
    seal: ManifestSeal | None = Field(
        None, description="The manifest's own digest, taken each time diagnose writes it"
    )


class EngineInfo(Stored):
    """Which engine served the run."""

    name: str = Field("unknown", description="vllm, sglang, llamacpp or unknown")
    version: str | None = Field(None, description="Engine version as the engine reports it")


class LaunchInfo(Stored):
    """How the server process was started (sweep only)."""

    command: str = Field(description="Launch command, secrets redacted")
    env: dict[str, str] = Field(default_factory=dict, description="Extra environment, redacted")
    variables: dict[str, str] = Field(
        default_factory=dict,
        description="Values of the shell variables the command names ($MODEL), redacted",
    )
    pid: int | None = Field(None, description="Process id of the server")
    startup_s: float | None = Field(None, description="Seconds from launch to healthy")
    exit_code: int | None = Field(None, description="Exit status once stopped")


Sha256 = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")]


class RunSeal(Stored):
    """run.json `seal`: what the run's files were when the run ended (bundle/seal.py says how
    the digest is made; docs/verify.md, "Seals" and "The root hash")."""

    format: SealFormat = Field(SEAL_FORMAT, description="How the digest is made")
    sealed_at: str = Field(default_factory=utc_now, description="UTC time the run was sealed")
    bundle_id: str | None = Field(
        None, description="manifest.json bundle_id of the bundle the run was recorded into"
    )
    schedule: Sha256 = Field(
        description="sha256 of the manifest's plan and `collected` when the run was sealed"
    )
    files: dict[Annotated[str, AfterValidator(_relative_file)], Sha256] = Field(
        description="sha256 of every file of the run folder but run.json (dot-files aside), "
        "by path in the folder"
    )
    run_json: Sha256 = Field(
        description="sha256 of run.json without its seal, as canonical JSON (sorted keys, no "
        "spaces, UTF-8)"
    )
    digest: Sha256 = Field(description="sha256 of the seal's text: the run's seal, printed on site")


class RunInfo(Stored):
    """run.json: one server process (one restart of one arm)."""

    schema_version: int = Field(SCHEMA_VERSION, description="Bundle format version")
    arm: str = Field(description="Arm name")
    restart: int = Field(ge=0, description="Restart index within the arm")
    block: int | None = Field(None, description="Block of the interleaved schedule")
    started_at: str = Field(default_factory=utc_now, description="UTC start of the run")
    ended_at: str | None = Field(None, description="UTC end of the run")
    status: RunStatus = Field("running", description="running, ok, failed or interrupted")
    failure: str | None = Field(None, description="Why the run failed, when it did")
    base_url: str | None = Field(None, description="Server URL measured")
    engine: EngineInfo = Field(default_factory=EngineInfo, description="Engine and version")
    model: str | None = Field(None, description="Model served")
    server_args: dict[str, Any] = Field(
        default_factory=dict, description="Server arguments as the engine reports them"
    )
    endpoints: dict[str, Any] = Field(
        default_factory=dict, description="Raw answers of the engine's info endpoints, by path"
    )
    unreadable_endpoints: dict[str, str] = Field(
        default_factory=dict,
        description="Info endpoints whose answer could not be read (too large, nested too "
        "deeply, not in time), and why; not kept in `endpoints`",
    )
    environment: dict[str, Any] = Field(
        default_factory=dict, description="GPU, driver, CUDA, host, Python, tool version"
    )
    launch: LaunchInfo | None = Field(None, description="Launch details when sweep started it")
    logs: list[str] = Field(
        default_factory=list, description="Log files stored in the run (earlier attempts too)"
    )
    sources: LogSources = Field(
        default_factory=dict,
        description="The run's log per source (server, a node, a worker): file in the run "
        "folder, logs/<source>.log",
    )
    log_errors: dict[str, str] = Field(
        default_factory=dict,
        description="Plan log commands that failed, by source: when, exit status, stderr tail",
    )
    log_notes: dict[str, str] = Field(
        default_factory=dict,
        description="What a plan log command's copy left out, by source: a log longer than "
        "the bytes kept (only its tail is), or one rotated between two fetches",
    )
    capture: dict[str, Any] | None = Field(
        None, description="Resolved capture facts from the log (check), when known"
    )
    attempts: int = Field(
        1,
        ge=1,
        description="Server processes started for this restart (sweep): a run that did not "
        "end ok is measured afresh on a new one, warm-up first; the earlier ones' files are "
        "kept apart as *.attempt<N>.* and not analysed",
    )
    telemetry: dict[Annotated[str, AfterValidator(source_name)], TelemetrySource] = Field(
        default_factory=dict,
        description="Telemetry sources sampled during the run (telemetry/<source>.csv), or "
        "why one was absent",
    )
    quiet: QuietWindow | None = Field(
        None,
        description="This machine in a quiet window before the first request (local "
        "telemetry): VM steal, a spinning thread's CPU share, a sleeping one's lateness; the "
        "run's arm-free covariate. None: not taken",
    )
    seal: RunSeal | None = Field(
        None,
        description="The sha256 of the run's files, taken when the run ended; None while it "
        "runs, and in runs recorded before sealing (schema_version < 3)",
    )
