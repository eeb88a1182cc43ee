"""Which platform a log ran on (CUDA, ROCm, Ascend NPU, CPU, Metal, Vulkan), from what it names.

Engines print the platform in many places: vLLM's platform detection and `device_config`,
SGLang's `device=`, llama.cpp's device lists, environment dumps, image tags, launch flags.
A sign is strong when it names the platform and weak when it only implies one (a CUDA-graph
capture line implies a GPU, and is printed the same on ROCm). The most specific strong sign
wins (ROCm and NPU logs mention CUDA too; every llama.cpp device list has a CPU); weak signs
count only when nothing strong was seen.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from diagnostic.engines._lines import Line
from diagnostic.schema.logfacts import Evidence

__all__ = ["ANCHORS", "SIGNS", "PlatformReader", "Sign"]


@dataclass(frozen=True)
class Sign:
    """A kind of line that names (strong) or implies (weak) a platform."""

    platform: str
    regex: re.Pattern[str]
    strong: bool = True


def _sign(platform: str, pattern: str, *, strong: bool = True, flags: int = 0) -> Sign:
    return Sign(platform, re.compile(pattern, flags), strong)


SIGNS: tuple[Sign, ...] = (
    # ROCm: devices, platform detection, AMD parts and images; not "ROCm: Disabled" or
    # "ROCM used to build PyTorch: N/A" in a CUDA machine's environment dump.
    _sign(
        "rocm",
        r"detected platform rocm|found \d+ ROCm devices|\bROCm\d\b|ROCM_AITER|\[rocm\.py:"
        r"|backends\.[\w.]*\.rocm_|Platform:\s*ROCm\b|vllm-openai-rocm|HIP_VISIBLE_DEVICES"
        r"|rocm/vllm|(?<![/\w])rocm/[\w.-]+:|:\S*-rocm\d"  # AMD's images; a tag built for ROCm
        r"|hipGraph|HIP graphs?\b|\bHIP error\b|llama\.cpp:\w+-rocm|llama-b\d+-bin-\w+-hip"
        r"|\bAMD/HIP\b|ROCM Version\s*:\s*\d|ROCm System Management Interface"
        r"|hipError\w+|HIP out of memory|\d\+rocm\d|loaded ROCm backend"
        r"|attention[_-]backend[ =]['\"]?aiter\b"  # SGLang's AITER backend: AMD's library
        r"|\bHSA_OVERRIDE_GFX_VERSION\b|\bGGML_HIP\w*",  # ROCm's runtime; llama.cpp's HIP build
    ),
    # AMD parts name the GPU, not the backend: ROCm unless the text names Vulkan (llama.cpp
    # runs AMD GPUs through either).
    _sign(
        "amd",
        r"\bgfx(?:9\d\d|1[0-2]\d\d)\b|AMD Instinct|\bMI(?:2[05]0|3[0-5]\dX?)\b"
        r"|\bamd\.com/gpu\b",  # Kubernetes' AMD device plugin resource
    ),
    # Ascend NPU: the vllm-ascend plugin, ACL graphs, SGLang's device and backend.
    _sign(
        "npu",
        r"platform plugin ascend|\bon NPU\b|\bACL ?graphs?\b|\bnpu graph\b|device=['\"]?npu\b"
        r"|--device[ =]npu\b|\bascend\b|\bAscend\d|ASCEND_RT_VISIBLE_DEVICES|NPUGraph"
        r"|\bPYTORCH_NPU_\w+|\bHCCL_\w+=|\bVLLM_ASCEND_\w+|npu-smi \d"
        r"|\bnpu_graph_runner\b|\baclnn[A-Z]\w+",  # SGLang's NPU module, CANN's operators
        flags=re.IGNORECASE,
    ),
    # Intel GPUs: vLLM's platform and device, PyTorch's XPU build and dispatch key, Intel's
    # llm-scaler images; llama.cpp's SYCL backend and oneAPI's device selector; Arc parts.
    _sign(
        "xpu",
        r"detected platform xpu|device_config=xpu|--device[ =]xpu\b|dispatch key: XPU\b"
        r"|\d\+xpu\b|intel/llm-scaler-vllm|Is XPU available\s*:\s*True"
        r"|\bSYCL\d?\b(?! = 0)|\bGGML_SYCL\w*|ONEAPI_DEVICE_SELECTOR|\bintel\.Dockerfile\b"
        r"|oneAPI DPC\+\+"  # llama.cpp's SYCL build is compiled with it
        r"|\bIntel\(R\) Arc|\bArc(?:\(TM\))? [AB]\d{2,3}\b",
    ),
    _sign("tpu", r"detected platform tpu|device_config=tpu|--device[ =]tpu\b"),
    # Apple and Vulkan devices in llama.cpp.
    _sign(
        "metal",
        r"- MTL\d|ggml_metal_init|\bMTL : EMBED_LIBRARY|using device MTL\d|\bMTL\d \(Apple"
        r"|GGML_METAL=ON|using device Metal\b",
    ),
    _sign(
        "vulkan",
        r"ggml_vulkan: Found|- Vulkan\d|(?:--device|-dev)[ =](?:\S*,)?Vulkan\d"
        r"|\b(?:on|to) Vulkan\d\b|loaded Vulkan backend|using device Vulkan\d"
        r"|\bllama[.-]cpp-vulkan\b"
        r"|llama\.cpp:\w+-vulkan|llama-b\d+-bin-\w+-vulkan|GGML_VULKAN=ON|\bRADV\b",
    ),
    # CUDA named: platform detection, device config, devices, NVIDIA parts, the environment.
    _sign(
        "cuda",
        r"detected platform cuda|device_config=cuda|found \d+ CUDA devices|- CUDA\d"
        r"|CUDA_VISIBLE_DEVICES|CUDA out of memory|CUDA error:|CUDA available:\s*True"
        r"|\bNVIDIA (?:[A-Z]\d|GeForce|RTX|Tesla|GH|GB|DGX)|device=['\"]cuda"
        r"|CUDA Archs: \d[^;]*; ROCm: Disabled"  # vLLM built for CUDA (a CPU build: "Not Set")
        r"|llama\.cpp:\w+-cuda|llama-b\d+-bin-\w+-cuda|(?:--device|-dev)[ =](?:\S*,)?CUDA\d"
        r"|loaded CUDA backend|\bCUDA 1\d runtime\b"
        r"|(?:^|\s)--gpus[ =]",  # docker's --gpus: NVIDIA's container toolkit
    ),
    # CPU named: vLLM's CPU platform and worker, a CPU device option (not llama.cpp's vision
    # tower, `CLIP using CPU backend`, which says nothing of the text model).
    _sign(
        "cpu",
        r"detected platform cpu|device_config=cpu|device type=cpu|\[cpu_worker\.py:"
        r"|\[cpu_model_runner\.py:|VLLM_CPU_|(?<!CLIP using )CPU backend|\bOMP tid:"
        r"|device=['\"]cpu\b"
        r"|--device[ =]cpu\b",
    ),
    # Implied: graphs named CUDA, and CUDA-graph capture lines, are printed on NVIDIA GPUs
    # (and identically on ROCm, which a strong sign then names); a CUDA build of PyTorch.
    _sign(
        "cuda",
        r"Capturing CUDA graph|Capture (?:\w+ )*cuda graph|cuda graph: True|CUDA graphs?\b"
        r"|# cuda blocks|cudagraphs for decoding|the model for CUDA graphs"
        r"|\d\+cu1\d\d\b",  # PyTorch's CUDA build (torch 2.9.0+cu128), installed on CPU hosts too
        strong=False,
    ),
)
# The scan's prefilter for these signs: specific strings with rare bytes (not "cpu", "npu" or
# "tpu", which are in every "input" and "output" of a serving log).
ANCHORS: tuple[bytes, ...] = (
    b"platform",
    b"ROCm",
    b"rocm",
    b"ROCM",
    b"aiter",
    b"gfx",
    b"MI2",
    b"MI3",
    b"Instinct",
    b"HIP",
    b"hipError",
    b"hipGraph",
    b"Ascend",
    b"ascend",
    b"ASCEND",
    b"NPU",
    b"npu graph",
    b"npu-smi",
    b"npu'",
    b"=npu",
    b" npu",
    b"ACL",
    b"aclgraph",
    b"MTL",
    b"ggml_metal",
    b"device Metal",
    b"GGML_METAL",
    b"RADV",
    b"ulkan",
    b"device_config",
    b"device=",
    b"--device",
    b"device type",
    b"CUDA",
    b"cuda graph",
    b"# cuda",
    b"-cuda",
    b"NVIDIA",
    b"cpu_",
    b"CPU backend",
    b"VLLM_CPU",
    b"OMP tid",
    b"-bin-",
    b"HCCL_",
    b"XPU",
    b"SYCL",
    b"ONEAPI",
    b"intel.Dockerfile",
    b"Arc",
    b"aclnn",
    b"npu_graph",
    b"+xpu",
    b"+cu1",
    b"llm-scaler",
    b"--gpus",
    b"HSA_",
    b"amd.com",
    b"oneAPI",
)
# A placeholder naming alternatives (`--device <ROCm0|Vulkan0>`) names no platform.
_ALTERNATIVES = re.compile(r"<[^<>\s]*\|[^<>\s]*>")
_KEYS = tuple(a.decode() for a in ANCHORS)
# Most specific first: ROCm and NPU logs mention CUDA, and llama.cpp lists a CPU beside GPUs;
# an AMD part is ROCm unless a Vulkan device runs it.
_RANK = ("rocm", "npu", "xpu", "tpu", "metal", "vulkan", "amd", "cuda", "cpu")
_NAMED = {"amd": "rocm"}


@dataclass
class PlatformReader:
    """Collects platform signs from lines; `decide` names the platform and its line."""

    strong: dict[str, Evidence] = field(default_factory=dict)
    weak: dict[str, Evidence] = field(default_factory=dict)

    def feed(self, line: Line) -> None:
        """Record the signs one line shows (the first line of each platform is kept)."""
        text = line.text
        if not any(key in text for key in _KEYS):
            return  # most candidate lines are another kind: no regex for them
        if "|" in text:
            text = _ALTERNATIVES.sub("", text)
        for sign in SIGNS:
            found = self.strong if sign.strong else self.weak
            if sign.platform not in found and sign.regex.search(text):
                found[sign.platform] = Evidence(line=line.number, text=text.strip()[:320])

    def see(self, platform: str, evidence: Evidence, *, strong: bool = True) -> None:
        """A parser's own reading (a llama.cpp device list, a TensorRT-LLM log)."""
        (self.strong if strong else self.weak).setdefault(platform, evidence)

    def decide(self) -> tuple[str, Evidence | None]:
        """The most specific strong platform, else the most specific weak one, else unknown."""
        for found in (self.strong, self.weak):
            for platform in _RANK:
                if platform in found:
                    return _NAMED.get(platform, platform), found[platform]
        return "unknown", None
