"""llama.cpp's log reader: `llama-server` start-up and router lines, `llama-speculative`
summaries, `/completion` timings and acceptance, read line by line into LogFacts."""

from __future__ import annotations

import re

from diagnostic.engines._common import AcceptanceTally, LogParser, cap_append, ev
from diagnostic.engines._lines import Line
from diagnostic.engines.command import Command, find_command, from_argv
from diagnostic.engines.llamacpp.capture import Backend
from diagnostic.engines.llamacpp.signals import (
    COMMAND_HINTS,
    FILE_FLAGS,
    MARKERS,
    speculation_from_flags,
    speculative_flag,
)
from diagnostic.schema.logfacts import AcceptanceSample, LogFacts

__all__ = ["ANCHORS", "ENGINE", "SIGNATURES", "Parser"]

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
    b"LLAMA_ARG_",
    b"invalid argument",
)
# A build as people write it in prose, read only where a log's start-up or a paste is (the head):
# ` b10549-7a61c02f1`, a bare ` b9947` (or in backticks), `version 9438`. No signature: they
# name no engine.
HEAD_ANCHORS: tuple[bytes, ...] = (
    *(b"%sb%d" % (before, d) for before in (b" ", b"`", b"(") for d in range(1, 10)),
    b"version ",
    b"GGML backends",  # the issue form's field, and its answer on a line below
    b"Metal",
    b"CPU",
)
SIGNATURES: tuple[bytes, ...] = (
    b"llama_server",
    b"llama-server",
    b"llama_model_loader",
    b"llama_prepare_model_devices",  # newer builds' device choice (`using device Vulkan0 …`)
    b"llama-cli",
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
    b"LLAMA_ARG_",
)

# `build: N (hash)` (`(unknown)` when built outside git: bN alone), `build N (hash) with …`,
# --version's `version: N (hash)` and newer `version: 0.1.0-dev (build N, commit hash)`,
# /props' `"build_info": "bN-hash"`.
_BUILD = re.compile(
    r"\b(?:build|version)(?::| =|) b?(?P<num>\d+) \((?:(?P<hash>[0-9a-f]+)|unknown)\)"
    r"|build=(?P<n2>\d+) commit=\"?(?P<h2>[0-9a-f]+)"
    r"|\(build (?P<n3>\d+), commit (?P<h3>[0-9a-f]+)\)"
    r"|build_info[\"']?\s*[:=]\s*[\"']?b(?P<n4>\d+)-(?P<h4>[0-9a-zA-Z]+)"
)
# Builds are numbered from 1 up: four or five digits since 2023 (not a CUDA line's `version 12040`).
_PROSE_BUILD = re.compile(
    r"(?<![\w.-])b(?P<n>\d{4,5})(?:-(?P<h>[0-9a-f]{7,12}))?(?![\w.])"
    r"|\bversion:?\s+(?P<n2>\d{4,5})(?![\w.])"
)
# The router's child command, one argument per line: `srv  load:   --spec-type`.
# The argument parser refusing a flag of the command: the program exits before loading anything.
_ARG_ERROR = re.compile(r"^error: invalid argument: -+(?P<flag>\S+)")
_ROUTER_ARG = re.compile(r"\bload:\s{3,}(?P<arg>\S.*)$")
# A preset (INI) line for a speculation setting: `spec-type = draft-mtp`.
_INI = re.compile(r"^(?P<k>(?:spec|draft)-[\w-]+|model-draft|md)\s*=\s*(?P<v>\S+)\s*$")
# A setting given as llama-server's environment variable (compose `LLAMA_ARG_DRAFT_MAX: 16`,
# `-e LLAMA_ARG_MODEL_DRAFT=…`): the flag is the rest of the name in lower case with dashes.
_ENV_ARG = re.compile(r"\bLLAMA_ARG_(?P<k>[A-Z0-9_]+)['\"]?\s*[:=]\s*['\"]?(?P<v>[^'\"\s]+)")
# The issue form's "### GGML backends" field, answered a line or two below ("Vulkan",
# "CPU, CUDA"): the one GPU backend named is the platform.
_FORM_FIELD = re.compile(r"^#+\s*GGML backends\s*$")
_FORM_BACKENDS = {"cuda": "cuda", "vulkan": "vulkan", "metal": "metal", "hip": "rocm"}
_FORM_BACKENDS |= {"rocm": "rocm", "sycl": "xpu", "cpu": "cpu", "blas": "cpu"}
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
_WARN = re.compile(r"^\d+\.\d+\.\d+\.\d+ W |^\s*(?:WARN|warning)\b|\bwarning:")


# A draft acceptance line cut before its counts close, and the physical lines that carry them on
# (numbers, not a new record: records start with a time `0.31.295.972 I` or a name).
_TIME = re.compile(r"^\d+\.\d+\.\d+\.\d+ ")
_NUMBERS = re.compile(r"^\s*[\d./()]")


def wants_more(text: str) -> bool:
    """A draft acceptance line a terminal wrapped inside its `(N accepted / M generated)`."""
    return "draft acceptance" in text and "(" in text and not text.rstrip().endswith(")")


def continues(text: str) -> bool:
    """A physical line that carries numbers on, not a new record."""
    return bool(_NUMBERS.match(text)) and not _TIME.match(text)


class Parser(LogParser):
    """Feed it candidate lines in order; `finish()` returns the facts."""

    engine = ENGINE

    def __init__(self, facts: LogFacts) -> None:
        super().__init__(facts)
        self.tally = AcceptanceTally()
        self.pending: tuple[AcceptanceSample, Line, str | None] | None = None
        self.backend = Backend()
        self.ready = False
        self.router = False
        self.router_args: list[tuple[str, Line]] | None = None  # the router's child command
        self.prose_build: str | None = None  # a build named in prose, when no build line says it
        self.form_field: int | None = None  # the line of an issue form's "GGML backends" field
        self.command_flags: frozenset[str] = frozenset()  # the flags of the last command read

    def feed(self, line: Line) -> None:
        """Read one candidate line."""
        text = line.text
        if self.form_field is not None:
            self._form_backends(line)
        if "GGML backends" in text and _FORM_FIELD.match(text.strip()):
            self.form_field = line.number
            return
        if _SPEC_STAT.search(text) and not _UNDERSTOOD.search(text):
            cap_append(self.facts.not_understood, ev(line))  # a fork's own statistics line
        if "invalid argument" in text and (bad := _ARG_ERROR.match(text.strip())):
            self._refused(bad["flag"])
        if "draft acceptance" in text:
            self.kind = "metric"
            self._acceptance(line)
            if "per position" in text:  # newer builds print the rates on the same line
                self._per_position(text)
            return
        arg = _ROUTER_ARG.search(text) if "load:" in text else None
        if arg and self.router_args is None and arg["arg"].startswith("-") and "srv" in text:
            self.router_args = [("llama-server", line)]  # the list pasted without its header
        if arg and self.router_args is not None:
            self.kind = "command"
            self.router_args.append((arg["arg"].strip(), line))
            return
        self._router_command()
        if "spawning server instance with args:" in text:
            self.router_args = []
            return
        if any(h in text for h in COMMAND_HINTS) and self.command(line):
            return
        if "=" in text and (ini := _INI.match(text)):
            speculation_from_flags(
                self.facts, Command(argv=[], flags={ini["k"]: ini["v"]}), line, whole=False
            )
        for env in _ENV_ARG.finditer(text) if "LLAMA_ARG_" in text else ():
            flag = env["k"].lower().replace("_", "-")
            speculation_from_flags(
                self.facts, Command(argv=[], flags={flag: env["v"]}), line, whole=False
            )
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
                commit = b["hash"] or b["h2"] or b["h3"] or b["h4"]
                self.facts.version = f"b{num}-{commit}" if commit else f"b{num}"
        p = _PROSE_BUILD.search(text) if self.prose_build is None else None
        if p and (p["n"] or "CUDA" not in text):
            self.prose_build = f"b{p['n'] or p['n2']}" + (f"-{p['h']}" if p["h"] else "")
        if self.facts.model is None:
            m = _MODEL.search(text)
            if m:
                self.facts.model = m["m"] or m["f"]
        self.backend.read(line, self)
        self._speculation(line)
        if "verbosity = " in text:
            self.backend.debug_level = "verbosity = 4" in text or "verbosity = 5" in text
        if _WARN.search(text):
            self.warning(line)
        if "listening" in text:
            self.ready = True
        elif "loading model" in text:
            self.ready = False  # older builds listen first, then load the model and its drafter

    def command(self, line: Line, *, launch: bool = False) -> bool:
        """A llama-server command line: the flags it was started with."""
        cmd = find_command(line.text, MARKERS, launch=launch, image_words=("llama",))
        if cmd is None or (cmd.bare and not any(speculative_flag(f) for f in cmd.flags)):
            return False
        self.kind = "command"
        whole = not cmd.bare and not any(f in cmd.flags for f in FILE_FLAGS)
        speculation_from_flags(self.facts, cmd, line, whole=whole)
        flags = cmd.flags
        self.command_flags = frozenset(flags)
        self.facts.model = self.facts.model or cmd.text("m", "model", "hf", "hf-repo")
        if "GGML_CUDA_DISABLE_GRAPHS" in cmd.env:
            backend = self.backend
            backend.env_disabled = ev(line, "GGML_CUDA_DISABLE_GRAPHS")
            backend.env_from_command = True
        if "lv" in flags or "verbose" in flags:
            debug = flags.get("lv") == "4" or "verbose" in flags
            self.backend.debug_level = self.backend.debug_level or debug
        return True

    def _refused(self, flag: str) -> None:
        """The last command's flag was refused: it started no server, so its speculative
        flags say nothing of a run (as for a `--version` query)."""
        if flag in self.command_flags:
            spec = self.facts.spec
            spec.enabled = spec.method = spec.num_draft_tokens = spec.drafter = None
            self.command_flags = frozenset()

    def _form_backends(self, line: Line) -> None:
        """The answer to the issue form's backends field: one GPU backend names the platform."""
        if line.number - (self.form_field or 0) <= 2:
            names = [w.lower() for w in re.split(r"[\s,/+&]+", line.text.strip()) if w]
            found = {_FORM_BACKENDS.get(n, "") for n in names}
            gpus = found - {"cpu"}
            if names and "" not in found and len(gpus) <= 1:
                self.platforms.see(gpus.pop() if gpus else "cpu", ev(line))
        self.form_field = None

    def _router_command(self) -> None:
        """The child command the router listed one argument per line, once it is complete."""
        if self.router_args:
            args = [a for a, _ in self.router_args]
            first = self.router_args[0][1]
            speculation_from_flags(self.facts, from_argv(args[1:]), first, whole=True)
        self.router_args = None

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
        facts.version = facts.version or self.prose_build
        if facts.spec.enabled is None and self.ready and not self.router:
            facts.spec.enabled = False  # llama-server names its drafter at start-up
        if facts.spec.enabled and facts.spec.num_draft_tokens is None and facts.acceptance:
            positions = len(facts.acceptance[0].per_position)
            facts.spec.num_draft_tokens = positions or None
        self.backend.resolve(self)
        return facts
