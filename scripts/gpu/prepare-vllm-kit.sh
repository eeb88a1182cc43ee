#!/usr/bin/env bash
# prepare-vllm-kit.sh OUT_DIR: vLLM 0.26.0 packed for the H200 machine, which has no network.
# vLLM 0.26.0 is the release built against the machine's torch 2.11.0+cu130, so only the
# packages its image lacks travel (vllm-0.26-wheels.txt, beside this script). On this CPU
# machine: download those wheels for CPython 3.12 on x86-64, install them with pip --target into
# one folder, remove what an H200 never loads (FlashAttention 2 and FlashMLA kernels, the Rust
# front end, kernels for other GPUs and Python versions, JIT headers), tar | gzip the folder and
# split it into OUT_DIR/part-00, part-01, ... of 62 MB each (one device call carries 64 MiB).
# scripts/gpu-vllm-sweep prepare runs it when .gpukit/parts is missing and cuts the parts again
# into chunks that fit beside the working tree; docs/gpu.md says how they are carried and
# unpacked. OUT_DIR belongs inside the checkout, ignored by git (.gpukit/ is).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:?usage: prepare-vllm-kit.sh OUT_DIR}
work=$(mktemp -d)
plat=(--platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64
      --platform manylinux_2_24_x86_64 --platform manylinux_2_26_x86_64 --platform manylinux_2_27_x86_64
      --platform manylinux_2_31_x86_64 --platform manylinux_2_34_x86_64 --platform manylinux_2_35_x86_64
      --platform manylinux1_x86_64)
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp "${plat[@]}" \
  -d "$work/whl" -r "$here/vllm-0.26-wheels.txt"
python3 -m pip install -q --no-deps --no-compile --target "$work/site" --python-version 3.12 --implementation cp \
  --only-binary=:all: "${plat[@]}" "$work"/whl/*.whl
v="$work/site/vllm"
# FA2 kernels (FA3 serves Hopper), the Rust frontend, kernels for other GPUs, headers for JIT.
rm -f "$v/vllm_flash_attn/_vllm_fa2_C.abi3.so" "$v/vllm-rs" "$v/_flashmla_C.abi3.so" "$v/_qutlass_C.abi3.so"
rm -rf "$v/third_party/fmha_sm100" "$v/third_party/deep_gemm/include" "$v/entrypoints/serve/instrumentator/static"
find "$v/third_party" -name "_C.cpython-31[01345]*" -delete
mkdir -p "$out"
tar -C "$work/site" -czf - . | split -b 62000000 -d - "$out/part-"
rm -rf "$work"
ls -la "$out"
