#!/usr/bin/env bash
# sglang-h200-device.sh: the GPU-machine half of carrying SGLang 0.5.17 to an H200 without
# network (the CPU half is prepare-sglang-kit.sh; the whole recipe is docs/gpu.md). Runs from
# the checkout on the H200 machine; each call carries one chunk of .gpukit/sgl/send/ and
# .gpukit/sgl/aux. Commands:
#   receive      keep the chunks that came (checked against .gpukit/sgl/aux/MANIFEST) in
#                ~/sgl/in; once the kit (k-*) is whole, unpack it into ~/sgl/site and start the
#                import + FA3 check and dry start (sglang-dry-start.sh) detached; once the GGUF
#                (g-*) is whole, check its sha256 and start scripts/gguf-to-hf detached (with the
#                image's transformers 5.17, not the kit's 5.12.1), writing ~/sgl/hf
#   sweep [S]    start the recorder RECORDER names (scripts/gpu-sglang-sweep) detached, follow
#                it S seconds (default 420), then pack
#   wait S       follow the recorder S seconds, then pack
#   pack         $OUT/sglang-runs.tgz: the recorder's runs so far and the logs
#   status       chunks here, kit, GGUF, conversion, the check's and the recorder's progress
# Environment: SGL_HOME (default ~/sgl), NO_CHECK=1 (receive: no check, no dry start),
# AFTER_CONVERT=CMD (receive: run CMD detached once the conversion has written ~/sgl/hf, e.g.
# the EAGLE3 trainer, scripts/gpu/eagle3/train-on-device.sh; its log is ~/sgl/after.log).
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../../.." && pwd)
S=${SGL_HOME:-$HOME/sgl}
KIT=$REPO/.gpukit/sgl
GGUF_SHA=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818
log() { printf '%s sglang-h200: %s\n' "$(date -u +%T)" "$*" >&2; }
mkdir -p "$S/in" "$S/runs"

kit_env() {
  export PYTHONPATH=$S/site PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
  export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
}

complete() {  # complete k|g
  local n have=0 want=0
  while read -r _ n; do
    [[ $n == "$1"-* ]] || continue
    want=$((want + 1)); [[ -f $S/in/$n ]] && have=$((have + 1))
  done <"$S/MANIFEST"
  ((want > 0 && have == want))
}

detach() {  # detach PIDFILE LOG CMD...: run CMD in a new session; the process writes its own pid
  local pidf=$1 logf=$2; shift 2
  setsid nohup bash -c 'echo $$ >"$0"; exec "$@"' "$pidf" "$@" </dev/null >"$logf" 2>&1 &
}

alive() { local p; p=$(cat "$1" 2>/dev/null) && [[ -n $p ]] && kill -0 "$p" 2>/dev/null; }

cmd_receive() {
  # aux may travel with the first call only (a chunk then has more room beside a large working
  # tree): keep a copy in ~/sgl/aux and point .gpukit/sgl/aux at it when a call comes without
  if [[ -f $KIT/aux/MANIFEST && ! -L $KIT/aux ]]; then mkdir -p "$S/aux" && cp -r "$KIT"/aux/. "$S/aux/"; fi
  [[ -e $KIT/aux ]] || { mkdir -p "$KIT" && ln -s "$S/aux" "$KIT/aux"; }
  [[ -f $KIT/aux/MANIFEST ]] && cp "$KIT/aux/MANIFEST" "$S/MANIFEST"
  [[ -f $KIT/aux/gguf-to-hf ]] && cp "$KIT"/aux/gguf-to-hf "$KIT"/aux/gguf-*.whl "$S/" 2>/dev/null
  local f n sum
  for f in "$KIT"/send/*; do
    [[ -f $f ]] || continue
    n=${f##*/}; [[ -f $S/in/$n ]] && continue
    sum=$(awk -v n="$n" '$2 == n {print $1}' "$S/MANIFEST")
    if [[ -n $sum && $(sha256sum "$f" | cut -d' ' -f1) == "$sum" ]]; then
      cp "$f" "$S/in/$n.tmp" && mv "$S/in/$n.tmp" "$S/in/$n" && log "received $n"
    else
      log "WARNING: $n does not match MANIFEST, ignored"
    fi
  done
  if complete k && [[ ! -f $S/kit.done ]]; then
    log "kit whole: unpacking into $S/site"
    rm -rf "$S/site" && mkdir -p "$S/site"
    if command -v zstd >/dev/null; then cat "$S"/in/k-* | zstd -d -q | tar -x -C "$S/site"
    else
      python3 -m pip install -q --no-index --no-deps --no-cache-dir --target "$S/zst" "$KIT"/aux/zstandard-*.whl
      cat "$S"/in/k-* | PYTHONPATH=$S/zst python3 -c 'import sys, zstandard; zstandard.ZstdDecompressor().copy_stream(sys.stdin.buffer, sys.stdout.buffer)' | tar -x -C "$S/site"
    fi
    du -sh "$S/site" >&2
    touch "$S/kit.done"
    if [[ -z ${NO_CHECK:-} ]]; then
      (kit_env; detach "$S/check.pid" "$S/check.log" bash "$HERE/sglang-dry-start.sh")
      log "import + FA3 check + dummy-weight dry start started (log $S/check.log)"
    fi
  fi
  if complete g && [[ ! -f $S/gguf.done ]]; then
    log "GGUF whole: assembling, checking sha256"
    cat "$S"/in/g-* >"$S/model.gguf"
    if [[ $(sha256sum "$S/model.gguf" | cut -d' ' -f1) == "$GGUF_SHA" ]]; then
      python3 -m pip install -q --no-index --no-deps --no-cache-dir --target "$S/extra" "$S"/gguf-*.whl
      touch "$S/gguf.done"
      (export PYTHONPATH=$S/extra PYTHONUNBUFFERED=1; detach "$S/convert.pid" "$S/convert.log" \
        python3 "$S/gguf-to-hf" "$S/model.gguf" "$S/hf" --force)
      if [[ -n ${AFTER_CONVERT:-} ]]; then
        (cd "$REPO" && detach "$S/after.pid" "$S/after.log" bash -c \
          'while [[ ! -f $0/hf/CONVERTED.json ]]; do sleep 1; done; eval "$1"' "$S" "$AFTER_CONVERT")
        log "after the conversion: $AFTER_CONVERT (log $S/after.log)"
      fi
      log "conversion started (log $S/convert.log)"
    else
      log "ERROR: GGUF sha256 differs"
    fi
  fi
  cmd_status
}

cmd_status() {
  local have; have=$(ls "$S/in" 2>/dev/null | tr '\n' ' ')
  echo "chunks here: ${have:-none}"
  echo "kit: $([[ -f $S/kit.done ]] && echo unpacked || echo incomplete);" \
       "gguf: $([[ -f $S/gguf.done ]] && echo ok || echo incomplete);" \
       "conversion: $([[ -f $S/hf/CONVERTED.json ]] && echo 'done' || { alive "$S/convert.pid" && echo running || echo 'not running'; })"
  if [[ -f $S/check.log ]]; then echo "--- check.log (tail)"; tail -n 25 "$S/check.log"; fi
  if [[ -f $S/convert.log ]]; then echo "--- convert.log (tail)"; tail -n 4 "$S/convert.log"; fi
  if [[ -f $S/after.log ]]; then echo "--- after.log (tail)"; tail -n 6 "$S/after.log"; fi
  if [[ -f $S/runs/progress.txt ]]; then echo "--- progress"; cat "$S/runs/progress.txt"; fi
  return 0
}

cmd_sweep() {
  [[ -f $S/kit.done ]] || { log "kit not unpacked"; cmd_status; return 1; }
  local _; for _ in $(seq 300); do alive "$S/check.pid" || break; sleep 1; done  # dry start uses the GPU
  if alive "$S/sweep.pid"; then log "recorder already running"; else
    (kit_env; cd "$REPO" && detach "$S/sweep.pid" "$S/sweep.log" bash "${RECORDER:?set RECORDER to your recording script (e.g. one that runs diagnose sweep)}")
    log "recorder started (log $S/sweep.log)"
  fi
  cmd_wait "${1:-420}"
}

cmd_wait() {
  local end=$((SECONDS + ${1:?seconds})) last=-60
  while alive "$S/sweep.pid" && ((SECONDS < end)); do
    if ((SECONDS - last >= 60)); then log "$(tail -n 1 "$S/runs/progress.txt" 2>/dev/null)"; last=$SECONDS; fi
    sleep 3
  done
  alive "$S/sweep.pid" && log "recorder still running" || log "recorder not running"
  cmd_status
  cmd_pack
}

cmd_pack() {
  [[ -n ${OUT:-} ]] || { log "OUT not set"; return 1; }
  local extra=()
  for f in check.log dry/server.log convert.log after.log sweep.log hf/CONVERTED.json hf/config.json hf/tokenizer_config.json eagle3/config.json draft-head/config.json draft-head/train-record.json; do
    [[ -e $S/$f ]] && extra+=("$f")
  done
  tar -C "$S" -czf "$OUT/sglang-runs.tgz" runs "${extra[@]}"
  # a trained head (issue 50) comes back beside the runs (about 16 MB: one file of $OUT)
  [[ -f $S/draft-head/train-record.json ]] && cp "$S/draft-head/model.safetensors" "$OUT/draft-head.safetensors"
  ls -l "$OUT" >&2
}

case ${1:-} in
  receive) cmd_receive ;;
  sweep) shift; cmd_sweep "$@" ;;
  wait) shift; cmd_wait "$@" ;;
  pack) cmd_pack ;;
  status) cmd_status ;;
  *) sed -n 2,16p "$0"; exit 2 ;;
esac
