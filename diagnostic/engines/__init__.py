"""Engine knowledge: which engine wrote a log and what the log says (`parse_log`).

One module per engine (vllm, sglang, llamacpp, trtllm) holds its anchors, detection signatures, its
signals as data (`SIGNALS`, read by `_signals`), its launch-command markers (`COMMANDS`) and
its log parser; `_lines` is the streaming reader they share. Any text in which one engine's
signatures or signals show is read, however short; text with none gets a note naming what
was looked for.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from diagnostic.engines import llamacpp, sglang, trtllm, vllm
from diagnostic.engines._common import ev
from diagnostic.engines._lines import Line, LineScanner, read_head
from diagnostic.engines._platform import ANCHORS as PLATFORM_ANCHORS
from diagnostic.engines._signals import SignalReader, record_sources
from diagnostic.engines.command import ASSIGNMENT_ANCHORS, COMMAND_ANCHORS, ShellVariables
from diagnostic.schema.logfacts import MAX_EVIDENCE, Evidence, LogFacts

__all__ = ["ENGINES", "LOOKED_FOR", "LinePattern", "detect_engine", "parse_log", "unread"]

ENGINES: dict[str, ModuleType] = {
    "vllm": vllm,
    "sglang": sglang,
    "llamacpp": llamacpp,
    "trtllm": trtllm,
}
MAX_UNDETECTED_LINES = 200_000
LOOKED_FOR = (
    "start-up banners and settings lines (vLLM version / engine config / non-default args, "
    "SGLang server_args, llama.cpp build, TensorRT-LLM version), capture and downgrade lines, "
    "speculation metrics (SpecDecoding / Speculative metrics, accept len, draft acceptance, "
    "/metrics counters), decode-batch and timing lines, launch commands (vllm serve, python "
    "-m sglang.launch_server, llama-server, trtllm-serve)"
)


@dataclass(frozen=True)
class LinePattern:
    """A line a rule looks for: a literal the line must contain, optionally a regex too."""

    key: str
    contains: tuple[str, ...]
    regex: re.Pattern[str] | None = None
    engines: tuple[str, ...] = ()

    def applies(self, engine: str) -> bool:
        """Whether the pattern is meant for logs of this engine."""
        return not self.engines or engine in self.engines

    def matches(self, text: str) -> bool:
        """Whether a line's text matches."""
        for literal in self.contains:
            if literal in text:
                return self.regex is None or self.regex.search(text) is not None
        return False


def _signals(module: ModuleType, *, head: bool = False) -> tuple[bytes, ...]:
    """The literals of an engine's signals (those of the log's head, or the others) and its
    command markers."""
    literals = tuple(s.contains.encode() for s in module.SIGNALS if s.head == head)
    return literals + (() if head else module.COMMANDS)


def _signatures(module: ModuleType) -> tuple[bytes, ...]:
    """What identifies an engine: its signatures, its signals' literals, its command markers."""
    everything = module.SIGNATURES + _signals(module) + _signals(module, head=True)
    return tuple(dict.fromkeys(everything))


def _anchors(module: ModuleType) -> list[bytes]:
    """The lines the scan hands the engine's parser, anywhere in the log."""
    found = module.ANCHORS + _signals(module) + COMMAND_ANCHORS + ASSIGNMENT_ANCHORS
    return list(dict.fromkeys(found))


def _head_anchors(module: ModuleType) -> list[bytes]:
    """The lines the scan hands the parser in the head of a log only (start-up, a paste)."""
    found = getattr(module, "HEAD_ANCHORS", ()) + _signals(module, head=True) + PLATFORM_ANCHORS
    return list(dict.fromkeys(found))


def detect_engine(head: bytes) -> str | None:
    """The engine whose signatures the bytes show most; None when none or a tie."""
    scores = {
        name: sum(sig in head for sig in _signatures(module)) for name, module in ENGINES.items()
    }
    best = max(scores.values())
    winners = [name for name, score in scores.items() if score == best]
    return winners[0] if best and len(winners) == 1 else None


def parse_log(
    source: Path | str | bytes | Iterable[str],
    *,
    patterns: Sequence[LinePattern] = (),
    engine: str | None = None,
    command: str | None = None,
) -> LogFacts:
    """Read one log (a path, its bytes, or its lines) into LogFacts; the engine is detected.

    A str is a path. The file is streamed, never loaded whole; a missing or unreadable file
    raises DiagnosticError. An empty log or one no engine signature matches gives facts with
    engine "unknown" and a note saying why. `command` is the launch command recorded beside
    the log (a bundle's run.json), read first by engines whose logs do not print it.
    """
    if isinstance(source, str):
        source = Path(source)
    if not isinstance(source, Path | bytes):
        source = "\n".join(s.rstrip("\n") for s in source).encode("utf-8", "surrogateescape")
    path = str(source) if isinstance(source, Path) else "<lines>"
    facts = LogFacts(path=path)
    name = engine or detect_engine(read_head(source))
    if name is None:
        return _undetected(source, facts, patterns)
    module = ENGINES[name]
    scanner = _scanner(module, patterns, name)
    parser = module.Parser(facts)
    if command:
        parser.read_command(command)
        record_sources(facts, "command", Evidence(line=0, text=f"launch command: {command}"))
    _run(scanner.scan(source), parser, patterns, name)
    return _finish(parser, scanner)


def _joins_nothing(text: str) -> bool:
    return False


def _scanner(module: ModuleType, patterns: Sequence[LinePattern], engine: str) -> LineScanner:
    anchors = _anchors(module)
    anchors += [c.encode() for p in patterns if p.applies(engine) for c in p.contains if c]
    return LineScanner(
        tuple(dict.fromkeys(anchors)),
        # an engine that prints no wrapped settings line joins nothing
        wants_more=getattr(module, "wants_more", _joins_nothing),
        continues=getattr(module, "continues", _joins_nothing),
        head_anchors=tuple(a for a in _head_anchors(module) if a not in anchors),
    )


def _run(
    lines: Iterable[Line], parser: object, patterns: Sequence[LinePattern], engine: str
) -> None:
    active = [p for p in patterns if p.applies(engine)]
    facts: LogFacts = parser.facts  # type: ignore[attr-defined]
    feed = parser.feed  # type: ignore[attr-defined]
    signals = SignalReader(ENGINES[engine].SIGNALS, facts)
    parser.signals = signals  # type: ignore[attr-defined]
    platforms = parser.platforms  # type: ignore[attr-defined]
    shell = ShellVariables()  # a script's `X='…'` used later as `--flag "$X"`
    for line in lines:
        text = shell.read(line.text)
        if text is not line.text:
            line = Line(number=line.number, text=text, raw=line.raw)
        parser.kind = "startup"  # type: ignore[attr-defined]
        signals.feed(line)
        feed(line)
        if parser.kind != "metric":  # type: ignore[attr-defined]
            platforms.feed(line)
        if parser.kind != "command":  # type: ignore[attr-defined]
            parser.log_lines += 1  # type: ignore[attr-defined]
        if parser.kind != "metric":  # type: ignore[attr-defined]
            # metric lines are the bulk of a long log; their facts are named by their signals
            record_sources(facts, parser.kind, ev(line))  # type: ignore[attr-defined]
        for pattern in active:
            if pattern.matches(line.text):
                hits = facts.matches.setdefault(pattern.key, [])
                if len(hits) < MAX_EVIDENCE:
                    hits.append(ev(line, pattern.contains[0]))


def _finish(parser: object, scanner: LineScanner) -> LogFacts:
    parser.signals.finish()  # type: ignore[attr-defined]
    facts: LogFacts = parser.finish()  # type: ignore[attr-defined]
    if facts.capture.resolved == "UNKNOWN" and not parser.log_lines:  # type: ignore[attr-defined]
        facts.capture.reason = (
            "the text is a launch command: it says what was configured, not what the engine "
            "captured (give the server's start-up log)"
        )
    if facts.sources and "engine" not in facts.sources:  # recognised by its earliest fact
        facts.sources["engine"] = min(facts.sources.values(), key=lambda s: s.line)
    facts.lines = scanner.lines
    facts.bytes = scanner.bytes_read
    facts.notes += scanner.notes
    facts.unread = unread(facts)
    facts.notes += [f"line {e.line} not understood: {e.text}" for e in facts.not_understood]
    return facts


def unread(facts: LogFacts) -> list[str]:
    """What the text did not say about the run (each with where it would have said it)."""
    out: list[str] = []
    if facts.version is None:
        out.append("version (no banner, build line, package list or image tag)")
    if facts.platform == "unknown":
        out.append("platform (no device, platform detection or build line)")
    spec = facts.spec
    if spec.enabled is None:
        out.append(
            "speculation on or off (no settings line, whole launch command or acceptance line)"
        )
    elif spec.enabled:
        if spec.method is None:
            out.append(f"speculation method ({_METHOD_WHERE.get(facts.engine, 'its settings')})")
        if spec.num_draft_tokens is None:
            out.append(f"draft length k ({_K_WHERE.get(facts.engine, 'its settings')})")
    if facts.capture.resolved == "UNKNOWN":
        out.append("capture mode (see the reason)")
    return out


_METHOD_WHERE = {
    "vllm": "speculative_config method",
    "sglang": "--speculative-algorithm",
    "llamacpp": "--spec-type or a draft model",
    "trtllm": "speculative_config decoding_type",
}
_K_WHERE = {
    "vllm": "num_speculative_tokens",
    "sglang": "--speculative-num-draft-tokens",
    "llamacpp": "--draft-max / --spec-draft-n-max",
    "trtllm": "max_draft_len, or num_nextn_predict_layers for MTP",
}


def _undetected(source: Path | bytes, facts: LogFacts, patterns: Sequence[LinePattern]) -> LogFacts:
    """No signature at the head: scan the whole log with every engine's anchors, then decide."""
    anchors = tuple(dict.fromkeys(a for m in ENGINES.values() for a in _anchors(m)))
    head = tuple(dict.fromkeys(a for m in ENGINES.values() for a in _head_anchors(m)))
    scanner = LineScanner(anchors, head_anchors=tuple(a for a in head if a not in anchors))
    lines: list[Line] = []
    for line in scanner.scan(source):
        if len(lines) < MAX_UNDETECTED_LINES:
            lines.append(line)
    facts.lines, facts.bytes = scanner.lines, scanner.bytes_read
    name = detect_engine("\n".join(line.text for line in lines).encode("utf-8", "replace"))
    if name is None:
        facts.capture.reason = (
            "empty log"
            if not scanner.bytes_read
            else "no vLLM, SGLang, llama.cpp or TensorRT-LLM line found"
        )
        facts.notes.append(
            "the file is empty"
            if not scanner.bytes_read
            else "nothing recognised: no vLLM, SGLang, llama.cpp or TensorRT-LLM line in the text "
            "(looked for " + LOOKED_FOR + ")"
        )
        return facts
    parser = ENGINES[name].Parser(facts)
    _run(lines, parser, patterns, name)
    return _finish(parser, scanner)
