#!/usr/bin/env python3
"""make-eagle3-head.py TARGET_DIR OUT_DIR: a randomly initialised EAGLE3 draft head for TARGET_DIR.

No registry ships an EAGLE3 head for Gemma 3 270M, and nothing can be downloaded on the GPU
machine: this writes one with the shapes SGLang expects, so that the EAGLE3 code path (and the
wrong-flag case, the same head launched with --speculative-algorithm EAGLE) can be recorded.
OUT_DIR gets config.json (architectures ["LlamaForCausalLMEagle3"], the target's hidden size,
vocabulary, attention shape and context length, one decoder layer) and model.safetensors with
the tensor names of published EAGLE3 heads (fc, midlayer.*, norm): bf16 matrices drawn from
normal(0, 0.02) with seed 0, norms of ones. There is no lm_head, d2t or t2d: with
draft_vocab_size null, SGLang's LlamaForCausalLMEagle3 loads the head from the target and the
EAGLE worker shares the target's embedding and head. The tokenizer files are copied from the
target. The head is untrained: expect an accept length near 1.0 whichever flag launches it.
scripts/gpu-sglang-sweep runs it on the GPU machine (needs torch and safetensors).
"""

import json
import shutil
import sys
from pathlib import Path

import torch
from safetensors.torch import save_file

src, dst = Path(sys.argv[1]), Path(sys.argv[2])
dst.mkdir(parents=True, exist_ok=True)
t = json.loads((src / "config.json").read_text())
t = t.get("text_config", t)
H = t["hidden_size"]
heads, kv = t["num_attention_heads"], t["num_key_value_heads"]
hd = t.get("head_dim") or H // heads
inter = t["intermediate_size"]
V = t["vocab_size"]
cfg = {
    "architectures": ["LlamaForCausalLMEagle3"],
    "model_type": "llama",
    "hidden_size": H,
    "intermediate_size": inter,
    "num_hidden_layers": 1,
    "num_attention_heads": heads,
    "num_key_value_heads": kv,
    "head_dim": hd,
    "hidden_act": "silu",
    "rms_norm_eps": 1e-6,
    "max_position_embeddings": t.get("max_position_embeddings", 32768),
    "rope_theta": 10000.0,
    "vocab_size": V,
    "draft_vocab_size": None,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "bos_token_id": t.get("bos_token_id", 2),
    "eos_token_id": t.get("eos_token_id", 1),
    "pad_token_id": t.get("pad_token_id", 0),
    "_note": "random EAGLE3 head for tests (scripts/gpu/sglang/make-eagle3-head.py); not trained",
}
(dst / "config.json").write_text(json.dumps(cfg, indent=1))
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
save_file(w, str(dst / "model.safetensors"), metadata={"format": "pt"})
for f in (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "generation_config.json",
):
    if (src / f).exists():
        shutil.copy(src / f, dst / f)
print(
    json.dumps(
        {
            k: cfg[k]
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
