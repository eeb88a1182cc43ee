"""How vLLM resolved CUDA-graph capture, per worker and for the run, from the lines it printed."""

from __future__ import annotations

from dataclasses import dataclass, field

from diagnostic.engines._common import Worker, cap_append, disagreement
from diagnostic.engines.vllm.signals import mode_of
from diagnostic.schema.logfacts import GRAPHLESS_PLATFORMS, Evidence, LogFacts

__all__ = ["VWorker", "resolve_capture"]


@dataclass
class VWorker(Worker):
    """Capture evidence of one vLLM process."""

    bars: dict[str, Evidence] = field(default_factory=dict)
    v0_bars: list[Evidence] = field(default_factory=list)
    drafter_bars: list[Evidence] = field(default_factory=list)
    downgrades: list[tuple[str, Evidence]] = field(default_factory=list)
    eager: list[Evidence] = field(default_factory=list)
    planned: set[str] = field(default_factory=set)
    planned_line: Evidence | None = None
    piecewise: list[Evidence] = field(default_factory=list)  # V1 piecewise-backend DEBUG lines
    runner: str | None = None


@dataclass(frozen=True)
class _Run:
    """What the resolution needs to know about the run as a whole."""

    facts: LogFacts
    ready: bool  # the engine finished starting (capture, if any, is over)
    generation: str | None  # V0 or V1 engine
    requested: str | None  # cudagraph_mode asked for in the non-default args
    platform: str  # where the model ran (no device graphs on a CPU)


def _bar_mode(proc: VWorker, expected: str | None) -> tuple[str, str]:
    """Mode that the capture bars show, and the bars as words."""
    descs = {d.replace(" ", "") for d in proc.bars}
    shown = ", ".join(proc.bars)
    v1 = {d for d in descs if "," in d}
    if v1:
        if "mixedprefill-decode,FULL" in v1:
            return "FULL", shown
        decode_full = "decode,FULL" in v1
        mixed_piecewise = "mixedprefill-decode,PIECEWISE" in v1
        if decode_full and mixed_piecewise:
            return "FULL_AND_PIECEWISE", shown
        return ("FULL_DECODE_ONLY" if decode_full else "PIECEWISE"), shown
    if "FULL" in descs and "PIECEWISE" in descs:
        return "FULL_AND_PIECEWISE", shown
    if "FULL" in descs:  # Model Runner V2 draws one FULL bar for FULL and FULL_DECODE_ONLY
        if expected is None:
            return "UNKNOWN", shown + _ONE_FULL_BAR
        return (expected if expected in ("FULL", "FULL_DECODE_ONLY") else "FULL"), shown
    return ("PIECEWISE" if "PIECEWISE" in descs else "UNKNOWN"), shown


_ONE_FULL_BAR = (
    " (Model Runner V2 draws this one bar for FULL and FULL_DECODE_ONLY; only the engine-config"
    " line or the requested cudagraph_mode tells them apart, and the text has neither)"
)
_CUT = "the excerpt ends before capture finished; the line that set cudagraph_mode names the mode"


def _started(what: str) -> str:
    return f"capture started for {what}; the log ends before it finished"


def _own_evidence(proc: VWorker) -> bool:
    return bool(
        proc.bars
        or proc.v0_bars
        or proc.finished
        or proc.downgrades
        or proc.eager
        or proc.planned
        or proc.piecewise
    )


def _cut_bars_mode(proc: VWorker, expected: str | None) -> str | None:
    """The mode bars show before capture finished, when the bars already seen decide it:
    Model Runner V1 draws the mixed-batch bar first, so its PIECEWISE bar alone leaves a FULL
    decode bar possible; a mixed FULL bar, or both kinds, decide. So do the bars of the mode
    configured (or set by a warning) when they are the ones seen: resolution only lowers a
    mode, and a lowered mode draws other bars."""
    descs = {d.replace(" ", "") for d in proc.bars}
    if "mixedprefill-decode,FULL" in descs:
        return "FULL"
    piecewise = {"mixedprefill-decode,PIECEWISE", "PIECEWISE"} & descs
    full = {"decode,FULL", "FULL"} & descs
    if piecewise and full:
        return "FULL_AND_PIECEWISE"
    if expected == "PIECEWISE" and piecewise and not full:
        return expected
    if expected in ("FULL_DECODE_ONLY", "FULL") and full and not piecewise:
        return expected if expected == "FULL_DECODE_ONLY" or "FULL" in descs else None
    return None


def _resolve_one(run: _Run, proc: VWorker, config: VWorker) -> tuple[str, str, list[Evidence]]:
    """(mode, reason, evidence) for one worker from its own lines and config-time lines."""
    downgrades = config.downgrades + proc.downgrades
    expected = downgrades[-1][0] if downgrades else run.facts.capture.configured or run.requested
    lines = [e for _, e in downgrades] + config.eager + proc.eager
    if proc.bars:
        mode, shown = _bar_mode(proc, expected)
        evidence = lines + list(proc.bars.values()) + proc.finished
        if not proc.finished and not run.ready:
            if downgrades:
                return downgrades[-1][0], f"{_CUT} (capture bars: {shown})", evidence
            cut = _cut_bars_mode(proc, expected) or _planned_mode(proc.planned, expected)
            if cut:
                return cut, _started(f"{cut} (bars: {shown})"), evidence
            return (
                "UNKNOWN",
                _started(f"the graphs of the bars shown ({shown})")
                + "; more bars could have followed",
                evidence,
            )
        if mode == "UNKNOWN":
            return mode, f"capture bars: {shown}", evidence
        reason = f"capture bars: {shown}"
        if downgrades:
            reason += f"; the engine set cudagraph_mode={downgrades[-1][0]} before capture"
        return mode, reason, evidence
    if proc.v0_bars and run.generation == "V1" and (expected or proc.piecewise):
        # vLLM 0.9 V1 drew V0's "Capturing CUDA graph shapes" bar: the config says the mode,
        # or the piecewise backend's own lines do.
        mode = expected or "PIECEWISE"
        why = "its config line" if expected else "the piecewise backend's capture lines"
        if not proc.finished and not run.ready:
            return mode, _started(f"{mode} ({why})"), lines + proc.v0_bars + proc.piecewise
        return (
            mode,
            "V1 engine with the 'Capturing CUDA graph shapes' bar of vLLM <= 0.10; mode from "
            + why,
            lines + proc.v0_bars + proc.piecewise[:1] + proc.finished,
        )
    if proc.v0_bars or (run.generation == "V0" and proc.finished):
        return (
            "CAPTURED",
            "vLLM V0 captured decode graphs (V0 has no capture modes)",
            proc.v0_bars + proc.finished,
        )
    if proc.planned and not proc.finished and not run.ready:
        planned = _planned_mode(proc.planned, expected)
        shown = ", ".join(sorted(proc.planned))
        evidence = lines + ([proc.planned_line] if proc.planned_line else [])
        if planned:
            return planned, _started(f"{shown} graphs ('Profiling CUDA graph memory')"), evidence
        return "UNKNOWN", _started(f"{shown} graphs, FULL or FULL_DECODE_ONLY"), evidence
    if proc.finished:
        named = expected if expected not in (None, "NONE") else None
        if proc.planned:
            named = _planned_mode(proc.planned, expected) or named
        if named is None:
            return (
                "CAPTURED",
                "'Graph capturing finished': graphs were captured; the text names no mode "
                "(no bars, config line or profiling line)",
                lines + proc.finished,
            )
        source = "the downgrade line" if downgrades else "the config line"
        return (
            named,
            f"graphs captured (no bars from this worker); mode from {source}",
            lines + proc.finished + ([proc.planned_line] if proc.planned_line else []),
        )
    if lines and (config.eager or proc.eager or expected == "NONE"):
        why = "eager mode" if config.eager or proc.eager else "cudagraph_mode set to NONE"
        return "NONE", f"{why}: no capture bars, no 'Graph capturing finished'", lines
    if run.ready:
        return (
            "NONE",
            "no capture bars and no 'Graph capturing finished' in a started engine",
            lines,
        )
    if downgrades:
        return downgrades[-1][0], _CUT, lines
    return "UNKNOWN", "the log ends before CUDA-graph capture", lines


def _planned_mode(planned: set[str], expected: str | None = None) -> str | None:
    """The mode the modes profiled for capture show (`PIECEWISE=51, FULL=35`)."""
    if {"PIECEWISE", "FULL"} <= planned:
        return "FULL_AND_PIECEWISE"
    if planned == {"PIECEWISE"}:
        return "PIECEWISE"
    if planned == {"FULL"} and expected in ("FULL", "FULL_DECODE_ONLY"):
        return expected
    return None


def resolve_capture(
    facts: LogFacts,
    workers: list[VWorker],
    config: VWorker,
    *,
    configured_line: Evidence | None,
    ready: bool,
    generation: str | None,
) -> None:
    """Fill facts.capture: per worker from its own lines, then the run (agreeing or not)."""
    run = _Run(
        facts, ready, generation, mode_of(facts.requested.get("compilation_config")), facts.platform
    )
    capture = facts.capture
    if run.platform in GRAPHLESS_PLATFORMS:
        capture.resolved = "NONE"
        capture.reason = (
            f"the model ran on {run.platform.upper()}: no CUDA graphs exist there "
            "(cudagraph_mode is NONE with or without --enforce-eager; compiling changes nothing)"
        )
        if configured_line:
            capture.evidence.append(configured_line)
        return
    own = [w for w in workers if _own_evidence(w)]
    if configured_line:
        capture.evidence.append(configured_line)
    results = {w.name: _resolve_one(run, w, config) for w in own}
    if not results:
        mode, reason, lines = _resolve_one(run, VWorker("run"), config)
        capture.resolved, capture.reason = mode, reason  # type: ignore[assignment]
        for e in lines:
            cap_append(capture.evidence, e)
        capture.evidence.sort(key=lambda e: e.line)
        return
    capture.per_worker = {name: r[0] for name, r in results.items()}  # type: ignore[misc]
    modes = set(capture.per_worker.values())
    first = next(iter(results.values()))
    if len(modes) == 1:
        capture.resolved, capture.reason = first[0], first[1]  # type: ignore[assignment]
        if len(results) > 1:
            capture.reason += f" (all {len(results)} workers agree)"
    else:
        capture.resolved = "UNKNOWN"
        capture.reason = disagreement(capture.per_worker, "worker")
    for _, _, lines in results.values():
        for e in lines:
            cap_append(capture.evidence, e)
    capture.evidence.sort(key=lambda e: e.line)
