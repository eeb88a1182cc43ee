"""How llama.cpp ran its compute graphs: the backend lines (devices, system_info, layers
offloaded, `disabling CUDA graphs due to …`) and the CUDA-graph capture they resolve to.

llama.cpp has no capture modes and logs CUDA-graph decisions only at debug level; `graphs
reused = N` in the per-request timings counts reuse of llama.cpp's own compute graph, not CUDA
graphs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from diagnostic.engines._common import LogParser, cap_append, ev
from diagnostic.engines._lines import Line
from diagnostic.engines._signals import name_source
from diagnostic.schema.logfacts import GRAPHLESS_PLATFORMS, Evidence, LogFacts, SourceKind

__all__ = ["Backend"]

_DISABLE = re.compile(r"disabling CUDA graphs due to (?P<why>[^\[(]+)")
_GPU_DEVICE = re.compile(
    r"- (?:CUDA|ROCm|MTL|Vulkan|SYCL)\d|ggml_(?:cuda|vulkan)_init: [Ff]ound [1-9]"
    r"|(?:CUDA|ROCm)\d model buffer"
)
_GPU_BUILD = re.compile(r"\b(?:CUDA|ROCm|HIP|MTL|Metal|Vulkan|SYCL|CANN|MUSA|OpenCL)\b")
_OFFLOADED = re.compile(r"offloaded (?P<n>\d+)/(?P<m>\d+) layers to GPU")
_USE_GRAPHS = re.compile(r"USE_GRAPHS = (?P<v>\d)")


@dataclass
class Backend:
    """What the log says of the compute backend and of CUDA graphs."""

    cpu_device: Evidence | None = None
    gpu_device: Evidence | None = None
    use_graphs: tuple[bool, Evidence] | None = None
    disabled: dict[str, int] = field(default_factory=dict)
    disabled_lines: list[Evidence] = field(default_factory=list)
    env_disabled: Evidence | None = None
    env_from_command: bool = False  # GGML_CUDA_DISABLE_GRAPHS set on the launch command
    offloaded: tuple[int, Evidence] | None = None
    debug_level: bool = False  # -lv 4: 'disabling CUDA graphs' lines would show

    def read(self, line: Line, parser: LogParser) -> None:
        """Read one candidate line for what it says of the backend and of CUDA graphs."""
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
                parser.platforms.see("cpu", ev(line))  # a build with no GPU backend
        d = _DISABLE.search(text)
        if d:
            why = d["why"].strip()
            self.disabled[why] = self.disabled.get(why, 0) + 1
            cap_append(self.disabled_lines, ev(line))
            parser.fallback(line)
        if "GGML_CUDA_DISABLE_GRAPHS" in text:
            self.env_disabled = ev(line)
        o = _OFFLOADED.search(text)
        if o and (self.offloaded is None or int(o["n"]) > self.offloaded[0]):
            # the most any model offloaded: a vision tower (mmproj) or a drafter kept on the
            # CPU does not make the text model a CPU one
            self.offloaded = (int(o["n"]), ev(line))

    def resolve(self, parser: LogParser) -> None:
        """Decide the run's CUDA-graph capture (and its platform) once every line was read."""
        capture = parser.facts.capture
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
            parser.platforms.see("cpu", cpu)  # a CPU device list, or no layer offloaded
        platform = parser.decide_platform()
        capture.resolved, capture.reason = self._resolution(gpu, platform)  # type: ignore[assignment]
        self._capture_source(parser.facts)
        for e in (self.gpu_device, self.cpu_device, self.offloaded and self.offloaded[1]):
            if e:
                cap_append(capture.evidence, e)
        for e in self.disabled_lines:
            cap_append(capture.evidence, e)

    def _capture_source(self, facts: LogFacts) -> None:
        capture = facts.capture
        if capture.resolved == "UNKNOWN":
            return
        found = [*self.disabled_lines, self.env_disabled, self.gpu_device, self.cpu_device]
        e = next((x for x in found if x is not None), self.offloaded and self.offloaded[1])
        if e:
            kind: SourceKind = (
                "command" if self.env_from_command and e is self.env_disabled else "startup"
            )
            name_source(facts, "capture.resolved", kind, e, replace=True)

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
