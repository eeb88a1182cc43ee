"""Named checks of the rules: what a `when` condition cannot say (positions, workers, causes)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from diagnostic.schema.logfacts import GRAPHLESS_PLATFORMS, LogFacts, RunSources

__all__ = ["RULE_CHECKS", "CheckResult"]

CheckResult = dict[str, Any] | None

# Why llama.cpp turned CUDA graphs off, by the reason its debug line (or setting) names.
_GRAPH_CAUSES: tuple[tuple[str, str], ...] = (
    (
        "GPU architecture",
        "the GPU's architecture (these builds capture CUDA graphs from compute capability 8.0, "
        "Ampere, up)",
    ),
    ("split buffer", "the model split across GPUs by rows (--split-mode row)"),
    ("mul_mat_id", "mixture-of-experts layers (mul_mat_id), which graphs do not cover here"),
    ("too many consecutive updates", "a graph that changed between steps too often"),
    ("unsupported", "an operation CUDA graphs cannot capture"),
    ("GGML_CUDA_DISABLE_GRAPHS", "GGML_CUDA_DISABLE_GRAPHS set in the environment"),
    ("USE_GRAPHS = 0", "a build made without CUDA graphs (USE_GRAPHS = 0)"),
)
_BATCH = "batch size > 1"
_BATCH_SPEC = (
    "batches of more than one token: every verify batch of speculation (1 + k tokens) is one, "
    "as is prompt processing"
)
_BATCH_PLAIN = "batches of more than one token (prompt processing, parallel requests)"


def _draft_too_long(facts: LogFacts, params: dict[str, Any]) -> CheckResult:
    """Trailing draft positions accepted less often than `threshold`: k can come down."""
    summary = facts.acceptance_summary
    threshold = float(params.get("threshold", 0.2))
    rates = summary.per_position if summary else []
    drafted = summary.drafted_tokens if summary else None
    if len(rates) < 2 or (drafted is not None and drafted < params.get("min_drafted_tokens", 0)):
        return None
    keep = len(rates)
    while keep > 0 and rates[keep - 1] < threshold:
        keep -= 1
    if keep == len(rates):
        return None
    weak = ", ".join(f"{i + 1}: {rates[i]:.2f}" for i in range(keep, len(rates)))
    return {"k": len(rates), "weak_positions": weak, "suggested_k": max(keep, 1)}


def _workers_disagree(facts: LogFacts, params: dict[str, Any]) -> CheckResult:
    """Workers of one server resolved different capture modes (a worker whose capture is not
    in the log, UNKNOWN, disagrees with nobody)."""
    modes = {w: m for w, m in facts.capture.per_worker.items() if m != "UNKNOWN"}
    if len(set(modes.values())) < 2:
        return None
    return {"per_worker": ", ".join(f"{w}: {m}" for w, m in modes.items())}


def _nodes_disagree(group: RunSources, params: dict[str, Any]) -> CheckResult:
    """The log sources of one run (its nodes, their workers) resolved differently."""
    return {"differences": "; ".join(group.differences)} if group.differences else None


def _llamacpp_graph_causes(facts: LogFacts, params: dict[str, Any]) -> CheckResult:
    """The causes the log gives for llama.cpp running without CUDA graphs, in words: the GPU,
    MoE layers, a row split, the environment, the build, or multi-token batches (speculation's
    verify batches among them only when speculation is on)."""
    texts = " ".join(e.text for e in [*facts.fallbacks, *facts.capture.evidence])
    texts += " " + facts.capture.reason
    causes = [words for key, words in _GRAPH_CAUSES if key in texts]
    if _BATCH in texts:
        causes.append(_BATCH_SPEC if facts.spec.enabled else _BATCH_PLAIN)
    if not causes:
        return None
    return {"causes": "; ".join(causes)}


# What turned SGLang's decode graphs off, when the settings say it (else the batch did).
_GRAPHS_OFF_FLAGS = ("disable-cuda-graph", "disable_cuda_graph", "disable-decode-cuda-graph")


def _decode_graph_cause(facts: LogFacts, params: dict[str, Any]) -> CheckResult:
    """Why decode batches ran without CUDA graphs: the launch setting that turned graphs off
    (--disable-cuda-graph) when the text shows one, else a batch larger than the captured
    sizes or a mode that cannot be captured."""
    flag = next((f for f in _GRAPHS_OFF_FLAGS if facts.requested.get(f) is True), None)
    if flag is not None:
        name = "--" + flag.replace("_", "-")
        return {
            "cause": f"the launch setting {name} turned CUDA graphs off for every step",
            "fix": f"Remove {name} and measure again; then raise --cuda-graph-max-bs if "
            "batches still exceed the captured sizes.",
        }
    return {
        "cause": "a batch larger than the captured sizes, or a mode that cannot be captured",
        "fix": "Raise --cuda-graph-max-bs to cover the running batch sizes (see #running-req), "
        "or lower the concurrency of the benchmark; with speculation the verify batch is "
        "larger than the decode batch.",
    }


def _runner_fallback(facts: LogFacts, params: dict[str, Any]) -> CheckResult:
    """A speculative run that fell back to Model Runner V1 because of its speculation alone
    (a fallback for the platform or another feature happens without speculation too; on a
    CPU, TPU or XPU every vLLM run is on V1, so its baseline is too)."""
    fallback = facts.runner_fallback
    if not facts.spec.enabled or fallback is None or not fallback.by_speculation:
        return None
    if facts.platform in GRAPHLESS_PLATFORMS:
        return None
    return {"unsupported": ", ".join(fallback.unsupported)}


RULE_CHECKS: dict[str, Callable[..., Any]] = {
    "draft_too_long": _draft_too_long,
    "workers_disagree": _workers_disagree,
    "nodes_disagree": _nodes_disagree,
    "llamacpp_graph_causes": _llamacpp_graph_causes,
    "runner_fallback": _runner_fallback,
    "decode_graph_cause": _decode_graph_cause,
    "spec_capture_differs": lambda runs, params: None,  # cross-run: see rules.apply_rules
}
