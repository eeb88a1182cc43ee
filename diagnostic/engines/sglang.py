"""SGLang server logs (0.4–0.5), excerpts of them and `sglang.launch_server` commands -> LogFacts.

SGLang prints no version banner and no line when CUDA graphs are disabled: capture is read
from `Capture cuda graph begin/end` per rank (`Capture npu graph …` on Ascend; drafter graphs
are captured only after the target's), the decode batches' `cuda graph: True|False` (`npu
graph`), and `disable_cuda_graph` in the `server_args=ServerArgs(…)` line or
`--disable-cuda-graph`. The version comes from check_env (`sglang: X`), pip or an image tag.
"""

from __future__ import annotations

import re

from diagnostic.engines import _kv
from diagnostic.engines._common import (
    AcceptanceTally,
    LogParser,
    cap_append,
    disagreement,
    ev,
)
from diagnostic.engines._lines import Line
from diagnostic.engines._signals import Signal, name_source, set_fact
from diagnostic.engines.command import Command, find_command
from diagnostic.engines.sglang_capture import DECODING, Rank, graph_kind, resolve_rank
from diagnostic.schema.logfacts import (
    GRAPHLESS_PLATFORMS,
    AcceptanceSample,
    CaptureTiming,
    Evidence,
    LogFacts,
    SourceKind,
)

ENGINE = "sglang"
ANCHORS: tuple[bytes, ...] = (
    b"server_args=",
    b"uda graph",
    b"UDA graph",
    b"graph begin",
    b"npu graph",
    b"Decode batch",
    b"accept len",
    b"fired up",
    b"draft model",
    b"Eagle3",
    b"arning",
    b"sglang",
    b"Traceback (most recent",
)
# Near the top only: a pasted command, an issue's environment bullets (`- SGLang 0.5.17 (venv)`).
HEAD_ANCHORS: tuple[bytes, ...] = (b"--speculative", b"SGLang ", b"Speculative Algorithm")
SIGNATURES: tuple[bytes, ...] = (
    b"server_args=ServerArgs(",
    b"sglang",
    b"Decode batch",
    b"Prefill batch",
    b"Capture cuda graph",
    b" graph begin. This can take",  # 0.5.x names the graph: `Capture target decode cuda graph`
    b"fired up and ready to roll",
    b"Load weight begin",
    b"--speculative-algorithm",
    b"--speculative-algo ",
    b"speculative_algorithm",
    b"sglang:",
    # ServerArgs fields only SGLang has, for a dump cut before `speculative_algorithm`
    b"speculative_eagle_topk=",
    b"speculative_num_draft_tokens=",
    b"speculative_accept_threshold",
    b"speculative_attention_mode=",
    b"speculative_token_map=",
)
_ON = {"spec.enabled": True}
SIGNALS: tuple[Signal, ...] = (
    Signal("accept len", _ON, "metric"),  # decode batches print it only when speculating
    Signal("sglang:spec_accept_length", _ON, "metric"),
    Signal("Capture draft", _ON, "startup"),  # drafter graphs: draft, draft extend
)
COMMANDS: tuple[bytes, ...] = (b"sglang.launch_server", b"lmsysorg/sglang", b"sglang serve")
_MARKERS = (
    re.compile(r"\S*sglang\.launch_server"),
    re.compile(r"\S*lmsysorg/sglang(?::\S*)?"),
    re.compile(r"serve"),  # `sglang serve` (0.5.x): the word after the program
)
_ALIASES = {"NEXTN": "EAGLE"}  # SGLang rewrites NEXTN to EAGLE at start-up
# argparse takes any unique prefix of a long option (`--speculative-algo EAGLE`).
_SPEC_FLAGS = (
    "speculative-algorithm",
    "speculative-draft-model-path",
    "speculative-num-steps",
    "speculative-eagle-topk",
    "speculative-num-draft-tokens",
    "disable-cuda-graph",
    "disable-decode-cuda-graph",
    "cuda-graph-backend-decode",
)

_PREFIX = re.compile(r"^\[(?P<ts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)(?P<rank>(?: [A-Z]+\d+)*)\]\s?")
_BEGIN = re.compile(r"Capture (?P<what>[\w ]*?)\s*(?:cuda|npu) graph begin", re.IGNORECASE)
_END = re.compile(r"Capture (?P<what>[\w ]*?)\s*(?:cuda|npu) graph end", re.IGNORECASE)
# The decode line's graph label names the device (`cuda graph` is printed on ROCm too).
_GRAPH_LABELS = {
    "cuda graph": ("cuda", False),
    "npu graph": ("npu", True),
    "cpu graph": ("cpu", True),
}
_GRAPH_LINE = re.compile(r"(?:cuda|npu) graph", re.IGNORECASE)
_ELAPSED = re.compile(r"(?:Time elapsed: |elapsed=)(?P<s>[\d.]+) ?s")
_MEM = re.compile(r"mem usage=(?P<gb>[\d.]+) GB")
_VERSION = re.compile(
    r"\bsglang(?:==|:\s*v?|\s+version[:=]?[*`\s]*v?|\s+v?|/v?)"  # `**sglang Version:** v…`
    r"(?P<v>\d+\.\d+\.\d+(?:\.post\d+|rc\d+|\.dev\d+)?)(?![\w.])",
    re.I,
)
# An environment list's field (`* **Speculative Algorithm:** `EAGLE``), as the user states it.
_ALGORITHM_FIELD = re.compile(r"\bSpeculative Algorithm[*`\s]*:[*`\s]*(?P<m>[A-Z][A-Z0-9_]+)\b")
_DRAFT_ARCH = re.compile(r"type=(?P<arch>\w*Eagle3\w*)|Loading (?P<alg>EAGLE3) draft model")
_FIELD = re.compile(r"(?P<key>#?[\w ()/-]+?): (?P<value>[^,]+)")


def wants_more(text: str) -> bool:
    """A server_args line whose brackets are still open: the log wrapped it."""
    at = text.find("server_args=")
    return at != -1 and _kv.balance(text, at) > 0


def continues(text: str) -> bool:
    """A physical line that is not a new log record."""
    return bool(text) and not _PREFIX.match(text)


class Parser(LogParser):
    """Feed it candidate lines in order; `finish()` returns the facts."""

    engine = ENGINE

    def __init__(self, facts: LogFacts) -> None:
        super().__init__(facts)
        self.ranks: dict[str, Rank] = {}
        self.tally = AcceptanceTally()
        self.disable_cuda_graph: bool | None = None
        # `Capture cuda graph failed`, or a traceback after a begin with no end: capture ended
        self.capture_failed = False
        self.args_line: Evidence | None = None
        self.ready = False
        self.graph_batches: list[Evidence] = []
        self.args_kind: SourceKind = "startup"

    def feed(self, line: Line) -> None:
        """Read one candidate line."""
        text = line.text
        if ("sglang" in text or "--speculative" in text) and self.command(line):
            return
        m = _PREFIX.match(text)
        rank = self._rank(m["rank"].strip() if m and m["rank"] else "main")
        if "Decode batch" in text:
            self.kind = "metric"
            self._decode_batch(line)
            return
        if "Traceback (most recent" in text and any(
            r.begun and not r.ended for r in self.ranks.values()
        ):
            self.capture_failed = True  # an exception while graphs were being captured
        if "server_args=" in text:
            self._server_args(line)
        elif _GRAPH_LINE.search(text):
            self._capture(rank, line)
        if "arning" in text:
            self.warning(line)
        if "fired up" in text:
            self.ready = True
        arch = _DRAFT_ARCH.search(text)
        if arch:
            self.facts.drafter_architecture = arch["arch"] or "Eagle3"
            self.facts.spec_evidence.append(ev(line))
        field = _ALGORITHM_FIELD.search(text) if "Speculative Algorithm" in text else None
        if field and field["m"] != "NONE":
            self.facts.spec.enabled = True
            set_fact(self.facts, "spec.method", _ALIASES.get(field["m"], field["m"]))
            self.facts.spec_evidence.append(ev(line))
        if "sglang" in text.lower() and self.facts.version is None:
            v = _VERSION.search(text)
            self.facts.version = v["v"] if v else None

    def _rank(self, name: str) -> Rank:
        rank = self.ranks.get(name)
        if rank is None:
            rank = self.ranks[name] = Rank(name)
        return rank

    def command(self, line: Line, *, launch: bool = False) -> bool:
        """A pasted `python -m sglang.launch_server …` (or the image's) command."""
        cmd = find_command(line.text, _MARKERS, launch=launch, image_words=("sglang",))
        if cmd is None or not (cmd.bare is False or _spec_flags(cmd)):
            return False
        _expand_prefixes(cmd)
        self.kind = self.args_kind = "command"
        facts, spec = self.facts, self.facts.spec
        set_fact(facts, "version", cmd.image_version())
        set_fact(facts, "model", cmd.text("model-path", "model"))
        algorithm = (cmd.text("speculative-algorithm") or "").upper()
        whole = not cmd.bare and cmd.flag("config") is None
        if (spec.enabled is None and whole) or algorithm:
            spec.enabled = bool(algorithm) and algorithm != "NONE"
        if spec.enabled:
            set_fact(facts, "spec.method", _ALIASES.get(algorithm, algorithm))
            set_fact(facts, "spec.drafter", cmd.text("speculative-draft-model-path"))
            set_fact(facts, "spec.num_draft_tokens", cmd.number("speculative-num-draft-tokens"))
        off = _graphs_off_flag(cmd)
        if off is not None:
            self.disable_cuda_graph = True
            self.args_line = ev(line, off)
        facts.spec_evidence.append(ev(line, "--speculative"))
        facts.requested.update(cmd.flags)
        return True

    def _server_args(self, line: Line) -> None:
        text = line.text
        body = text[text.find("(", text.find("server_args=")) + 1 : text.rfind(")")]
        args = {k: _kv.literal(v) for k, v in _kv.split_kv(body).items()}
        self.facts.requested.update(args)
        self.args_line = ev(line, "speculative_algorithm")
        self.facts.model = self.facts.model or _str(args.get("model_path"))
        tp = args.get("tp_size")
        self.facts.tensor_parallel_size = tp if isinstance(tp, int) else None
        if _GRAPH_FIELDS & args.keys():  # 0.5.x: the decode phase's backend says it all
            decode = _DECODE_BACKEND.search(text)
            self.disable_cuda_graph = (
                args.get("disable_cuda_graph") is True
                or args.get("disable_decode_cuda_graph") is True
                or args.get("cuda_graph_backend_decode") == "disabled"
                or (decode is not None and decode["backend"] == "disabled")
            )
        spec = self.facts.spec
        algorithm = args.get("speculative_algorithm")
        if algorithm is None and ("..." in body or "…" in body):
            return  # the author cut the line: what it left out is not said to be off
        spec.enabled = isinstance(algorithm, str) and algorithm.upper() != "NONE"
        if spec.enabled:
            spec.method = str(algorithm)
            spec.drafter = _str(args.get("speculative_draft_model_path"))
            k = args.get("speculative_num_draft_tokens")
            spec.num_draft_tokens = k if isinstance(k, int) else None
        self.facts.spec_evidence.append(self.args_line)

    def _capture(self, rank: Rank, line: Line) -> None:
        text = line.text
        begin = _BEGIN.search(text)
        if begin:
            rank.begun.setdefault(graph_kind(begin["what"]), ev(line))
        if "graph failed" in text:
            self.capture_failed = True
        end = _END.search(text)
        if end:
            kind = graph_kind(end["what"])
            rank.ended.setdefault(kind, ev(line))
            if kind in DECODING:
                rank.finished.append(ev(line))
            elapsed, mem = _ELAPSED.search(text), _MEM.search(text)
            self.facts.capture_timings.append(
                CaptureTiming(
                    line=line.number,
                    worker=rank.name,
                    kind=kind,
                    seconds=float(elapsed["s"]) if elapsed else None,
                    memory_gib=float(mem["gb"]) if mem else None,  # SGLang GB are 2**30 bytes
                )
            )
        if "isable" in text and self.args_line is not None:
            self.fallback(line)  # e.g. "Disable cuda graph because ..." printed at start-up

    def _decode_batch(self, line: Line) -> None:
        fields = {m["key"].strip(): m["value"].strip() for m in _FIELD.finditer(line.text)}
        sample = AcceptanceSample(line=line.number)
        if "accept len" in fields:
            sample.mean_acceptance_length = _float(fields["accept len"])
        if "accept rate" in fields:
            sample.accept_rate = _float(fields["accept rate"])
        graph = fields.get("cuda graph", fields.get("npu graph", fields.get("cpu graph")))
        label = next((k for k in _GRAPH_LABELS if k in fields), None)
        if label is not None:  # decode lines are metric lines: their graph label names it
            platform, strong = _GRAPH_LABELS[label]
            self.platforms.see(platform, ev(line), strong=strong)
        if graph in ("True", "False"):
            sample.cuda_graph = graph == "True"
            if sample.cuda_graph and len(self.graph_batches) < 1:
                self.graph_batches.append(ev(line))
        running = fields.get("#running-req", "")
        sample.running = int(running) if running.isdigit() else None
        sample.gen_throughput = _float(fields.get("gen throughput (token/s)", ""))
        if sample.mean_acceptance_length is not None or sample.cuda_graph is not None:
            self.tally.add(sample, self.facts, line)

    def finish(self) -> LogFacts:
        """Resolve capture per rank; return the facts."""
        facts = self.facts
        self.tally.finish(facts)
        _drafter_hint(facts)
        ranks = [r for r in self.ranks.values() if r.begun or r.ended]
        facts.workers = sorted(r.name for r in self.ranks.values() if r.name != "main") or ["main"]
        capture = facts.capture
        if self.disable_cuda_graph is not None:
            capture.configured = "NONE" if self.disable_cuda_graph else "CAPTURED"
            assert self.args_line is not None
            capture.evidence.append(self.args_line)
        platform = self.decide_platform()
        if platform in GRAPHLESS_PLATFORMS:
            capture.resolved = "NONE"
            capture.reason = f"SGLang ran on {platform.upper()}: no CUDA graphs exist there"
            return facts
        results = {r.name: resolve_rank(r, failed=self.capture_failed) for r in ranks}
        capture.per_worker = {n: res[0] for n, res in results.items()}  # type: ignore[misc]
        modes = set(capture.per_worker.values())
        if len(modes) > 1:
            capture.resolved = "UNKNOWN"
            capture.reason = disagreement(capture.per_worker, "rank")
        elif modes:
            first = next(iter(results.values()))
            capture.resolved, capture.reason = first[0], first[1]  # type: ignore[assignment]
            if len(results) > 1:
                capture.reason += f" (all {len(results)} ranks)"
        else:
            self._no_capture_lines()
        for _, _, lines in results.values():
            for e in lines:
                cap_append(capture.evidence, e)
        capture.evidence.sort(key=lambda e: e.line)
        self._capture_source(results)
        return facts

    def _capture_source(self, results: dict[str, tuple[str, str, list[Evidence]]]) -> None:
        capture, summary = self.facts.capture, self.facts.acceptance_summary
        found: tuple[Evidence | None, SourceKind]
        if capture.resolved == "UNKNOWN":
            return
        if results:
            found = (next(iter(results.values()))[2][0], "startup")
        elif self.graph_batches:
            found = (self.graph_batches[0], "runtime")
        elif self.disable_cuda_graph:
            found = (self.args_line, self.args_kind)
        else:
            found = (summary.first_cuda_graph_false if summary else None, "runtime")
        e, kind = found
        if e is not None:
            name_source(self.facts, "capture.resolved", kind, e, replace=True)

    def _no_capture_lines(self) -> None:
        capture = self.facts.capture
        summary = self.facts.acceptance_summary
        if self.graph_batches:
            capture.resolved = "CAPTURED"
            capture.reason = "no capture lines, but decode batches ran in CUDA graphs"
            capture.evidence += self.graph_batches
        elif self.disable_cuda_graph:
            capture.resolved = "NONE"
            capture.reason = "disable_cuda_graph=True and no capture lines"
        elif (
            summary
            and summary.decode_batches
            and summary.cuda_graph_false == summary.decode_batches
        ):
            capture.resolved = "NONE"
            capture.reason = "every decode batch ran with cuda graph: False"
        elif self.ready:
            capture.resolved = "NONE"
            capture.reason = "the server started without any 'Capture cuda graph' line"
        else:
            capture.resolved = "UNKNOWN"
            capture.reason = "the log ends before CUDA-graph capture"


def _drafter_hint(facts: LogFacts) -> None:
    """A drafter whose name alone suggests EAGLE-3 under EAGLE: a hint, not a finding."""
    spec = facts.spec
    named = spec.method == "EAGLE" and spec.drafter and re.search(r"(?i)eagle-?3", spec.drafter)
    if named and not facts.drafter_architecture and facts.acceptance_summary is None:
        facts.notes.append(
            f"hint: the drafter's name ({spec.drafter}) suggests EAGLE-3 under "
            "--speculative-algorithm EAGLE; nothing in the log confirms it (no drafter "
            "architecture line, no acceptance line)"
        )


# CUDA graphs off: 0.4's --disable-cuda-graph, 0.5.x's per-phase successors (decode matters).
_GRAPH_FIELDS = {"disable_cuda_graph", "disable_decode_cuda_graph", "cuda_graph_backend_decode"}
_DECODE_BACKEND = re.compile(r"decode=PhaseConfig\(backend='(?P<backend>\w+)'")


def _graphs_off_flag(cmd: Command) -> str | None:
    """The flag of a launch command that turns decode graphs off, or None."""
    for flag in ("disable-cuda-graph", "disable-decode-cuda-graph"):
        if cmd.flag(flag) is True:
            return f"--{flag}"
    if cmd.text("cuda-graph-backend-decode") == "disabled":
        return "--cuda-graph-backend-decode"
    return None


def _spec_flags(cmd: Command) -> bool:
    return any(name.startswith("speculative") for name in cmd.flags)


def _expand_prefixes(cmd: Command) -> None:
    """Rename abbreviated long options to the one known option they start."""
    for name in list(cmd.flags):
        if name in _SPEC_FLAGS:
            continue
        matches = [full for full in _SPEC_FLAGS if full.startswith(name)]
        if len(matches) == 1 and len(name) >= 10:
            cmd.flags[matches[0]] = cmd.flags.pop(name)


def _float(value: str) -> float | None:
    try:
        return float(value)
    except ValueError:
        return None


def _str(value: object) -> str | None:
    return value if isinstance(value, str) and value else None
