#!/usr/bin/env bash
# sglang-dry-start.sh: the first run of the carried SGLang kit on the H200, started detached by
# sglang-h200-device.sh receive as soon as the kit is unpacked (the GGUF may still be on its
# way). Runs sglang-kit-check.py (versions, imports, one FA3 call), then starts SGLang once on
# Gemma 3 270M's config alone (.gpukit/sgl/aux/cfg/config.json, carried when the kit was made
# with DRY_CFG) with --load-format dummy --skip-tokenizer-init, asks it for 16 greedy tokens
# and stops it. That start goes through everything a real one does (FA3, CUDA-graph capture,
# JIT kernels) and fills the JIT caches (~/.cache/tvm-ffi, Triton's), so the recorded starts
# that follow do not pay for them. Without the config, only the check runs.
# Log: ~/sgl/dry/server.log (SGL_HOME overrides ~/sgl).
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../../.." && pwd)
S=${SGL_HOME:-$HOME/sgl}
python3 "$HERE/sglang-kit-check.py"
cfg=$REPO/.gpukit/sgl/aux/cfg
[[ -f $cfg/config.json ]] || { echo "no $cfg/config.json: no dry start"; exit 0; }
mkdir -p "$S/dry/model" && cp "$cfg"/*.json "$S/dry/model/"
t0=$SECONDS
setsid python3 -m sglang.launch_server --model-path "$S/dry/model" --load-format dummy \
  --skip-tokenizer-init --host 127.0.0.1 --port 30001 --log-level info --mem-fraction-static 0.5 \
  </dev/null >"$S/dry/server.log" 2>&1 &
pid=$!
ok=0
for _ in $(seq 600); do
  grep -q "ready to roll" "$S/dry/server.log" && { ok=1; break; }
  kill -0 $pid 2>/dev/null || break
  sleep 0.5
done
echo "dry start: ready=$ok after $((SECONDS - t0)) s"
if ((ok)); then
  curl -s -m 60 http://127.0.0.1:30001/generate -H 'Content-Type: application/json' \
    -d '{"input_ids": [2, 818, 3446, 2519, 699], "sampling_params": {"temperature": 0, "max_new_tokens": 16}}'
  echo
fi
kill -TERM -- -$pid 2>/dev/null
for _ in $(seq 40); do kill -0 $pid 2>/dev/null || break; sleep 0.5; done
kill -KILL -- -$pid 2>/dev/null
grep -v '^\s*$' "$S/dry/server.log" | tail -n 12
echo "dry done"
