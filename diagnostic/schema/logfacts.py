"""Models of what `diagnose check` reads from a server log and concludes from it; no I/O."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from diagnostic.schema.base import Strict
from diagnostic.schema.bundle import SCHEMA_VERSION

EngineName = Literal["vllm", "sglang", "llamacpp", "trtllm", "unknown"]
# Where the model ran. Device graphs (CUDA graphs, HIP graphs on ROCm, ACL graphs on Ascend)
# exist on cuda, rocm and npu only; a CPU, Metal or Vulkan server never captures any.
Platform = Literal["cuda", "rocm", "npu", "xpu", "tpu", "cpu", "metal", "vulkan", "unknown"]
GRAPHLESS_PLATFORMS: tuple[str, ...] = ("cpu", "metal", "vulkan", "xpu", "tpu")
CaptureMode = Literal[
    "FULL_AND_PIECEWISE", "FULL", "FULL_DECODE_ONLY", "PIECEWISE", "NONE", "CAPTURED", "UNKNOWN"
]
Severity = Literal["info", "warning", "error"]
SourceKind = Literal["startup", "command", "runtime", "metric"]
# Stored lists are capped so a gigabyte log still gives a small findings.json; the summaries
# are computed over every line.
MAX_SAMPLES = 200
MAX_WARNINGS = 200
MAX_EVIDENCE = 20


class Evidence(Strict):
    """One log line that supports a conclusion."""

    line: int = Field(
        description="1-based line number in the file (lines end with \\n); 0 for the launch "
        "command a bundle recorded beside the log"
    )
    text: str = Field(description="The line, ANSI colours removed, progress redraws collapsed")


class FieldSource(Strict):
    """Where the value of one field came from: the kind of line and the line itself."""

    kind: SourceKind = Field(
        description="startup (a start-up or settings line), command (a launch command), "
        "runtime (a serving line), metric (an acceptance or counter line)"
    )
    line: int = Field(description="1-based line number; 0 for the command a bundle recorded")
    text: str = Field(description="The line, as in `Evidence`")


class SpecFacts(Strict):
    """Speculative decoding as the engine was asked to run it."""

    enabled: bool | None = Field(None, description="True/False when the log says; None unknown")
    method: str | None = Field(
        None, description="Method as the engine names it: vLLM eagle3/ngram, SGLang EAGLE/EAGLE3"
    )
    num_draft_tokens: int | None = Field(
        None,
        description="vLLM num_speculative_tokens, SGLang speculative_num_draft_tokens, "
        "llama.cpp draft max",
    )
    drafter: str | None = Field(None, description="Draft model path, when there is one")


class CaptureFacts(Strict):
    """CUDA-graph capture: what the config asked for and what the engine really did."""

    configured: str | None = Field(
        None, description="Mode in the engine's config line (vLLM) or setting; not the outcome"
    )
    resolved: CaptureMode = Field(
        "UNKNOWN", description="Mode decided from what happened (bars, capture lines, warnings)"
    )
    reason: str = Field("", description="Why `resolved` is what it is, in one sentence")
    evidence: list[Evidence] = Field(
        default_factory=list, description="Lines behind `configured` and `resolved`"
    )
    per_worker: dict[str, CaptureMode] = Field(
        default_factory=dict,
        description="Mode per worker that logged capture evidence of its own",
    )


class RunnerFallback(Strict):
    """vLLM ran Model Runner V1 instead of V2, and what V2 did not support."""

    unsupported: list[str] = Field(description="What Model Runner V2 does not support, as printed")
    by_speculation: bool = Field(
        description="Every unsupported item is about speculation: the same server without "
        "speculation would stay on V2"
    )
    evidence: Evidence = Field(description="The fallback line")


class CaptureTiming(Strict):
    """One 'capture finished' line: how long it took and the memory it used."""

    line: int = Field(description="Line number")
    worker: str = Field(description="Process or rank that captured")
    kind: str = Field(
        "target",
        description="target (0.4), target-decode, target-verify, target-prefill, draft, "
        "draft-extend, piecewise…",
    )
    seconds: float | None = Field(None, description="Capture time in seconds")
    memory_gib: float | None = Field(None, description="Memory taken by the graphs, GiB")


class AcceptanceSample(Strict):
    """One runtime line about speculation (vLLM SpecDecoding metrics, SGLang decode batch, ...)."""

    line: int = Field(description="Line number")
    mean_acceptance_length: float | None = Field(
        None, description="Tokens per verify step, bonus token included"
    )
    per_position: list[float] = Field(
        default_factory=list, description="Acceptance rate of draft position 1..k"
    )
    accept_rate: float | None = Field(None, description="Accepted / drafted tokens, 0..1")
    accepted: int | None = Field(None, description="Accepted draft tokens in the interval")
    drafted: int | None = Field(None, description="Drafted tokens in the interval")
    cuda_graph: bool | None = Field(None, description="SGLang decode batch: ran in a CUDA graph")
    running: int | None = Field(None, description="Running requests (SGLang decode batch)")
    gen_throughput: float | None = Field(None, description="Generation tokens/s in the line")


class AcceptanceSummary(Strict):
    """Every acceptance line of the log, summarised (the stored samples are capped)."""

    samples: int = Field(0, description="Lines summarised")
    mean_acceptance_length: float | None = Field(
        None, description="Mean acceptance length, weighted by drafted tokens when known"
    )
    min_acceptance_length: float | None = Field(None, description="Lowest line value")
    max_acceptance_length: float | None = Field(None, description="Highest line value")
    per_position: list[float] = Field(
        default_factory=list, description="Per-position acceptance, averaged over lines"
    )
    accept_rate: float | None = Field(None, description="Accepted / drafted over all lines")
    accepted_tokens: int | None = Field(None, description="Accepted draft tokens, when printed")
    drafted_tokens: int | None = Field(None, description="Drafted tokens, when printed")
    decode_batches: int = Field(0, description="Decode-batch lines with a cuda graph flag")
    cuda_graph_false: int = Field(0, description="Of which ran without a CUDA graph")
    first_cuda_graph_false: Evidence | None = Field(
        None, description="First decode batch that ran without a CUDA graph"
    )


def draft_length(engine: str, num_draft_tokens: int | None) -> int | None:
    """k, the drafts proposed per verification pass: SGLang's speculative_num_draft_tokens
    counts the verified root too (k + 1); the other engines' settings are k itself."""
    if num_draft_tokens is None:
        return None
    return num_draft_tokens - 1 if engine == "sglang" else num_draft_tokens


EARLIER_ATTEMPT = "earlier attempt"  # LogFacts.source of a failed start's log: not a run


class LogFacts(Strict):
    """Everything one server log says about the run (one entry of check's `runs[]`)."""

    path: str = Field(description="Log file read")
    label: str | None = Field(None, description="Run name (bundle run id or folder name)")
    run_id: str | None = Field(None, description="Bundle run (<arm>-r<restart>) of the log")
    source: str | None = Field(
        None,
        description="Log source within that run: server, a node, a worker; EARLIER_ATTEMPT "
        "for the log of a start that failed before the run's measured one",
    )
    engine: EngineName = Field("unknown", description="vllm, sglang, llamacpp or unknown")
    version: str | None = Field(None, description="Engine version from the log")
    model: str | None = Field(None, description="Model served")
    spec: SpecFacts = Field(default_factory=SpecFacts, description="Speculative decoding")
    capture: CaptureFacts = Field(default_factory=CaptureFacts, description="CUDA-graph capture")
    workers: list[str] = Field(default_factory=list, description="Processes or ranks seen")
    tensor_parallel_size: int | None = Field(None, description="TP size from the settings")
    model_runner: str | None = Field(
        None,
        description="Engine runtime that ran: vLLM V0, V1 or V2 model runner, TensorRT-LLM "
        "pytorch or tensorrt backend; None when the log does not say",
    )
    runner_fallback: RunnerFallback | None = Field(
        None, description="vLLM switched from Model Runner V2 to V1 for this configuration"
    )
    attention_backend: str | None = Field(None, description="Attention backend the engine chose")
    platform: Platform = Field(
        "unknown",
        description="Where the model ran, as the text names it: cuda, rocm, npu (Ascend), cpu, "
        "metal, vulkan, xpu, tpu; unknown when nothing says",
    )
    requested: dict[str, Any] = Field(
        default_factory=dict,
        description="What the user asked for: vLLM non-default args, SGLang server_args, flags",
    )
    drafter_architecture: str | None = Field(
        None, description="Drafter architecture when the log names it (e.g. an Eagle3 class)"
    )
    spec_evidence: list[Evidence] = Field(default_factory=list, description="Lines behind `spec`")
    sources: dict[str, FieldSource] = Field(
        default_factory=dict,
        description="Per field (`engine`, `version`, `spec.enabled`, `spec.method`, "
        "`spec.num_draft_tokens`, `capture.resolved`, ...): the line its value came from and "
        "its kind",
    )
    capture_timings: list[CaptureTiming] = Field(
        default_factory=list, description="Capture durations and memory, per worker"
    )
    acceptance: list[AcceptanceSample] = Field(
        default_factory=list, description=f"Runtime acceptance lines (first {MAX_SAMPLES})"
    )
    acceptance_summary: AcceptanceSummary | None = Field(
        None, description="All acceptance lines summarised; None when there were none"
    )
    requests_decoded: int | None = Field(
        None,
        description="Requests that generated ≥ 2 tokens, from per-request timing lines "
        "(llama.cpp); None when the engine prints no such lines",
    )
    fallbacks: list[Evidence] = Field(
        default_factory=list,
        description="Silent switches: model-runner fallback, mode overrides, graphs disabled",
    )
    warnings: list[Evidence] = Field(
        default_factory=list, description=f"Warning lines (first {MAX_WARNINGS})"
    )
    warnings_total: int = Field(0, description="Warning lines in the whole log")
    matches: dict[str, list[Evidence]] = Field(
        default_factory=dict, description="Lines matched by pattern rules, by rule id"
    )
    lines: int = Field(0, description="Lines in the file")
    bytes: int = Field(0, description="Bytes read")
    notes: list[str] = Field(
        default_factory=list, description="What the reader had to work around (long lines, ...)"
    )
    unread: list[str] = Field(
        default_factory=list,
        description="Facts the text does not state or the reader could not read (version, "
        "platform, speculation, method, k, capture mode), each with what would say it",
    )
    not_understood: list[Evidence] = Field(
        default_factory=list,
        description="Lines that look like speculation or capture lines but were not read "
        "(a fork's own format, a cut line)",
    )

    @model_validator(mode="before")
    @classmethod
    def _from_older(cls, data: Any) -> Any:
        """A findings.json written before the platform was read named it `backend` (cuda,
        cpu, npu or null): read it as the platform."""
        if isinstance(data, dict) and "backend" in data:
            data = dict(data)
            backend = data.pop("backend")
            data.setdefault("platform", backend or "unknown")
        return data


class Finding(Strict):
    """One rule that fired: what is wrong, the lines that show it, what to do."""

    rule: str = Field(description="Rule id (checklists/rules/*.yaml)")
    severity: Severity = Field(description="info, warning or error")
    title: str = Field("", description="The rule's title")
    message: str = Field(description="What the rule found, with the numbers")
    evidence: list[Evidence] = Field(default_factory=list, description="Lines that show it")
    advice: str = Field("", description="What to do about it")
    reference: str | None = Field(None, description="Where to read more")
    run: str | None = Field(None, description="Log path of the run; None for cross-run findings")
    runs: list[str] = Field(
        default_factory=list, description="Log paths a cross-run finding compares"
    )


class Comparison(Strict):
    """A speculative run beside the non-speculative run of the same engine and settings."""

    engine: EngineName = Field(description="Engine of both runs")
    baseline: str = Field(description="Path of the run without speculation")
    baseline_label: str | None = Field(None, description="Its run name")
    baseline_resolved: CaptureMode = Field(description="Its resolved capture mode")
    spec: str = Field(description="Path of the run with speculation")
    spec_label: str | None = Field(None, description="Its run name")
    spec_method: str | None = Field(None, description="Speculation method of the spec run")
    spec_resolved: CaptureMode = Field(description="Its resolved capture mode")
    baseline_runner: str | None = Field(None, description="Model runner of the baseline")
    spec_runner: str | None = Field(None, description="Model runner of the spec run")
    same: bool | None = Field(description="Whether both resolved the same mode; None if unknown")
    matched_on: str = Field(description="How the pair was chosen (same settings, only baseline)")


class SourceCapture(Strict):
    """One log source of a bundle run (the server, a node) in check's per-source table."""

    source: str = Field(description="Log source name (server, node1, …)")
    path: str = Field(description="Its log file")
    engine: EngineName = Field(description="Engine the log shows")
    resolved: CaptureMode = Field(description="Capture mode the source resolved")
    per_worker: dict[str, CaptureMode] = Field(
        default_factory=dict, description="Mode per worker inside this log (Ray, TP/DP ranks)"
    )
    spec: SpecFacts = Field(default_factory=SpecFacts, description="Speculation it ran with")


class RunSources(Strict):
    """Every log source of one bundle run side by side: did all nodes and workers agree?"""

    run_id: str = Field(description="Bundle run, <arm>-r<restart>")
    sources: list[SourceCapture] = Field(description="One entry per log source")
    differences: list[str] = Field(
        default_factory=list,
        description="What the sources (and their workers) disagree on: capture mode, "
        "speculation; empty when they agree or only one says",
    )


class CheckReport(Strict):
    """`diagnose check --json` output and the bundle's findings.json."""

    schema_version: int = Field(SCHEMA_VERSION, description="Bundle format version")
    runs: list[LogFacts] = Field(default_factory=list, description="One entry per log read")
    findings: list[Finding] = Field(default_factory=list, description="Rules that fired")
    comparisons: list[Comparison] = Field(
        default_factory=list, description="Spec vs no-spec pairs when several runs were checked"
    )
    log_sources: list[RunSources] = Field(
        default_factory=list, description="Per bundle run: capture per log source and worker"
    )

    def exit_code(self) -> int:
        """0 when no finding is an error, 1 otherwise (2 is for unusable input, raised)."""
        return 1 if any(f.severity == "error" for f in self.findings) else 0
