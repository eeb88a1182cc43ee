"""vLLM server logs (V0 0.6–0.10, V1 with Model Runner V1 and V2) -> LogFacts.

Resolved capture mode comes from what happened: capture bars, `Graph capturing finished`,
downgrade and override warnings, eager lines. The config line's `cudagraph_mode` is printed
before the attention backend is chosen, so it is only the *configured* mode.
"""

from __future__ import annotations

import re

from diagnostic.engines import _kv
from diagnostic.engines._common import AcceptanceTally, LogParser, ev
from diagnostic.engines._lines import Line, collapse
from diagnostic.engines._vllm_capture import VWorker, resolve_capture
from diagnostic.schema.logfacts import AcceptanceSample, CaptureTiming, Evidence, LogFacts

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
)
SIGNATURES: tuple[bytes, ...] = (
    b"vLLM",
    b"LLM engine",
    b"non-default args",
    b"(APIServer pid=",
    b"(EngineCore",
    b"Worker_TP",
    b"VllmWorker",
    b"SpecDecoding metrics",
    b"Capturing CUDA graph",
    b"vllm.",
    b"[api_server.py",
)

_PROC = re.compile(r"^\((?P<name>[^()]*?) pid=(?P<pid>\d+)\)\s?")
_EMBEDDED_PROC = re.compile(r"(?<=.)(?=\([A-Za-z_][\w ]*?(?: [\w=]+)*? pid=\d+\) )")
_WORKER_NAME = re.compile(r"Worker|VllmWorkerProcess")
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
_BAR = re.compile(r"Capturing CUDA graphs \((?P<desc>[^)]*)\)")
_BAR_V0 = re.compile(r"Capturing (?:CUDA graph shapes|cudagraphs for decoding|the model for CUDA)")
_BAR_DRAFT = re.compile(r"Capturing (?P<what>[a-z][\w -]*?) CUDA graphs")
_FINISHED = re.compile(
    r"Graph capturing finished in (?P<s>[\d.]+) secs?(?:, took (?P<gib>[\d.]+) GiB)?"
)
_SETTING = re.compile(r"setting cudagraph_mode=(?:CUDAGraphMode\.)?(?P<to>[A-Z_]+)")
_OVERRIDE = re.compile(
    r"[Oo]verriding cudagraph_mode (?:from (?:CUDAGraphMode\.)?(?P<from>[A-Z_]+) )?"
    r"to (?:CUDAGraphMode\.)?(?P<to>[A-Z_]+)"
)
_PROFILING = re.compile(r"Profiling CUDA graph memory: (?P<modes>.*)")
_BACKEND = re.compile(
    r"Using (?:AttentionBackendEnum\.)?(?P<b>[A-Z][A-Z0-9_]+) (?:attention )?backend"
    r"|Using (?P<v0>[A-Z][\w ]*?) backend(?:\.| on )"
)
_NUM = r"(?:\d+(?:\.\d+)?|nan)"
_METRIC = {
    "mean": re.compile(r"Mean acceptance length: (" + _NUM + ")"),
    "avg_rate": re.compile(r"Avg Draft acceptance rate: (" + _NUM + ")%"),
    "rate": re.compile(r"(?<!Avg )Draft acceptance rate: (" + _NUM + ")(%?)"),
    "accepted": re.compile(r"Accepted: (\d+) tokens"),
    "drafted": re.compile(r"Drafted: (\d+) tokens"),
    "per_pos": re.compile(r"Per-position acceptance rate: ((?:" + _NUM + r")(?:, " + _NUM + ")*)"),
    "k": re.compile(r"Number of speculative tokens: (\d+)"),
    "v0_accepted": re.compile(r"Number of accepted tokens: (\d+)"),
    "v0_drafted": re.compile(r"Number of draft tokens(?: tokens)?: (\d+)"),
    "v0_emitted": re.compile(r"Number of emitted tokens: (\d+)"),
}
# The usual ≥0.10.2 line in one search (gigabyte logs hold thousands of them).
_FAST_METRICS = re.compile(
    r"SpecDecoding metrics: Mean acceptance length: (?P<mean>" + _NUM + r"), Accepted throughput: "
    r"[^,]*, Drafted throughput: [^,]*, Accepted: (?P<a>\d+) tokens, Drafted: (?P<d>\d+) tokens, "
    r"Per-position acceptance rate: (?P<pos>[\d., na]*?), Avg Draft"
)
_READY = ("Starting vLLM", "init engine (profile", "startup complete")


def detect(head: bytes) -> int:
    """How many vLLM signatures the start of a log shows."""
    return sum(sig in head for sig in SIGNATURES)


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
    r"^(?:\([^()]*? pid=\d+\)|(?:INFO|WARNING|ERROR|DEBUG|CRITICAL)\b|\[[A-Z]\d{4}"
    r"|\d{4}-\d\d-\d\d|Capturing |Loading |Traceback|\s*$)"
)


class Parser(LogParser):
    """Feed it candidate lines in order; `finish()` returns the facts."""

    engine = ENGINE

    def __init__(self, facts: LogFacts) -> None:
        super().__init__(facts)
        self.procs: dict[str, VWorker] = {}
        self.tally = AcceptanceTally()
        self.configured_line: Evidence | None = None
        self.enforce_eager: bool | None = None
        self.generation: str | None = None
        self.ready = False
        self.k_from_metrics: int | None = None

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
            self._metrics(line)  # the bulk of a long log: no process bookkeeping needed
            return
        m = _PROC.match(text)
        proc = self._proc(f"{m['name']} pid={m['pid']}" if m else "main")
        if "WARNING" in text[:80]:
            self.warning(line)
            if "Async scheduling not supported" in text:
                self.fallback(line)
        if "Capturing" in line.raw or "capturing" in text:
            self._capture(proc, line)
        if "cudagraph" in text or "Cudagraph" in text or "CUDAGraph" in text:
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
        if "Cudagraph is disabled under eager mode" in text or "Enforce eager set" in text:
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
        mode = _MODE_REPR.search(kv.get("compilation_config", ""))
        if mode:
            self.facts.capture.configured = _mode_name(mode)
            self.configured_line = ev(line, "cudagraph_mode")
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
        value = _kv.literal(text[text.index("args: {") + 6 :])
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

    def _metrics(self, line: Line) -> None:
        text = line.text
        fast = _FAST_METRICS.search(text)
        if fast:
            accepted, drafted = int(fast["a"]), int(fast["d"])
            self.tally.count(
                self.facts,
                line.number,
                mean=None if fast["mean"] == "nan" else float(fast["mean"]),
                per_position=[float(x) for x in fast["pos"].split(", ") if x],
                accepted=accepted,
                drafted=drafted,
            )
            return
        got = {name: rx.search(text) for name, rx in _METRIC.items()}
        sample = AcceptanceSample(line=line.number)
        if got["per_pos"]:
            sample.per_position = [float(x) for x in got["per_pos"][1].split(", ")]
        if got["accepted"] and got["drafted"]:
            sample.accepted, sample.drafted = int(got["accepted"][1]), int(got["drafted"][1])
        elif got["v0_accepted"] and got["v0_drafted"]:
            sample.accepted, sample.drafted = int(got["v0_accepted"][1]), int(got["v0_drafted"][1])
        if sample.accepted is not None and sample.drafted:
            sample.accept_rate = sample.accepted / sample.drafted
        elif got["avg_rate"] or got["rate"]:
            m = got["avg_rate"] or got["rate"]
            assert m is not None
            value = float(m[1])
            percent = m.re is _METRIC["avg_rate"] or m[2] == "%"
            sample.accept_rate = value / 100 if percent else value
        sample.mean_acceptance_length = self._mean_length(got, sample)
        if got["k"]:
            self.k_from_metrics = int(got["k"][1])
        self.tally.add(sample, self.facts)

    def _mean_length(
        self, got: dict[str, re.Match[str] | None], s: AcceptanceSample
    ) -> float | None:
        """Tokens per step, bonus included, whatever the release printed."""
        k = self.facts.spec.num_draft_tokens or self.k_from_metrics
        if got["v0_emitted"] and s.drafted and k:
            return int(got["v0_emitted"][1]) * k / s.drafted  # V0: emitted / proposals
        if got["rate"] and not got["avg_rate"] and s.accepted is not None and s.drafted and k:
            # 0.8.5–0.10.1 put the rate first; 0.8.5's mean excluded the bonus token, so
            # recompute it: 1 + accepted / drafts, drafts = drafted / k.
            return 1 + s.accepted * k / s.drafted
        m = got["mean"]
        return float(m[1]) if m and m[1] != "nan" else None

    # -- conclusions -------------------------------------------------------------------
    def finish(self) -> LogFacts:
        """Resolve runner, workers and capture; return the facts."""
        facts = self.facts
        if facts.spec.enabled is None and self.tally.samples:
            facts.spec.enabled = True
        self.tally.finish(facts)
        workers = self._workers()
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
        facts.backend = "cuda" if facts.capture_timings or self.generation else None
        resolve_capture(
            facts,
            workers,
            self.global_events(workers),
            configured_line=self.configured_line,
            ready=self.ready,
            generation=self.generation,
        )
        return facts

    def _workers(self) -> list[VWorker]:
        procs = [p for p in self.procs.values() if not p.name.startswith("APIServer")]
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


def _mode_name(m: re.Match[str]) -> str | None:
    if m["name"]:
        return m["name"]
    if m["a"] is not None:
        return _MODE_NUMBERS.get(f"{m['a']},{m['b']}")
    if m["n"] is not None:
        return _MODE_NUMBERS.get(m["n"])
    return None


def _str(value: object) -> str | None:
    return value if isinstance(value, str) and value else None
