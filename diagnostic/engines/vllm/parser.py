"""vLLM server logs (V0 0.6–0.10, V1 with Model Runner V1 and V2, vllm-ascend) -> LogFacts.

Resolved capture mode comes from what happened: capture bars, `Graph capturing finished`,
downgrade and override warnings, eager lines. The config line's `cudagraph_mode` is printed
before the attention backend is chosen, so it is only the *configured* mode.
"""

from __future__ import annotations

import re

from diagnostic.engines import _kv
from diagnostic.engines._command import find_command
from diagnostic.engines._common import LogParser, ev
from diagnostic.engines._lines import Line, collapse
from diagnostic.engines._signals import name_source, set_fact
from diagnostic.engines.vllm.capture import VWorker, resolve_capture
from diagnostic.engines.vllm.runtime import Metrics
from diagnostic.engines.vllm.signals import COMMANDS, MARKERS, command_spec
from diagnostic.schema.logfacts import (
    CaptureTiming,
    Evidence,
    LogFacts,
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
    b"Model Runner",
    b"SpecDecoding metrics",
    b"metrics: Draft",
    b"WARNING",
    b"backend",
    b"eager mode",
    b"spec_decode_num_accepted_tokens_per_pos",
)
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
_VERSION_BANNER = re.compile(r"vLLM (?:API )?server version (?P<v>\d[\w.+-]*)")
_SERVING = re.compile(r"serving model (?P<m>\S+)")
_ENGINE_LINE = re.compile(r"Initializing an? (?:(?P<gen>V[01]) )?LLM engine \(v(?P<v>[^)]+)\)")
_MODE_REPR = re.compile(
    r"""['"]cudagraph_mode['"]\s*:\s*(?:<CUDAGraphMode\.(?P<name>\w+)[^>]*>"""
    r"""|\[\s*(?P<a>\d)\s*,\s*(?P<b>\d)\s*\]|(?P<n>\d)|(?P<null>null|None))"""
)
_MODE_NUMBERS = {
    "0": "NONE",
    "1": "PIECEWISE",
    "2": "FULL",
    "2,0": "FULL_DECODE_ONLY",
    "2,1": "FULL_AND_PIECEWISE",
}
_BAR = re.compile(r"Capturing (?:CUDA|ACL) graphs \((?P<desc>[^)]*)\)")  # ACL: vllm-ascend
_BAR_V0 = re.compile(r"Capturing (?:CUDA graph shapes|cudagraphs for decoding|the model for CUDA)")
_BAR_DRAFT = re.compile(r"Capturing (?P<what>[a-z][\w -]*?) CUDA graphs")
_FINISHED = re.compile(
    r"Graph capturing finished in (?P<s>[\d.]+) secs?(?:, took (?P<gib>[\d.]+) GiB)?"
)
# Only a whole mode name counts: a line cut mid-word ("cudagraph_mode=P", a pasted excerpt)
# is no evidence of what the engine set.
_MODE = r"(?:CUDAGraphMode\.)?(?P<{}>FULL_AND_PIECEWISE|FULL_DECODE_ONLY|PIECEWISE|FULL|NONE)\b"
_SETTING = re.compile("setting cudagraph_mode=" + _MODE.format("to"))
_OVERRIDE = re.compile(
    "[Oo]verriding cudagraph_mode (?:from " + _MODE.format("from") + " )?to " + _MODE.format("to")
)
_PROFILING = re.compile(r"Profiling CUDA graph memory: (?P<modes>.*)")
_BACKEND = re.compile(
    r"Using (?:AttentionBackendEnum\.)?(?P<b>[A-Z][A-Z0-9_]+) (?:attention )?backend"
    r"|Using (?P<v0>[A-Z][\w ]*?) backend(?:\.| on )"
)
_READY = ("Starting vLLM", "init engine (profile", "startup complete")
_EAGER = ("Cudagraph is disabled under eager mode", "Enforce eager set", "using eager mode")
_COMMANDS = tuple(c.decode() for c in COMMANDS)


def wants_more(text: str) -> bool:
    """A settings line whose brackets are still open: the log wrapped it."""
    for marker in ("with config: ", "non-default args: ", "args: Namespace("):
        at = text.find(marker)
        if at != -1:
            return _kv.balance(text, at) > 0
    return False


def continues(text: str) -> bool:
    """A physical line that is not a new log record."""
    return bool(text) and not _RECORD.match(text)


_RECORD = re.compile(
    r"^(?:\([^()]*? pid=\d+(?:, ip=[^()\s]+)?\)|(?:INFO|WARNING|ERROR|DEBUG|CRITICAL)\b"
    r"|\[[A-Z]\d{4}|\d{4}-\d\d-\d\d|Capturing |Loading |Traceback|\s*$)"
)


class Parser(LogParser):
    """Feed it candidate lines in order; `finish()` returns the facts."""

    engine = ENGINE

    def __init__(self, facts: LogFacts) -> None:
        super().__init__(facts)
        self.procs: dict[str, VWorker] = {}
        self.metrics = Metrics(facts)
        self.configured_line: Evidence | None = None
        self.enforce_eager: bool | None = None
        self.generation: str | None = None
        self.ready = False
        self.command_lines: set[int] = set()
        self.ray_folded = 0  # lines Ray's log dedup folded into one (other workers' copies)

    # -- lines -------------------------------------------------------------------------
    def feed(self, line: Line) -> None:
        """Read one candidate line (several records when processes wrote into one line)."""
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
        if any(c in text for c in _COMMANDS) and self.command(line):
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
        if "cudagraph" in text or "Cudagraph" in text or "CUDAGraph" in text or "eager" in text:
            self._modes(proc, line)
        if "Skipping CUDA graph capture" in text:
            proc.eager.append(ev(line))
        if "Profiling CUDA graph memory" in text:
            self._planned(proc, line)
        if "LLM engine" in text and "with config" in text:
            self._config(proc, line)
        elif "args: {" in text:
            self._requested(line)
        elif "args: Namespace(" in text:
            self._namespace(line)
        if "vLLM" in text:
            self._banner(line)
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
        setting = _SETTING.search(text)
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

    def _config(self, proc: VWorker, line: Line) -> None:
        text = line.text
        m = _ENGINE_LINE.search(text)
        if m:
            self.facts.version = self.facts.version or m["v"]
            self.generation = m["gen"] or "V0"
        _, found, config = text.partition("with config:")
        if not found:  # a mutated or wrapped line that lost its "with config:" marker
            return
        kv = _kv.split_kv(config)
        self.facts.model = self.facts.model or _kv.unquote(kv.get("model"))
        tp = kv.get("tensor_parallel_size", "")
        if tp.isdigit():
            self.facts.tensor_parallel_size = int(tp)
        if "enforce_eager" in kv:
            self.enforce_eager = kv["enforce_eager"] == "True"
            if self.enforce_eager:
                proc.eager.append(ev(line, "enforce_eager"))
        self._spec_config(kv.get("speculative_config"), line)
        compilation = kv.get("compilation_config", "")
        mode = _MODE_REPR.search(compilation)
        if mode:
            self.facts.capture.configured = _mode_name(mode)
            self.configured_line = ev(line, "cudagraph_mode")
        elif self.generation == "V1" and '"use_cudagraph"' in compilation:
            # 0.9 printed no cudagraph_mode: use_cudagraph and full_cuda_graph say it.
            full = '"full_cuda_graph":true' in compilation.replace(" ", "")
            graphs = '"use_cudagraph":true' in compilation.replace(" ", "")
            self.facts.capture.configured = (
                "NONE" if not graphs or self.enforce_eager else "FULL" if full else "PIECEWISE"
            )
            self.configured_line = ev(line, "use_cudagraph")
        elif self.generation == "V0" and self.enforce_eager is not None:
            self.facts.capture.configured = "NONE" if self.enforce_eager else "CAPTURED"
            self.configured_line = ev(line, "enforce_eager")

    def _spec_config(self, raw: str | None, line: Line) -> None:
        if raw is None:
            return
        spec = self.facts.spec
        if raw.strip() in ("None", ""):
            spec.enabled = spec.enabled or False
            return
        inner = _kv.split_kv(raw[raw.find("(") + 1 : raw.rfind(")")])
        spec.enabled = True
        spec.method = spec.method or _kv.unquote(inner.get("method"))
        spec.drafter = spec.drafter or _kv.unquote(inner.get("model") or inner.get("draft_model"))
        k = inner.get("num_spec_tokens") or inner.get("num_speculative_tokens") or ""
        if k.isdigit():
            spec.num_draft_tokens = int(k)
        if spec.method is None and spec.drafter:
            spec.method = "draft_model"
        self.facts.spec_evidence.append(ev(line, "speculative_config"))

    def _requested(self, line: Line) -> None:
        text = line.text
        value = _kv.literal_prefix(text[text.index("args: {") + 6 :])
        if not isinstance(value, dict):
            self.facts.notes.append(f"line {line.number}: could not read the non-default args")
            return
        self.facts.requested.update({str(k): v for k, v in value.items()})
        self.facts.model = self.facts.model or _str(value.get("model"))
        sc = value.get("speculative_config")
        if isinstance(sc, dict) and sc:
            spec = self.facts.spec
            spec.enabled = True
            spec.method = spec.method or _str(sc.get("method"))
            spec.drafter = spec.drafter or _str(sc.get("model"))
            k = sc.get("num_speculative_tokens")
            if isinstance(k, int) and spec.num_draft_tokens is None:
                spec.num_draft_tokens = k
            self.facts.spec_evidence.append(ev(line))

    def _namespace(self, line: Line) -> None:
        text = line.text
        body = text[text.index("args: Namespace(") + 16 : text.rfind(")")]
        kv = {k: _kv.literal(v) for k, v in _kv.split_kv(body).items()}
        self.facts.requested.update(kv)
        self.facts.model = self.facts.model or _str(kv.get("model"))
        drafter = _str(kv.get("speculative_model"))
        if drafter:
            spec = self.facts.spec
            spec.enabled, spec.drafter = True, spec.drafter or drafter
            spec.method = spec.method or ("ngram" if drafter == "[ngram]" else "draft_model")
            k = kv.get("num_speculative_tokens")
            if isinstance(k, int):
                spec.num_draft_tokens = spec.num_draft_tokens or k
            self.facts.spec_evidence.append(ev(line))

    def _banner(self, line: Line) -> None:
        m = _VERSION_BANNER.search(line.text)
        if m:
            self.facts.version = self.facts.version or m["v"]
            serving = _SERVING.search(line.text)
            if serving:
                self.facts.model = self.facts.model or serving["m"].rstrip(",")

    def _runner(self, proc: VWorker, line: Line) -> None:
        text = line.text
        if "Using V2 Model Runner" in text:
            proc.runner = "V2"
        elif "using the V1 model runner instead" in text or "does not yet support" in text:
            proc.runner = "V1"
            self.fallback(line)

    def command(self, line: Line, *, launch: bool = False) -> bool:
        """A pasted launch command: what was configured (not what the engine resolved)."""
        cmd = find_command(line.text, MARKERS, launch=launch)
        if cmd is None:
            return False
        self.kind = "command"
        self.command_lines.add(line.number)
        got = command_spec(cmd)
        facts, spec = self.facts, self.facts.spec
        set_fact(facts, "version", got["version"])
        set_fact(facts, "model", got["model"])
        set_fact(facts, "capture.configured", "NONE" if got["eager"] else got["configured"])
        if got["eager"]:
            self._proc("command").eager.append(ev(line, "--enforce-eager"))
        if spec.enabled is None or got["enabled"]:
            spec.enabled = got["enabled"]
        for path, key in (("method", "method"), ("num_draft_tokens", "k"), ("drafter", "drafter")):
            set_fact(facts, f"spec.{path}", got[key])
        facts.spec_evidence.append(ev(line, "--speculative"))
        facts.requested.update({k: v for k, v in cmd.flags.items()})
        return True

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
        facts.backend = facts.backend or (
            "cuda" if facts.capture_timings or self.generation else None
        )
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


def _mode_name(m: re.Match[str]) -> str | None:
    if m["name"]:  # a repr cut or spliced mid-name ('FULL_AND_PIEC') names no mode
        return m["name"] if m["name"] in _MODE_NUMBERS.values() else None
    if m["a"] is not None:
        return _MODE_NUMBERS.get(f"{m['a']},{m['b']}")
    if m["n"] is not None:
        return _MODE_NUMBERS.get(m["n"])
    return None


def _str(value: object) -> str | None:
    return value if isinstance(value, str) and value else None
