"""diagnostic.engines._platform: which platform a log ran on, from what its lines name."""

from __future__ import annotations

import pytest

from diagnostic.engines import parse_log
from diagnostic.engines._lines import Line
from diagnostic.engines._platform import PlatformReader


def decide(*texts: str) -> str:
    reader = PlatformReader()
    for n, text in enumerate(texts, 1):
        reader.feed(Line(n, text, text))
    return reader.decide()[0]


@pytest.mark.parametrize(
    ("lines", "platform"),
    [
        (["INFO 06-25 17:38:01 [__init__.py:239] Automatically detected platform cpu."], "cpu"),
        (["(EngineCore pid=1) INFO … with config: model='m', device_config=cpu, seed=0"], "cpu"),
        (["(EngineCore_DP0 pid=41) INFO 01-08 12:18:24 [cpu_worker.py:86] \tOMP tid: 54"], "cpu"),
        (
            ["ggml_cuda_init: found 2 ROCm devices:", "  Device 0: Radeon RX 7900 XTX, gfx1100"],
            "rocm",
        ),
        (["Platform plugin ascend is activated"], "npu"),
        (["[2026-03-11 13:53:32 TP0] Capture npu graph end. Time elapsed: 8.04 s."], "npu"),
        (["  - MTL0    : Apple M4 Pro (18186 MiB, 18185 MiB free)"], "metal"),
        (["llama-server -m x.gguf --device Vulkan0 -ngl 99"], "vulkan"),
        (["Automatically detected platform tpu."], "tpu"),
        (["CUDA Archs: 8.0 9.0; ROCm: Disabled; XPU: Disabled"], "cuda"),
        (["Capturing CUDA graphs (decode, FULL): 100%"], "cuda"),  # implied, nothing named
        (["INFO 01-01 [core.py:1] Initializing a V1 LLM engine (v0.9.2)"], "unknown"),
    ],
)
def test_the_platform_a_line_names(lines: list[str], platform: str) -> None:
    assert decide(*lines) == platform


def test_a_named_platform_beats_one_implied_and_rocm_beats_cuda() -> None:
    # vLLM on ROCm prints CUDA-graph bars and device_config=cuda; on a CPU, CUDAGraphMode.NONE.
    assert decide("Automatically detected platform rocm.", "device_config=cuda") == "rocm"
    assert decide("Capturing CUDA graphs (PIECEWISE): 100%", "device_config=cpu") == "cpu"
    assert decide("ROCM used to build PyTorch: N/A", "CUDA available: True") == "cuda"


def test_llamacpp_device_lists_and_builds() -> None:
    """llama.cpp lists a CPU beside every GPU; a GPU device (or layers offloaded) wins, and a
    build whose system_info names no GPU backend is a CPU build."""
    gpu = parse_log(
        [
            "ggml_cuda_init: found 1 CUDA devices:",
            "  - CPU : AMD EPYC (64000 MiB, 60000 MiB free)",
            "load_tensors: offloaded 29/29 layers to GPU",
        ],
        engine="llamacpp",
    )
    assert gpu.platform == "cuda"
    cpu = parse_log(
        ["system_info: n_threads = 8 / 16 | CPU : SSE3 = 1 | AVX2 = 1 | OPENMP = 1 |"],
        engine="llamacpp",
    )
    assert (cpu.platform, cpu.capture.resolved) == ("cpu", "NONE")
    offloaded = parse_log(["llm_load_tensors: offloaded 33/33 layers to GPU"], engine="llamacpp")
    assert offloaded.platform == "unknown"  # a GPU, but which kind the text does not say
    assert offloaded.capture.resolved == "UNKNOWN"


def test_the_platform_names_its_line() -> None:
    facts = parse_log(
        [
            "INFO 02-20 18:35:41 api_server.py:840] vLLM API server version 0.7.2",
            "INFO 02-20 18:35:40 __init__.py:190] Automatically detected platform cpu.",
        ]
    )
    assert (facts.platform, facts.sources["platform"].line) == ("cpu", 2)


def test_sixth_round_signs() -> None:
    """Issue 47, sixth round: signs as pasted in issue threads (each case is in the wild corpus)."""
    # collect_env on ROCm: a ROCm version and the ROCm SMI beat the build flags' "ROCm: Disabled"
    assert decide("ROCM Version : 7.13.99004-3309c6114a", "ROCm: Disabled; XPU: Disabled") == "rocm"
    assert decide("ROCM Version : Could not collect", "CUDA Archs: 9.0; ROCm: Disabled") == "cuda"
    # an AMD error or library beats SGLang's device='cuda' (ROCm's torch device is cuda)
    assert decide("server_args=ServerArgs(device='cuda', attention_backend='aiter')") == "rocm"
    assert decide("device='cuda'", "RuntimeError: HIP error: invalid device function") == "rocm"
    assert decide("export VLLM_ATTENTION_BACKEND=ROCM_AITER") == "rocm"
    # every CUDA config line of vLLM 0.26 lists a ROCm op among its splitting ops: no sign
    assert decide("device_config=cuda, 'vllm::rocm_aiter_sparse_attn_indexer'") == "cuda"
    assert decide("Unknown vLLM environment variable detected: VLLM_ASCEND_X") == "npu"
    assert decide("Built `cmake -DGGML_METAL=ON`.", "MTL0 (Apple M4 Pro) | 38338 = ...") == "metal"
    assert decide("llama-server ... --device CUDA0,CUDA1 -fa on") == "cuda"
    assert decide("--gpus all --network host --ipc host") == "cuda"  # a joined docker line


def test_an_amd_part_is_rocm_unless_vulkan_runs_it() -> None:
    assert decide("8x MI300X (gfx942), ROCm+AITER") == "rocm"
    assert decide("gfx1150 (Radeon 890M)", "all 42 layers on Vulkan0, RADV STRIX1") == "vulkan"
    assert decide("gfx1150", "device_config=cuda") == "rocm"  # vLLM on ROCm says cuda


def test_builds_and_backends_as_environments_print_them() -> None:
    assert decide("load_backend: loaded Vulkan backend from ./libggml-vulkan.so") == "vulkan"
    assert decide("load_backend: loaded CUDA backend from ./libggml-cuda.so") == "cuda"
    assert decide("llama-server -m m.gguf -dev Vulkan1 -ngl 99") == "vulkan"
    assert decide("torch.OutOfMemoryError: HIP out of memory. Tried to allocate 2 GiB") == "rocm"
    assert decide("[pip3] torch==2.9.0+rocm6.4", "device_config=cuda") == "rocm"
    assert decide("[pip3] torch==2.9.0+cu128") == "cuda"
    assert decide("[pip3] torch==2.9.0+cu128", "Automatically detected platform cpu.") == "cpu"
    assert decide("Is XPU available             : True") == "xpu"
    cpu_build = "CUDA Archs: Not Set; ROCm: Disabled; XPU: Disabled"
    assert decide(cpu_build, "Automatically detected platform cpu.") == "cpu"
    assert decide("| npu-smi 25.2.3                   Version: 25.2.3 |") == "npu"


def test_seventh_round_signs() -> None:
    """Issue 47, seventh round: Intel GPUs through SYCL/oneAPI, CANN's operators and SGLang's
    NPU module, a CUDA error line, AMD's image org and a tag built for a ROCm release."""
    assert decide("ONEAPI_DEVICE_SELECTOR=level_zero:0 llama-server -m m.gguf") == "xpu"
    assert decide('      GGML_SYCL_F16: "ON"') == "xpu"
    assert decide("found 1 SYCL devices:") == "xpu"
    assert decide("Running the SYCL build on an Arc B580") == "xpu"
    assert decide('File ".../sglang/srt/model_executor/npu_graph_runner.py", line 39') == "npu"
    assert decide("aclnnLightningIndexer not in libopapi.so", "Capture cuda graph failed") == "npu"
    assert decide("torch.AcceleratorError: CUDA error: an illegal memory access") == "cuda"
    assert decide("docker run rocm/sgl-dev:sglang-0.5.14-rocm720-mi35x-20260701 python3") == "rocm"
    assert decide("lmsysorg/sglang:v0.5.6-rocm700-mi30x") == "rocm"
    assert decide("the Arcade build") == "unknown"  # no Arc part
    assert decide("LD_LIBRARY_PATH=/opt/rocm/lib:/usr/lib") == "unknown"  # a path, no image
    assert decide("system_info: CPU : SSE3 = 1 | SYCL = 0 |") == "unknown"  # built without it
