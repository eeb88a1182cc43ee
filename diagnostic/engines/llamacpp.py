"""llama.cpp `llama-server` logs, `llama-speculative` summaries, `/completion` timings and
pasted `llama-server` commands -> LogFacts.

llama.cpp has no capture modes and logs CUDA-graph decisions only at debug level
(`ggml_backend_cuda_graph_compute: disabling CUDA graphs due to …`). `graphs reused = N` in
the per-request timings counts reuse of llama.cpp's own compute graph, not CUDA graphs.
"""

from __future__ import annotations

import re

from diagnostic.engines._command import Command, find_command, from_argv
from diagnostic.engines._common import AcceptanceTally, LogParser, cap_append, ev
from diagnostic.engines._lines import Line
from diagnostic.engines._signals import Signal, name_source
from diagnostic.schema.logfacts import (
    GRAPHLESS_PLATFORMS,
    AcceptanceSample,
    Evidence,
    LogFacts,
    SourceKind,
)

ENGINE = "llamacpp"
ANCHORS: tuple[bytes, ...] = (
    b"build",
    b"system_info",
    b"device_info",
    b"- CPU",
    b"- CUDA",
    b"ggml_cuda_init",
    b"CUDA graphs",
    b"GGML_CUDA_DISABLE_GRAPHS",
    b"offloaded",
    b"model buffer size",
    b"draft",
    b"speculative",
    b"acc per pos",
    b"  eval time =",  # per-request timings: "prompt eval time" and "       eval time"
    b"per position",
    b"loading model",
    b"listening",
    b"llama-server",
    b" W ",
    b"warning",
    b"version: ",
    b"build_info",
    b"n_max=",
    b"statistics",
    b"spawning server instance",
    b"load:   ",
    b"--spec-",
    b"-md",
    b"router server",
)
SIGNATURES: tuple[bytes, ...] = (
    b"llama_server",
    b"llama-server",
    b"llama_model_loader",
    b"srv  ",
    b"slot ",
    b"print_timing",
    b"ggml_",
    b"llama_context",
    b"main: HTTP server",
    b"llama_perf_context_print",
    b"common_perf_print",
    b"build_info",
    b"common_speculative",
    b"ggml_backend_cuda_graph_compute",
    b"--draft-max",
    b"--spec-type",
    b"--spec-draft",
    b"-md ",
)
_ON = {"spec.enabled": True}
SIGNALS: tuple[Signal, ...] = (
    # llama-speculative / llama-speculative-simple summary: `n_draft = 5` is the draft length.
    Signal(
        "n_draft",
        {**_ON, "spec.num_draft_tokens": "{k}"},
        "metric",
        re.compile(r"^\s*n_draft\s*=\s*(?P<k>\d+)"),
    ),
    Signal(
        "n_draft", {"spec.method": "draft"}, "metric", re.compile(r"^\s*n_draft\s*="), weak=True
    ),
    # Per-drafter statistics: `statistics draft-eagle3: …`, `statistics ngram-simple: …`, and
    # forks' own types (`statistics mtp: …`), named as printed.
    Signal(
        "statistics",
        {**_ON, "spec.method": "{m}"},
        "metric",
        re.compile(r"statistics\s+(?P<m>[a-z][\w-]*):\s+#"),
    ),
    # The implementation's settings line after `adding speculative implementation`.
    Signal(
        "n_max=",
        {"spec.num_draft_tokens": "{k}"},
        "startup",
        re.compile(r"^(?:\S+ [IWE] )?common_speculative\w*: - n_max=(?P<k>\d+)"),
        head=True,
    ),
    Signal("draft acceptance", _ON, "metric"),  # even when the line is cut before its numbers
    # A /completion response: draft_n counts drafted tokens; generation_settings always list
    # speculative.n_max (16 by default), a draft length only when drafting happened.
    Signal('"draft_n"', _ON, "metric"),
    Signal(
        '"speculative.n_max"',
        {"spec.num_draft_tokens": "{k}"},
        "metric",
        re.compile(r'"speculative\.n_max":\s*(?P<k>\d+)'),
        if_spec=True,
    ),
    Signal(
        "size_m=", {"spec.num_draft_tokens": "{k}"}, "startup", re.compile(r"\bsize_m=(?P<k>\d+)")
    ),
    # A release archive's name (`llama-b6123-bin-win-cuda-12.4-x64.zip`).
    Signal(
        "-bin-",
        {"version": "b{n}"},
        "startup",
        re.compile(r"\bllama-b(?P<n>\d{3,})-bin-"),
        weak=True,
        head=True,
    ),
    # The ggml-org images name the build in their tag (`llama.cpp:server-cuda-b5400`).
    Signal(
        "llama.cpp:",
        {"version": "b{n}"},
        "startup",
        re.compile(r"llama\.cpp:[\w.-]*?-b(?P<n>\d{3,})\b"),
        weak=True,
        head=True,
    ),
)
COMMANDS: tuple[bytes, ...] = (b"llama-server", b"llama.cpp:server")
_MARKERS = (re.compile(r"\S*llama-server(?:\.exe)?"), re.compile(r"\S*llama\.cpp:server\S*"))
_OFF = {"none", "off", "0", "false"}
# A line worth reading as a command: the program, the image, or flags only llama.cpp takes
# (argument lists without the program: a compose command array, a line of flags).
_COMMAND_HINTS = ("llama-server", "llama.cpp:server", "--spec-", "--draft", "-md", "--model-draft")
# Settings files a command can take the rest of its flags from (not in the text).
_FILE_FLAGS = ("models-preset", "config")

# `build: N (hash)`, `build N (hash) with …`, --version's `version: N (hash)` and newer
# `version: 0.1.0-dev (build N, commit hash)`, /props' `"build_info": "bN-hash"`.
_BUILD = re.compile(
    r"\b(?:build|version)(?::| =|) (?P<num>\d+) \((?P<hash>[0-9a-f]+)\)"
    r"|build=(?P<n2>\d+) commit=\"?(?P<h2>[0-9a-f]+)"
    r"|\(build (?P<n3>\d+), commit (?P<h3>[0-9a-f]+)\)"
    r"|build_info[\"']?\s*[:=]\s*[\"']?b(?P<n4>\d+)-(?P<h4>[0-9a-zA-Z]+)"
)
# The router's child command, one argument per line: `srv  load:   --spec-type`.
_ROUTER_ARG = re.compile(r"\bload:\s{3,}(?P<arg>\S.*)$")
# A preset (INI) line for a speculation setting: `spec-type = draft-mtp`.
_INI = re.compile(r"^(?P<k>(?:spec|draft)-[\w-]+|model-draft|md)\s*=\s*(?P<v>\S+)\s*$")
_MODEL = re.compile(r"loading model '(?P<m>[^']+)'|loaded meta data .* from (?P<f>\S+)")
_DRAFT_MODEL = re.compile(r"loading draft model '(?P<m>[^']+)'")
_SPEC_IMPL = re.compile(r"adding speculative implementation '(?P<m>[^']+)'")
_ACCEPT = re.compile(
    r"draft acceptance(?: rate)? = (?P<r>[\d.]+) "
    r"\(\s*(?P<a>\d+) accepted /\s*(?P<g>\d+) generated\)"
    r"(?:, mean (?:acceptance length|len) = \s*(?P<l>[\d.]+))?"
)
_EVAL = re.compile(r"\|\s+eval time =\s*[\d.]+ ms /\s*(?P<n>\d+) tokens")
_PER_POS = re.compile(r"(?:acc per pos|acceptance rate per position) = \((?P<p>[^)]*)\)")
_TASK = re.compile(r"\| task (?P<t>-?\d+) \|")
_DISABLE = re.compile(r"disabling CUDA graphs due to (?P<why>[^\[(]+)")
# A speculation statistic (acceptance, draft depth) and the ones this reader understands.
_SPEC_STAT = re.compile(
    r"(?i)\baccept\w*\s*[=:]\s*[\d.(]|\bdraft[ _-]?(?:depth|len|length)\w*\s*[=:]\s*\d"
    r"|statistics\s+\S+:"
)
_UNDERSTOOD = re.compile(
    r"draft acceptance(?: rate)? = [\d.]+ \(|^\s*(?:n_accept|accept|n_draft)\s*=|"
    r"statistics\s+[a-z][\w-]*:\s+#|\"draft_n(?:_accepted)?\"|acceptance rate per position|"
    r"acc per pos"
)
_GPU_DEVICE = re.compile(
    r"- (?:CUDA|ROCm|MTL|Vulkan|SYCL)\d|ggml_(?:cuda|vulkan)_init: [Ff]ound [1-9]"
    r"|(?:CUDA|ROCm)\d model buffer"
)
_GPU_BUILD = re.compile(r"\b(?:CUDA|ROCm|HIP|MTL|Metal|Vulkan|SYCL|CANN|MUSA|OpenCL)\b")
_OFFLOADED = re.compile(r"offloaded (?P<n>\d+)/(?P<m>\d+) layers to GPU")
_USE_GRAPHS = re.compile(r"USE_GRAPHS = (?P<v>\d)")
_WARN = re.compile(r"^\d+\.\d+\.\d+\.\d+ W |^\s*(?:WARN|warning)\b|\bwarning:")
_K_FLAGS = ("--draft-max", "--draft", "--draft-n", "--spec-draft-n-max")
_TYPE_K_FLAGS = {  # the draft max of a type that drafts without a draft model
    "ngram-simple": "--spec-ngram-simple-size-m",
    "ngram-mod": "--spec-ngram-mod-n-max",
}
_DRAFT_FLAGS = ("md", "model-draft", "spec-draft-model")


def wants_more(text: str) -> bool:
    """llama.cpp prints no wrapped settings line worth joining."""
    return False


def continues(text: str) -> bool:
    """Unused: nothing is joined."""
    return False


class Parser(LogParser):
    """Feed it candidate lines in order; `finish()` returns the facts."""

    engine = ENGINE

    def __init__(self, facts: LogFacts) -> None:
        super().__init__(facts)
        self.tally = AcceptanceTally()
        self.pending: tuple[AcceptanceSample, Line, str | None] | None = None
        self.cpu_device: Evidence | None = None
        self.gpu_device: Evidence | None = None
        self.use_graphs: tuple[bool, Evidence] | None = None
        self.disabled: dict[str, int] = {}
        self.disabled_lines: list[Evidence] = []
        self.env_disabled: Evidence | None = None
        self.offloaded: tuple[int, Evidence] | None = None
        self.debug_level = False
        self.ready = False
        self.router = False
        self.router_args: list[tuple[str, Line]] | None = None  # the router's child command
        self.env_from_command = False

    def feed(self, line: Line) -> None:
        """Read one candidate line."""
        text = line.text
        if _SPEC_STAT.search(text) and not _UNDERSTOOD.search(text):
            cap_append(self.facts.not_understood, ev(line))  # a fork's own statistics line
        if "draft acceptance" in text:
            self.kind = "metric"
            self._acceptance(line)
            return
        arg = _ROUTER_ARG.search(text) if self.router_args is not None else None
        if arg:
            self.kind = "command"
            self.router_args.append((arg["arg"].strip(), line))  # type: ignore[union-attr]
            return
        self._router_command()
        if "spawning server instance with args:" in text:
            self.router_args = []
            return
        if any(h in text for h in _COMMAND_HINTS) and self.command(line):
            return
        if "=" in text and (ini := _INI.match(text)):
            self._flags(Command(argv=[], flags={ini["k"]: ini["v"]}), line, whole=False)
        if "starting router server" in text:
            self.router = True  # a router loads no model: it says nothing about speculation
        if "acc per pos" in text or "per position" in text:
            self._per_position(text)
        if " eval time =" in text:
            self._eval(text)
        if self.facts.version is None and ("build" in text or "version" in text):
            b = _BUILD.search(text)
            if b:
                num = b["num"] or b["n2"] or b["n3"] or b["n4"]
                self.facts.version = f"b{num}-{b['hash'] or b['h2'] or b['h3'] or b['h4']}"
        if self.facts.model is None:
            m = _MODEL.search(text)
            if m:
                self.facts.model = m["m"] or m["f"]
        self._backend(line)
        self._speculation(line)
        if "verbosity = " in text:
            self.debug_level = "verbosity = 4" in text or "verbosity = 5" in text
        if _WARN.search(text):
            self.warning(line)
        if "listening" in text:
            self.ready = True

    def command(self, line: Line, *, launch: bool = False) -> bool:
        """A llama-server command line: the flags it was started with."""
        cmd = find_command(line.text, _MARKERS, launch=launch, image_words=("llama",))
        if cmd is None or (cmd.bare and not any(_speculative(f) for f in cmd.flags)):
            return False
        self.kind = "command"
        whole = not cmd.bare and not any(f in cmd.flags for f in _FILE_FLAGS)
        self._flags(cmd, line, whole=whole)
        flags = cmd.flags
        self.facts.model = self.facts.model or cmd.text("m", "model", "hf", "hf-repo")
        if "GGML_CUDA_DISABLE_GRAPHS" in cmd.env:
            self.env_disabled, self.env_from_command = ev(line, "GGML_CUDA_DISABLE_GRAPHS"), True
        if "lv" in flags or "verbose" in flags:
            self.debug_level = self.debug_level or flags.get("lv") == "4" or "verbose" in flags
        return True

    def _router_command(self) -> None:
        """The child command the router listed one argument per line, once it is complete."""
        if self.router_args:
            args = [a for a, _ in self.router_args]
            self._flags(from_argv(args[1:]), self.router_args[0][1], whole=True)
        self.router_args = None

    def _flags(self, cmd: Command, line: Line, *, whole: bool) -> None:
        """Speculation from flags (a command, a router's argument list, preset lines):
        `whole` when nothing else configures the server (no preset or config file)."""
        self.facts.requested.update(cmd.flags)
        spec = self.facts.spec
        drafter = cmd.text(*_DRAFT_FLAGS)
        method = cmd.text("spec-type")
        if method is not None and method.lower() in _OFF:
            method, drafter = None, None
        if drafter:
            spec.drafter = spec.drafter or drafter
        if method or drafter:
            spec.enabled, spec.method = True, spec.method or method or "draft"
        k_flags = [f for t, f in _TYPE_K_FLAGS.items() if (method or "").startswith(t)] + list(
            _K_FLAGS
        )
        k = next((n for f in k_flags if (n := cmd.number(f.lstrip("-"))) is not None), None)
        if k is not None and (spec.enabled or not whole):
            spec.num_draft_tokens = k
        if spec.enabled:
            self.facts.spec_evidence.append(ev(line))
        elif spec.enabled is None and whole:
            spec.enabled = False

    def _backend(self, line: Line) -> None:
        text = line.text
        if "- CPU" in text and ":" in text:
            self.cpu_device = self.cpu_device or ev(line)
        if _GPU_DEVICE.search(text):
            self.gpu_device = self.gpu_device or ev(line)
        if "system_info" in text:
            g = _USE_GRAPHS.search(text)
            if g:
                self.use_graphs = (g["v"] == "1", ev(line, "USE_GRAPHS"))
            if "CUDA :" in text:
                self.gpu_device = self.gpu_device or ev(line, "CUDA")
            elif "CPU :" in text and not _GPU_BUILD.search(text):
                self.platforms.see("cpu", ev(line))  # a build with no GPU backend
        d = _DISABLE.search(text)
        if d:
            why = d["why"].strip()
            self.disabled[why] = self.disabled.get(why, 0) + 1
            cap_append(self.disabled_lines, ev(line))
            self.fallback(line)
        if "GGML_CUDA_DISABLE_GRAPHS" in text:
            self.env_disabled = ev(line)
        o = _OFFLOADED.search(text)
        if o:
            self.offloaded = (int(o["n"]), ev(line))

    def _speculation(self, line: Line) -> None:
        text = line.text
        spec = self.facts.spec
        d = _DRAFT_MODEL.search(text)
        if d:
            spec.enabled, spec.drafter = True, spec.drafter or d["m"]
            spec.method = spec.method or "draft"
            self.facts.spec_evidence.append(ev(line))
        s = _SPEC_IMPL.search(text)
        if s:
            spec.enabled, spec.method = True, spec.method or s["m"]
            self.facts.spec_evidence.append(ev(line))

    def _acceptance(self, line: Line) -> None:
        m = _ACCEPT.search(line.text)
        if not m:
            return
        self._flush()
        sample = AcceptanceSample(
            line=line.number,
            accept_rate=float(m["r"]),
            accepted=int(m["a"]),
            drafted=int(m["g"]),
            mean_acceptance_length=float(m["l"]) if m["l"] else None,
        )
        task = _TASK.search(line.text)
        self.pending = (sample, line, task["t"] if task else None)
        self.facts.spec.enabled = True

    def _per_position(self, text: str) -> None:
        m = _PER_POS.search(text)
        task = _TASK.search(text)
        if m and self.pending and (task is None or task["t"] == self.pending[2]):
            values = [v.strip() for v in m["p"].split(",") if v.strip()]
            try:
                self.pending[0].per_position = [float(v) for v in values]
            except ValueError:
                return

    def _eval(self, text: str) -> None:
        # One "eval time" line per answer: answers of ≥ 2 tokens could have drafted.
        m = _EVAL.search(text)
        if m and int(m["n"]) >= 2:
            self.facts.requests_decoded = (self.facts.requests_decoded or 0) + 1

    def _flush(self) -> None:
        if self.pending:
            self.tally.add(self.pending[0], self.facts, self.pending[1])
            self.pending = None

    def finish(self) -> LogFacts:
        """Decide what can be said about CUDA graphs; return the facts."""
        self._router_command()
        self._flush()
        self.tally.finish(self.facts)
        facts = self.facts
        facts.workers = ["main"]
        if facts.spec.enabled is None and self.ready and not self.router:
            facts.spec.enabled = False  # llama-server names its drafter at start-up
        if facts.spec.enabled and facts.spec.num_draft_tokens is None and facts.acceptance:
            positions = len(facts.acceptance[0].per_position)
            facts.spec.num_draft_tokens = positions or None
        self._capture()
        return facts

    def _capture(self) -> None:
        capture = self.facts.capture
        if self.use_graphs is not None:
            capture.configured = "CAPTURED" if self.use_graphs[0] else "NONE"
            capture.evidence.append(self.use_graphs[1])
        if self.env_disabled is not None:
            capture.configured = "NONE"
            capture.evidence.append(self.env_disabled)
        layers = self.offloaded[0] if self.offloaded else None
        gpu = (self.gpu_device is not None or bool(layers)) and layers != 0
        if not gpu and (self.cpu_device or self.offloaded):
            cpu = self.cpu_device or (self.offloaded[1] if self.offloaded else None)
            assert cpu is not None
            self.platforms.see("cpu", cpu)  # a CPU device list, or no layer offloaded
        platform = self.decide_platform()
        capture.resolved, capture.reason = self._resolution(gpu, platform)  # type: ignore[assignment]
        self._capture_source()
        for e in (self.gpu_device, self.cpu_device, self.offloaded and self.offloaded[1]):
            if e:
                cap_append(capture.evidence, e)
        for e in self.disabled_lines:
            cap_append(capture.evidence, e)

    def _capture_source(self) -> None:
        capture = self.facts.capture
        if capture.resolved == "UNKNOWN":
            return
        found = [*self.disabled_lines, self.env_disabled, self.gpu_device, self.cpu_device]
        e = next((x for x in found if x is not None), self.offloaded and self.offloaded[1])
        if e:
            kind: SourceKind = (
                "command" if self.env_from_command and e is self.env_disabled else "startup"
            )
            name_source(self.facts, "capture.resolved", kind, e, replace=True)

    def _resolution(self, gpu: bool, platform: str) -> tuple[str, str]:
        if self.disabled:
            reasons = "; ".join(f"{why} ({n}x)" for why, n in self.disabled.items())
            return "NONE", f"llama.cpp disabled CUDA graphs: {reasons}"
        if self.env_disabled is not None:
            return "NONE", "GGML_CUDA_DISABLE_GRAPHS is set"
        if platform in GRAPHLESS_PLATFORMS:
            where = "the CPU (no GPU device)" if platform == "cpu" else f"{platform.title()}"
            return "NONE", f"no CUDA graphs: the model runs on {where}"
        if gpu and self.use_graphs is not None and not self.use_graphs[0]:
            return "NONE", "built without CUDA graphs (USE_GRAPHS = 0)"
        if gpu and self.debug_level:
            return (
                "CAPTURED",
                "CUDA build with graphs and no 'disabling CUDA graphs' line at debug level",
            )
        if gpu:
            return (
                "UNKNOWN",
                "CUDA backend, but llama.cpp logs CUDA-graph use only at debug level "
                "(run llama-server with -lv 4 to see 'disabling CUDA graphs' lines)",
            )
        return (
            "UNKNOWN",
            "the log names no compute backend (no device_info, system_info or CUDA lines at "
            "this verbosity; -lv 4 logs them); 'graphs reused' is llama.cpp's compute-graph "
            "reuse, not CUDA graphs",
        )


def _speculative(flag: str) -> bool:
    return flag.startswith(("spec", "draft", "md", "model-draft", "hfd", "hf-repo-draft"))
