"""vLLM server logs (V0 0.6–0.10, V1 with Model Runner V1 and V2, vllm-ascend) -> LogFacts.

Resolved capture mode comes from what happened: capture bars, `Graph capturing finished`,
downgrade and override warnings, eager lines. The config line's `cudagraph_mode` is printed
before the attention backend is chosen, so it is only the *configured* mode.
"""

from __future__ import annotations

import re

from diagnostic.engines import _kv
from diagnostic.engines._common import ev
from diagnostic.engines._lines import Line, collapse
from diagnostic.engines._signals import name_source
from diagnostic.engines.vllm.capture import VWorker, resolve_capture
from diagnostic.engines.vllm.runtime import Metrics
from diagnostic.engines.vllm.settings import SettingsReader, prose_version
from diagnostic.engines.vllm.signals import (
    COMMANDS,
    FLAG_HINTS,
)
from diagnostic.schema.logfacts import (
    CaptureTiming,
    LogFacts,
    RunnerFallback,
    SourceKind,
)

ENGINE = "vllm"
ANCHORS: tuple[bytes, ...] = (
    b"Capturing",
    b"Graph capturing",
    b"CUDAGraph",
    b"CUDA graph",
    b"Cudagraph",
    b"cudagraph_mode",
    b"vLLM",
    b"LLM engine",
    b"args: {",
    b"speculative_model=",  # V0 `args: Namespace(…)`; its "_" is a rare byte already scanned
    b"speculative_config=",  # the offline API's keyword
    b"Model Runner",
    b"SpecDecoding metrics",
    b"metrics: Draft",
    b"WARNING",
    b"backend",
    b"eager mode",
    b"spec_decode_num_accepted_tokens_per_pos",
)
# Start-up and paste lines: looked for near the top of a log only.
HEAD_ANCHORS: tuple[bytes, ...] = (
    b"piecewise_backend",
    b"vllm  ",  # `pip list`: the name padded to the version's column
    b"vllm v",  # prose: "the vllm v0.11.0 docker image"
    *(h.encode() for h in FLAG_HINTS),
)
_PIP_LIST = re.compile(r"^vllm\s{2,}(?P<v>\d+\.\d+\.\d+[\w.+-]*)\s*$")
SIGNATURES: tuple[bytes, ...] = (
    b"vLLM",
    b"LLM engine",
    b"non-default args",
    b"(APIServer pid=",
    b"(EngineCore",
    b"Worker_TP",
    b"VllmWorker",
    b"RayWorker",
    b"SpecDecoding metrics",
    b"Capturing CUDA graph",
    b"vllm.",
    b"[api_server.py",
    b"/vllm/",  # a traceback through site-packages/vllm/…
    b"SpeculativeConfig",
    b"--speculative-config",
    b"--speculative_config",
    b"--speculative-model",
    b"vllm-ascend",
    b"Capturing cudagraphs for decoding",
    b"from vllm import",  # the offline API: `LLM(model=…, speculative_config={…})`
    b"Graph capturing finished",  # quoted alone, even without its logging prefix
)

# Process prefixes, nested under Ray: `(EngineCore_DP0 pid=860) (RayWorkerWrapper pid=3101,
# ip=10.0.0.2) ` (Ray adds the ip of a process on another node), or from 0.2x
# `(RayWorkerProc pid=7201, ip=10.0.0.2) (Worker_DP0_TP2 pid=7201) `.
_PREFIX = r"\((?P<name>[^()]*?) pid=(?P<pid>\d+)(?:, ip=(?P<ip>[^()\s]+))?\)\s?"
_PROC = re.compile(_PREFIX)
_EMBEDDED_PROC = re.compile(
    r"(?<=.)(?<!\) )(?=\([A-Za-z_][\w ]*?(?: [\w=]+)*? pid=\d+(?:, ip=[^()\s]+)?\) )"
)
_WORKER_NAME = re.compile(r"Worker|VllmWorkerProcess")
_RAY_DEDUP = re.compile(r"\[repeated (?P<n>\d+)x across cluster\]")
_BAR = re.compile(r"Capturing (?:CUDA|ACL) graphs \((?P<desc>[^)]*)\)")  # ACL: vllm-ascend
_BAR_V0 = re.compile(r"Capturing (?:CUDA graph shapes|cudagraphs for decoding|the model for CUDA)")
_BAR_DRAFT = re.compile(r"Capturing (?P<what>[a-z][\w -]*?) CUDA graphs")
_FINISHED = re.compile(
    r"Graph capturing finished\s*in (?P<s>[\d.]+) secs?(?:, took (?P<gib>[\d.]+) GiB)?"
)
# Only a whole mode name counts: a line cut mid-word ("cudagraph_mode=P", a pasted excerpt)
# is no evidence of what the engine set.
_MODE = r"(?:CUDAGraphMode\.)?(?P<{}>FULL_AND_PIECEWISE|FULL_DECODE_ONLY|PIECEWISE|FULL|NONE)\b"
# `setting cudagraph_mode=X` (backend support), `Setting cudagraph_mode to X.` (compile config)
_SETTING = re.compile("[Ss]etting cudagraph_mode(?:=| to )" + _MODE.format("to"))
# vllm-ascend's platform decides the graph mode after the request (FULL runs as FULL_DECODE_ONLY
# there): `FULL_DECODE_ONLY compilation enabled on NPU. … using only ACL Graph mode`.
_NPU_MODE = re.compile(_MODE.format("to") + " compilation enabled on NPU")
_MODE_MARKERS = ("cudagraph", "Cudagraph", "CUDAGraph", "eager", "enabled on NPU")
_OVERRIDE = re.compile(
    "[Oo]verriding cudagraph_mode (?:from " + _MODE.format("from") + " )?to " + _MODE.format("to")
)
_PROFILING = re.compile(r"Profiling CUDA graph memory: (?P<modes>.*)")
_BACKEND = re.compile(
    r"Using (?:AttentionBackendEnum\.)?(?P<b>[A-Z][A-Z0-9_]+) (?:attention )?backend"
    r"|Using (?P<v0>[A-Z][\w ]*?) backend(?:\.| on )"
)
_READY = ("Starting vLLM", "init engine (profile", "startup complete")
_FALLBACK = re.compile(r"Model Runner V2 (?:does not yet support|requires) (?P<what>.+?); using")
# V1's piecewise compile backend (0.9-0.10) logs each shape it captures at DEBUG level.
_PIECEWISE_DEBUG = re.compile(r"piecewise_backend\.py:\d+\] Capturing a cudagraph for shape")
_EAGER = ("Cudagraph is disabled under eager mode", "Enforce eager set", "using eager mode")
_COMMANDS = tuple(c.decode() for c in COMMANDS) + FLAG_HINTS
# A message vLLM's own logger wrote: it may name flags ("Restart vllm serve with
# --enable-scale-out to enable them.", 0.32) but is never the command that launched it.
_OWN_MESSAGE = re.compile(
    r"\b(?:INFO|WARNING|DEBUG|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? "
    r"\[[\w.]+\.py:\d+\] "
)


def wants_more(text: str) -> bool:
    """A record the log or a terminal wrapped: a settings line whose brackets are still open,
    a downgrade warning cut before its target, a capture or metrics line cut before its
    numbers."""
    for marker in ("with config: ", "non-default args: ", "args: Namespace("):
        at = text.find(marker)
        if at != -1:
            return _kv.balance(text, at) > 0
    if "CUDAGraphMode." in text and "not supported" not in text and "setting" not in text:
        return "WARNING" in text[:80]  # cut inside the first mode name
    if "is not supported with" in text and "cudagraph_mode=" not in text:
        return True
    if "SpecDecoding metrics" in text:  # every form ends with a rate: a number or a percentage
        end = text.rstrip()
        return not (end.endswith("%") or end[-1:].isdigit())
    return text.endswith("Graph capturing finished")


def continues(text: str) -> bool:
    """A physical line that is not a new log record."""
    return bool(text) and not _RECORD.match(text)


_RECORD = re.compile(
    r"^(?:\([^()]*? pid=\d+(?:, ip=[^()\s]+)?\)|(?:INFO|WARNING|ERROR|DEBUG|CRITICAL)\b"
    r"|\[[A-Z]\d{4}|\d{4}-\d\d-\d\d|Capturing |Loading |Traceback|\s*$)"
)


# Model-specific MTP names (deepseek_mtp, qwen3_next_mtp, ...) that vLLM 0.10 and later
# rewrite to `mtp` when it reads the speculative config; 0.9 ran them under their own names.
_MTP_ALIAS = re.compile(r"^\w+_mtp$")
_BEFORE_MTP = re.compile(r"^0\.[0-9]\b")


def _resolve_alias(facts: LogFacts) -> None:
    """Report a deprecated method name under the name the engine resolved it to."""
    method, version = facts.spec.method, facts.version or ""
    if method and _MTP_ALIAS.match(method) and not _BEFORE_MTP.match(version):
        facts.spec.method = "mtp"
        facts.notes.append(f"speculative method {method!r} is vLLM's old name: it runs as 'mtp'")


# Phrases of vLLM's warnings and capture lines that a wrap between words can squash when the
# wrapped record is joined (`is not` + `supported` -> `is notsupported`): their spaces restored.
_PHRASES = tuple(
    (re.compile(r"\s*".join(re.escape(w) for w in phrase.split())), phrase)
    for phrase in (
        "is not supported with",
        "with spec-decode for attention backend",
        "setting cudagraph_mode=",
        "Setting cudagraph_mode to",
        "Overriding cudagraph_mode",
        "Graph capturing finished in",
    )
)


def _mend(text: str) -> str:
    for squashed, phrase in _PHRASES:
        text = squashed.sub(phrase, text)
    return text


class Parser(SettingsReader):
    """Feed it candidate lines in order; `finish()` returns the facts."""

    engine = ENGINE

    def __init__(self, facts: LogFacts) -> None:
        super().__init__(facts)
        self.procs: dict[str, VWorker] = {}
        self.metrics = Metrics(facts)
        self.ready = False
        self.ray_folded = 0  # lines Ray's log dedup folded into one (other workers' copies)
        self.pip_version: str | None = None  # `pip list`'s row: when nothing better says it
        self.prose_version: str | None = None  # the version in words: the last resort

    # -- lines -------------------------------------------------------------------------
    def feed(self, line: Line) -> None:
        """Read one candidate line (several records when processes wrote into one line)."""
        if "WARNING" in line.text[:80] or "apturing" in line.text:
            line.text = _mend(line.text)
        if line.raw.count(" pid=") > 1:
            for part in _EMBEDDED_PROC.split(line.raw):
                if part.strip():
                    self._record(Line(line.number, collapse(part), part))
            return
        self._record(line)

    def _record(self, line: Line) -> None:
        text = line.text
        if "SpecDecoding metrics" in text or "metrics: Draft" in text:
            self.kind = "metric"
            self.metrics.line(line)  # the bulk of a long log: no process bookkeeping needed
            return
        if "spec_decode_num_accepted_tokens_per_pos" in text:
            self.kind = "metric"
            self.metrics.position(line)
            return
        commandish = any(c in text for c in _COMMANDS) and not _OWN_MESSAGE.search(text)
        if commandish and self.command(line):
            return
        proc = self._proc(_process(text))
        if "across cluster]" in text and (dedup := _RAY_DEDUP.search(text)):
            self.ray_folded += int(dedup["n"])
        if "WARNING" in text[:80]:
            self.warning(line)
            if "Async scheduling not supported" in text:
                self.fallback(line)
        if "Capturing" in line.raw or "capturing" in text:
            self._capture(proc, line)
        if any(m in text for m in _MODE_MARKERS):
            self._modes(proc, line)
        if "Skipping CUDA graph capture" in text:
            proc.eager.append(ev(line))
        if "Profiling CUDA graph memory" in text:
            self._planned(proc, line)
        if "piecewise_backend" in text and _PIECEWISE_DEBUG.search(text):
            proc.piecewise.append(ev(line))
            self.generation = self.generation or "V1"
        if "LLM engine" in text and "with config" in text:
            self._config(proc, line)
        elif "args: {" in text:
            self._requested(line)
        elif "args: Namespace(" in text:
            self._namespace(line)
        elif "speculative_config=" in text:
            self._api_config(line)
        if "vLLM" in text:
            self._banner(line)
        elif text.startswith("vllm  ") and (pip := _PIP_LIST.match(text)):
            self.pip_version = self.pip_version or pip["v"]
        if self.prose_version is None and ("vLLM" in text or "vllm v" in text):
            self.prose_version = prose_version(text)
        if "Model Runner" in text or "model runner" in text:
            self._runner(proc, line)
        if "backend" in text and self.facts.attention_backend is None:
            b = _BACKEND.search(text)
            if b:
                self.facts.attention_backend = b["b"] or b["v0"]
        if any(marker in text for marker in _READY):
            self.ready = True

    def _proc(self, key: str) -> VWorker:
        proc = self.procs.get(key)
        if proc is None:
            proc = self.procs[key] = VWorker(key)
        return proc

    def _capture(self, proc: VWorker, line: Line) -> None:
        for desc in dict.fromkeys(_BAR.findall(line.raw)):
            proc.bars.setdefault(desc, ev(line))
        if _BAR_V0.search(line.raw):
            proc.v0_bars.append(ev(line))
        draft = _BAR_DRAFT.search(line.text)
        if draft and not draft["what"].startswith(("CUDA", "cudagraphs")):
            proc.drafter_bars.append(ev(line))
        done = _FINISHED.search(line.text)
        if done:
            proc.finished.append(ev(line))
            self.facts.capture_timings.append(
                CaptureTiming(
                    line=line.number,
                    worker=proc.name,
                    seconds=float(done["s"]),
                    memory_gib=float(done["gib"]) if done["gib"] else None,
                )
            )

    def _modes(self, proc: VWorker, line: Line) -> None:
        text = line.text
        setting = _SETTING.search(text) or _NPU_MODE.search(text)
        override = _OVERRIDE.search(text)
        target = setting["to"] if setting else override["to"] if override else None
        if target:
            proc.downgrades.append((target, ev(line)))
            self.fallback(line)
        if any(marker in text for marker in _EAGER):
            proc.eager.append(ev(line))

    def _planned(self, proc: VWorker, line: Line) -> None:
        m = _PROFILING.search(line.text)
        if m:
            proc.planned |= {part.split("=")[0].strip() for part in m["modes"].split("),")}
            proc.planned.discard("")
            proc.planned_line = ev(line)

    def _runner(self, proc: VWorker, line: Line) -> None:
        """`Using V2 Model Runner`, or the V2 -> V1 fallback and what V2 did not support.

        Only `…; using the V1 model runner instead` is a fallback: `does not yet support the
        X request parameter` is a notice on a V2 run, and `does not yet support: X` is the
        error of a run forced onto V2."""
        text = line.text
        if "Using V2 Model Runner" in text:
            proc.runner = "V2"
            return
        if "using the V1 model runner instead" not in text:
            return
        proc.runner = "V1"
        self.fallback(line)
        m = _FALLBACK.search(text)
        items = [i.strip() for i in m["what"].split(", ") if i.strip()] if m else []
        if self.facts.runner_fallback is None:
            self.facts.runner_fallback = RunnerFallback(
                unsupported=items,
                by_speculation=bool(items) and all("speculat" in i for i in items),
                evidence=ev(line),
            )

    # -- conclusions -------------------------------------------------------------------
    def finish(self) -> LogFacts:
        """Resolve runner, workers and capture; return the facts."""
        facts = self.facts
        self.metrics.finish()
        if self.ray_folded:
            facts.notes.append(
                f"Ray folded {self.ray_folded} copies of lines other workers printed "
                "('[repeated Nx across cluster]'): those workers' own capture lines are not "
                "in the log; restart with RAY_DEDUP_LOGS=0 to judge every worker"
            )
        workers = self._workers()
        self._shared_bars(workers)
        facts.workers = sorted(w.name for w in workers)
        runners = {w.runner for w in workers if w.runner} | {
            p.runner for p in self.procs.values() if p.runner
        }
        if self.generation == "V0":
            facts.model_runner = "V0"
        elif runners:
            facts.model_runner = "V1" if "V1" in runners else sorted(runners)[0]
        elif self.generation == "V1":
            facts.model_runner = "V1"
        self.decide_platform()
        facts.version = facts.version or self.pip_version or self.prose_version
        self.alternatives()
        _resolve_alias(facts)
        resolve_capture(
            facts,
            workers,
            self.global_events(workers),
            configured_line=self.configured_line,
            ready=self.ready,
            generation=self.generation,
        )
        self._capture_source()
        return facts

    def _shared_bars(self, workers: list[VWorker]) -> None:
        """Bars printed without a process prefix (tqdm on stderr) belong to the workers."""
        main = self.procs.get("main")
        if main is None or main in workers or not main.bars:
            return
        for worker in workers:
            if not worker.bars:
                worker.bars = dict(main.bars)

    def _capture_source(self) -> None:
        capture = self.facts.capture
        if capture.resolved == "UNKNOWN":
            return
        configured = self.configured_line.line if self.configured_line else None
        lines = [e for e in capture.evidence if e.line != configured] or capture.evidence
        if lines:
            e = lines[0]
            kind: SourceKind = "command" if e.line in self.command_lines else "startup"
            name_source(self.facts, "capture.resolved", kind, e, replace=True)

    def _workers(self) -> list[VWorker]:
        procs = [p for p in self.procs.values() if not p.name.startswith(("APIServer", "command"))]
        workers = [p for p in procs if _WORKER_NAME.search(p.name)]
        return workers or [p for p in procs if p.name.startswith("EngineCore")] or procs

    def global_events(self, workers: list[VWorker]) -> VWorker:
        """Config-time lines printed by processes that do not run the model."""
        merged = VWorker("config")
        for proc in self.procs.values():
            if proc not in workers:
                merged.downgrades += proc.downgrades
                merged.eager += proc.eager
        return merged


def _process(text: str) -> str:
    """The process a line comes from: its innermost worker prefix (else its last one), with
    the node's ip when Ray names one; `main` for a line without a prefix."""
    name = ip = None
    at = 0
    while m := _PROC.match(text, at):
        if name is None or _WORKER_NAME.search(m["name"]) or not _WORKER_NAME.search(name):
            name = f"{m['name']} pid={m['pid']}"
        ip = m["ip"] or ip
        at = m.end()
    if name is None:
        return "main"
    return f"{name} ip={ip}" if ip else name
