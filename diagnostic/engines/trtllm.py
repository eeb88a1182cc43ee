"""TensorRT-LLM (`trtllm-serve`, its PyTorch and TensorRT backends, `run.py`): logs, pasted
commands and extra-options files -> LogFacts.

TensorRT-LLM prints its version on import (`[TensorRT-LLM] TensorRT-LLM version: X`, later
`TensorRT LLM version: X`), logs with `[MM/DD/YYYY-HH:MM:SS] [TRT-LLM] [I] …`, and takes
speculation and CUDA graphs from the LLM API options (`--extra_llm_api_options` YAML or JSON:
`speculative_config {decoding_type, max_draft_len, num_nextn_predict_layers}`,
`cuda_graph_config`, older `pytorch_backend_config.use_cuda_graph`). The PyTorch backend
captures graphs after `Creating CUDA graph instances for N batch sizes.`, one
`CUDA graph warmup for batch size=B, draft_len=K` per size (K > 0 when drafting). It runs
only on NVIDIA GPUs.
"""

from __future__ import annotations

import json
import re
from typing import Any

from diagnostic.engines._common import LogParser, cap_append, ev, version_in_words
from diagnostic.engines._lines import Line
from diagnostic.engines._signals import Signal, name_source, set_fact
from diagnostic.engines.command import find_command
from diagnostic.schema.logfacts import Evidence, LogFacts

ENGINE = "trtllm"
ANCHORS: tuple[bytes, ...] = (
    b"TRT-LLM",
    b"TRTLLM",
    b"TensorRT",
    b"decoding_type",
    b"DecodingConfig",
    b"max_draft_len",
    b"num_nextn_predict_layers",
    b"draft_len",
    b"speculative_config",
    b"cuda_graph",
    b"CUDA graph",
    b"startup complete",
    b"Uvicorn running",
    b"trtllm-",
    b"extra_llm_api_options",
)
# Near the top only: the keys of an options file shown in the text (`cat extra.yml`).
HEAD_ANCHORS: tuple[bytes, ...] = (
    b"kv_cache_config",
    b"enable_attention_dp",
    b"max_batch_size",
    b"pytorch_backend_config",
    b"enable_chunked_prefill",
    b"tp_size",
    b"ep_size",
    b".yml",
    b".yaml",
)
SIGNATURES: tuple[bytes, ...] = (
    b"[TRT-LLM]",
    b"[TensorRT-LLM]",
    b"TensorRT-LLM version",
    b"TensorRT LLM version",
    b"tensorrt_llm",
    b"trtllm-serve",
    b"trtllm-bench",
    b"extra_llm_api_options",
    b"decoding_type",
    b"num_nextn_predict_layers",
    b"DecodingConfig(",
    b"pytorch_backend_config",
)
_ON = {"spec.enabled": True}
_NUM = r"[\"']?\s*[:=]\s*[\"']?(?P<k>\d+)"
SIGNALS: tuple[Signal, ...] = (
    Signal(
        "LLM version",
        {"version": "{v}"},
        "startup",
        re.compile(r"TensorRT[- ]LLM version:?\s*v?(?P<v>\d+\.\d+[\w.+-]*)"),
    ),
    # An issue form's system info: `- TensorRT-LLM: 1.2.0rc4`.
    Signal(
        "TensorRT-LLM:",
        {"version": "{v}"},
        "startup",
        re.compile(r"TensorRT[- ]LLM:\s*v?(?P<v>\d+\.\d+[\w.+-]*)"),
        weak=True,
    ),
    Signal(  # `pip list`'s row
        "tensorrt",
        {"version": "{v}"},
        "startup",
        re.compile(r"^tensorrt[-_]llm\s{2,}(?P<v>\d+\.\d+[\w.+-]*)\s*$"),
        weak=True,
    ),
    Signal(
        "tensorrt_llm==",
        {"version": "{v}"},
        "startup",
        re.compile(r"tensorrt_llm==(?P<v>\d+\.\d+[\w.+-]*)"),
        weak=True,
    ),
    Signal(
        "Name: tensorrt",
        {"version": "{v}"},
        "startup",
        re.compile(r"Name: tensorrt[-_]llm Version:\s*(?P<v>\d+\.\d+[\w.+-]*)", re.I),
        weak=True,
    ),
    Signal(
        "tensorrt-llm/release:",
        {"version": "{v}"},
        "startup",
        re.compile(r"tensorrt-llm/release:v?(?P<v>\d+\.\d+[\w.+-]*)"),
        weak=True,
    ),
    # The speculative config, as YAML keys, inline JSON or an LLM API class.
    Signal(
        "decoding_type",
        {**_ON, "spec.method": "{m}"},
        "startup",
        re.compile(r"decoding_type[\"']?\s*[:=]\s*[\"']?(?P<m>[A-Za-z][\w]*)"),
    ),
    Signal(
        "DecodingConfig(",
        {**_ON, "spec.method": "{m}"},
        "startup",
        re.compile(r"\b(?P<m>[A-Z][\w]*?)DecodingConfig\("),
    ),
    Signal(
        "max_draft_len",
        {**_ON, "spec.num_draft_tokens": "{k}"},
        "startup",
        re.compile("max_draft_len" + _NUM),
    ),
    Signal(
        "num_nextn_predict_layers",
        {**_ON, "spec.num_draft_tokens": "{k}"},
        "startup",
        re.compile("num_nextn_predict_layers" + _NUM),
        weak=True,  # an MTP draft length only when max_draft_len is not given
    ),
    # The PyTorch backend sizes a drafter's KV cache only when a drafter runs (two-model
    # speculation): `[_torch] Draft KV cache: adjusting max_tokens …`.
    Signal("[_torch] Draft KV cache", _ON, "startup"),
    # examples/run.py with a draft engine.
    Signal(
        "draft_len:",
        {**_ON, "spec.num_draft_tokens": "{k}"},
        "startup",
        re.compile(r"\[TRT-LLM\] \[I\] draft_len: (?P<k>\d+)"),
    ),
)
COMMANDS: tuple[bytes, ...] = (b"trtllm-serve", b"trtllm-bench", b"tensorrt_llm.commands")
_MARKERS = (
    re.compile(r"\S*trtllm-(?:serve|bench)"),
    re.compile(r"\S*tensorrt_llm\.commands\.\w+"),
)
_WARMUP = re.compile(r"CUDA graph warmup for batch size=(?P<bs>\d+)(?:, draft_len=(?P<k>\d+))?")
_INSTANCES = re.compile(r"Creating CUDA graph instances for (?P<n>\d+) batch sizes")
_GRAPH_CONFIG = re.compile(r"cuda_graph_config[\"']?\s*[:=]\s*(?P<v>null|None|~|\{|$)")
_USE_GRAPH = re.compile(r"use_cuda_graph[\"']?\s*[:=]\s*(?P<v>true|false|True|False)")
_SPEC_NULL = re.compile(r"speculative_config[\"']?\s*[:=]\s*(?:null|None|~)\s*,?\s*$")
_CONFIG_KEY = re.compile(
    r"^(?:kv_cache_config|cuda_graph_config|enable_attention_dp|max_batch_size|"
    r"pytorch_backend_config|enable_chunked_prefill|tp_size|ep_size)\s*:"
)
_READY = ("startup complete", "Uvicorn running on")
_FILE_NAME = re.compile(r"[\w.-]+\.(?:ya?ml|json)\b")
# The release said in words: "As of TRT-LLM `1.2.0rc2`", "TRTLLM version: 1.2.0rc8",
# "TensorRT-LLM 1.3.0rc25 supports …" (three numbers: not a "TensorRT-LLM 1.0 backend").
_PROSE_VERSION = re.compile(
    r"\b(?:TensorRT[- ]LLM|TRT-?LLM)(?:\s+version)?(?::\s*|\s+)`?v?"
    r"(?P<v>\d+\.\d+\.\d+(?:[\w.+-]*\w)?)(?![\w.])",
    re.I,
)


class Parser(LogParser):
    """Feed it candidate lines in order; `finish()` returns the facts."""

    engine = ENGINE

    def __init__(self, facts: LogFacts) -> None:
        super().__init__(facts)
        self.configured: tuple[str, Evidence] | None = None
        self.instances: Evidence | None = None
        self.warmups: list[Evidence] = []
        self.draft_lens: list[int] = []
        self.ready = False
        self.config_shown = False  # an options file's keys are in the text
        self.config_file: str | None = None  # options come from a file the text may not show
        self.files_named: set[str] = set()  # files a line other than the command names (cat F)
        self.whole_command = False
        self.spec_off: Evidence | None = None
        self.first: Evidence | None = None
        self.prose_version: tuple[str, Evidence] | None = None  # in words: the last resort

    def feed(self, line: Line) -> None:
        """Read one candidate line."""
        text = line.text
        self.first = self.first or ev(line)
        if any(c.decode() in text for c in COMMANDS) and self.command(line):
            return
        if "." in text:
            self.files_named.update(_FILE_NAME.findall(text))
            said = version_in_words(text, _PROSE_VERSION) if "LLM" in text else None
            if said and self.prose_version is None:
                self.prose_version = (said, ev(line))
        if "warmup for batch size" in text and (w := _WARMUP.search(text)):
            self.warmups.append(ev(line))
            if w["k"]:
                self.draft_lens.append(int(w["k"]))
        if "Creating CUDA graph instances" in text and _INSTANCES.search(text):
            self.instances = self.instances or ev(line)
        self._graph_config(line)
        if _CONFIG_KEY.match(text):
            self.config_shown = True
        if "speculative_config" in text and _SPEC_NULL.search(text):
            self.spec_off = ev(line)
        if "Using LLM with PyTorch backend" in text:
            self.facts.model_runner = "pytorch"
        elif "Using C++ session" in text:
            self.facts.model_runner = "tensorrt"
        if any(marker in text for marker in _READY):
            self.ready = True

    def _graph_config(self, line: Line) -> None:
        text = line.text
        g = _GRAPH_CONFIG.search(text) if "cuda_graph_config" in text else None
        if g:
            mode = "NONE" if g["v"] in ("null", "None", "~") else "CAPTURED"
            self.configured = (mode, ev(line, "cuda_graph_config"))
            self.config_shown = True
        u = _USE_GRAPH.search(text) if "use_cuda_graph" in text else None
        if u:
            mode = "CAPTURED" if u["v"].lower() == "true" else "NONE"
            self.configured = (mode, ev(line, "use_cuda_graph"))

    def command(self, line: Line, *, launch: bool = False) -> bool:
        """`trtllm-serve MODEL … [--extra_llm_api_options FILE|JSON] [--backend …]`."""
        cmd = find_command(line.text, _MARKERS, launch=launch)
        if cmd is None:
            return False
        self.kind = "command"
        self.facts.requested.update(cmd.flags)
        backend = cmd.text("backend")
        if backend:
            self.facts.model_runner = "tensorrt" if backend in ("trt", "tensorrt") else backend
        options = cmd.text("extra-llm-api-options", "config")
        if options and options.lstrip().startswith("{"):
            self._inline_options(options, line)
        elif options:
            self.config_file = options
        self.whole_command = not cmd.bare
        model = next((p for p in cmd.positional if p not in ("serve",)), None)
        self.facts.model = self.facts.model or model
        return True

    def _inline_options(self, options: str, line: Line) -> None:
        try:
            value: Any = json.loads(options)
        except ValueError:
            self.facts.not_understood.append(ev(line, "extra_llm_api_options"))
            return
        spec = value.get("speculative_config") if isinstance(value, dict) else None
        if isinstance(spec, dict):
            facts = self.facts
            k = spec.get("max_draft_len") or spec.get("num_nextn_predict_layers")
            for path, v in (
                ("spec.enabled", True),
                ("spec.method", spec.get("decoding_type")),
                ("spec.num_draft_tokens", k if isinstance(k, int) else None),
            ):
                if set_fact(facts, path, v):
                    name_source(facts, path, "command", ev(line))
            cap_append(facts.spec_evidence, ev(line, "speculative_config"))
        graphs = value.get("cuda_graph_config", "absent") if isinstance(value, dict) else "absent"
        if graphs != "absent":
            self.configured = ("NONE" if graphs is None else "CAPTURED", ev(line))
        self.config_shown = True

    def finish(self) -> LogFacts:
        """Speculation from the warmups, the platform, capture; return the facts."""
        facts = self.facts
        if facts.version is None and self.prose_version:
            facts.version = self.prose_version[0]
            name_source(facts, "version", "startup", self.prose_version[1])
        if self.first is not None:
            self.platforms.see("cuda", self.first)  # TensorRT-LLM runs on NVIDIA GPUs only
        self.decide_platform()
        if any(self.draft_lens) and facts.spec.num_draft_tokens is None:
            facts.spec.enabled, facts.spec.num_draft_tokens = True, max(self.draft_lens)
            name_source(facts, "spec.num_draft_tokens", "startup", self.warmups[0])
        self._spec_off()
        self._capture()
        return facts

    def _spec_off(self) -> None:
        spec = self.facts.spec
        if spec.enabled is not None:
            return
        if self.spec_off is not None:
            spec.enabled = False
            cap_append(self.facts.spec_evidence, self.spec_off)
            return
        # A whole command whose options (if any) are all in the text, or a started server:
        # speculation would be in its speculative_config (and its warmups' draft_len). Options
        # keys shown are the file's only where the text names the file (`cat F`, "F:").
        named = (
            self.config_file is not None and self.config_file.rsplit("/", 1)[-1] in self.files_named
        )
        options_known = self.config_file is None or (self.config_shown and named)
        if options_known and (self.whole_command or (self.ready and self.config_shown)):
            spec.enabled = False

    def _capture(self) -> None:
        capture = self.facts.capture
        if self.configured is not None:
            capture.configured = self.configured[0]
            capture.evidence.append(self.configured[1])
        if self.instances is not None:
            capture.resolved = "CAPTURED"
            capture.reason = (
                f"'Creating CUDA graph instances' and {len(self.warmups)} graph warmup(s)"
            )
            for e in [self.instances, *self.warmups[:3]]:
                cap_append(capture.evidence, e)
        elif self.configured is not None and self.configured[0] == "NONE":
            capture.resolved = "NONE"
            capture.reason = "the LLM API options turn CUDA graphs off"
        elif self.ready:
            capture.resolved = "NONE"
            capture.reason = "the server started without a CUDA-graph warmup"
        else:
            capture.reason = (
                "no 'Creating CUDA graph instances' line (the PyTorch backend prints it before "
                "capture) and no started server in the text"
                + (
                    "; the options configure graphs, which is not what ran"
                    if self.configured
                    else ""
                )
            )
            return
        evidence = self.instances or (self.configured[1] if self.configured else None)
        if evidence is not None:
            name_source(self.facts, "capture.resolved", "startup", evidence, replace=True)
