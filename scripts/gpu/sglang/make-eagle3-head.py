#!/usr/bin/env python3
"""make-eagle3-head.py TARGET_DIR OUT_DIR: a randomly initialised EAGLE3 draft head for TARGET_DIR.

No registry ships an EAGLE3 head for Gemma 3 270M, and nothing can be downloaded on the GPU
machine: this writes one with the shapes SGLang expects, so that the EAGLE3 code path (and the
wrong-flag case, the same head launched with --speculative-algorithm EAGLE) can be recorded.
OUT_DIR gets the format of ../eagle3/head_format.py: config.json (the target's sizes, one
decoder layer) and model.safetensors with
the tensor names of published EAGLE3 heads (fc, midlayer.*, norm): bf16 matrices drawn from
normal(0, 0.02) with seed 0, norms of ones. There is no lm_head, d2t or t2d: with
draft_vocab_size null, SGLang's LlamaForCausalLMEagle3 loads the head from the target and the
EAGLE worker shares the target's embedding and head. The tokenizer files are copied from the
target. The head is untrained: expect an accept length near 1.0 whichever flag launches it.
scripts/gpu-sglang-sweep runs it on the GPU machine (needs torch and safetensors).
"""

import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "eagle3"))
from head_format import target_shape, write_head

src, dst = Path(sys.argv[1]), Path(sys.argv[2])
t = target_shape(src)
H, inter = t["hidden_size"], t["intermediate_size"]
heads, kv, hd = t["num_attention_heads"], t["num_key_value_heads"], t["head_dim"]
g = torch.Generator().manual_seed(0)


def rnd(*shape):
    return (torch.randn(*shape, generator=g) * 0.02).to(torch.bfloat16)


w = {
    "fc.weight": rnd(H, 3 * H),
    "midlayer.hidden_norm.weight": torch.ones(H, dtype=torch.bfloat16),
    "midlayer.input_layernorm.weight": torch.ones(H, dtype=torch.bfloat16),
    "midlayer.post_attention_layernorm.weight": torch.ones(H, dtype=torch.bfloat16),
    "midlayer.self_attn.q_proj.weight": rnd(heads * hd, 2 * H),
    "midlayer.self_attn.k_proj.weight": rnd(kv * hd, 2 * H),
    "midlayer.self_attn.v_proj.weight": rnd(kv * hd, 2 * H),
    "midlayer.self_attn.o_proj.weight": rnd(H, heads * hd),
    "midlayer.mlp.gate_proj.weight": rnd(inter, H),
    "midlayer.mlp.up_proj.weight": rnd(inter, H),
    "midlayer.mlp.down_proj.weight": rnd(H, inter),
    "norm.weight": torch.ones(H, dtype=torch.bfloat16),
}
note = "random EAGLE3 head for tests (scripts/gpu/sglang/make-eagle3-head.py); not trained"
write_head(src, dst, w, note)
print(
    json.dumps(
        {
            k: t[k]
            for k in (
                "hidden_size",
                "num_attention_heads",
                "num_key_value_heads",
                "head_dim",
                "vocab_size",
            )
        }
    )
)
