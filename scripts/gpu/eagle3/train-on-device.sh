#!/usr/bin/env bash
# train-on-device.sh: the EAGLE3 head trained on the H200 (issue 50), run from the checkout once
# scripts/gguf-to-hf has written ~/sgl/hf (sglang-h200-device.sh receive starts it with
# AFTER_CONVERT). The image's torch and transformers, not the SGLang kit's; the head goes to
# ~/sgl/draft-head (a path that does not say EAGLE3), train-record.json last. Settings:
# train-eagle3-head.py's environment variables.
set -euo pipefail
S=${SGL_HOME:-$HOME/sgl}
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
unset PYTHONPATH
exec python3 scripts/gpu/eagle3/train-eagle3-head.py "$S/hf" "$S/draft-head"
