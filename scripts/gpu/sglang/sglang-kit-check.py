#!/usr/bin/env python3
"""sglang-kit-check.py: does the carried SGLang kit work on this GPU machine?

Run on the H200 with PYTHONPATH=~/sgl/site (sglang-dry-start.sh runs it right after the kit is
unpacked). Prints torch's version and the GPU, then imports, one by one, the packages and the
SGLang modules a server start needs (server, scheduler, model runner, Gemma 3 and EAGLE3
models, the speculative workers, the attention backends): a failure is printed and the check
goes on, so that one run names every missing piece. Last, one FlashAttention-3 call from the
pruned sgl_kernel flash_ops (head_dim 256, GQA 4:1, causal, varlen) is compared with torch's
SDPA: a kit whose sm_90 kernels were damaged by fatbin-prune.py fails here, not in a server.
"""

import importlib
import time
import traceback

PACKAGES = [
    "sglang",
    "sgl_kernel",
    "flashinfer",
    "transformers",
    "tokenizers",
    "xgrammar",
    "tvm_ffi",
    "deep_gemm",
    "torchao",
    "triton",
    "fastapi",
    "uvicorn",
    "pydantic",
    "zmq",
    "openai",
]
MODULES = [
    "sglang.srt.entrypoints.http_server",
    "sglang.srt.managers.scheduler",
    "sglang.srt.model_executor.model_runner",
    "sglang.srt.models.gemma3_causal",
    "sglang.srt.models.llama_eagle3",
    "sglang.srt.speculative.eagle_worker_v2",
    "sglang.srt.speculative.standalone_worker_v2",
    "sglang.srt.speculative.ngram_worker",
    "sglang.srt.layers.attention.flashattention_backend",
    "sglang.srt.layers.attention.triton_backend",
    "sglang.srt.layers.attention.flashinfer_backend",
    "sgl_kernel.flash_attn",
]


def imports() -> None:
    for m in PACKAGES:
        try:
            mod = importlib.import_module(m)
            version = getattr(mod, "__version__", "?")
            print(f"ok   {m} {version} {getattr(mod, '__file__', '')}", flush=True)
        except Exception as e:
            print(f"FAIL {m}: {e!r}"[:400], flush=True)
    for m in MODULES:
        try:
            importlib.import_module(m)
            print(f"ok   {m}", flush=True)
        except Exception as e:
            print(f"FAIL {m}: {e!r}"[:600], flush=True)
            traceback.print_exc(limit=3)


def fa3() -> None:
    import torch
    from sgl_kernel.flash_attn import flash_attn_varlen_func

    torch.manual_seed(0)
    L, H, KV, D = 300, 4, 1, 256
    q = torch.randn(L, H, D, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(L, KV, D, device="cuda", dtype=torch.bfloat16)
    v = torch.randn(L, KV, D, device="cuda", dtype=torch.bfloat16)
    cu = torch.tensor([0, L], device="cuda", dtype=torch.int32)
    o = flash_attn_varlen_func(q, k, v, cu, cu, L, L, causal=True)
    o = o[0] if isinstance(o, tuple) else o
    ref = torch.nn.functional.scaled_dot_product_attention(
        q.transpose(0, 1).float(),
        k.repeat_interleave(H // KV, 1).transpose(0, 1).float(),
        v.repeat_interleave(H // KV, 1).transpose(0, 1).float(),
        is_causal=True,
    ).transpose(0, 1)
    diff = (o.float() - ref).abs().max().item()
    print("FA3 (pruned flash_ops) vs SDPA: max abs diff", diff, flush=True)


def main() -> None:
    t0 = time.time()
    import torch

    gpu = torch.cuda.get_device_name(0), torch.cuda.get_device_capability(0)
    print("torch", torch.__version__, "cuda", torch.version.cuda, *gpu, flush=True)
    imports()
    try:
        fa3()
    except Exception as e:
        print("FAIL FA3 call:", repr(e)[:600], flush=True)
        traceback.print_exc(limit=5)
    print(f"check done in {time.time() - t0:.1f} s", flush=True)


if __name__ == "__main__":
    main()
