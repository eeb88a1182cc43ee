"""The EAGLE3 head format SGLang 0.5.17 loads as LlamaForCausalLMEagle3, for a target folder.

One decoder layer over fc(three captured layers' features), a final norm, and no lm_head, d2t
or t2d: with draft_vocab_size null SGLang lends the head the target's embedding and lm_head.
Used by train-eagle3-head.py (a trained head) and ../sglang/make-eagle3-head.py (a random one).
"""

import json
import shutil
from pathlib import Path

from safetensors.torch import save_file

TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "generation_config.json",
)
RMS_EPS = 1e-6
ROPE_THETA = 10000.0


def target_shape(src: Path) -> dict:
    """The target's text-model sizes the head takes: hidden, heads, kv, head_dim, ...."""
    t = json.loads((src / "config.json").read_text())
    t = t.get("text_config", t)
    hidden, heads = t["hidden_size"], t["num_attention_heads"]
    return {
        "hidden_size": hidden,
        "intermediate_size": t["intermediate_size"],
        "num_attention_heads": heads,
        "num_key_value_heads": t["num_key_value_heads"],
        "head_dim": t.get("head_dim") or hidden // heads,
        "vocab_size": t["vocab_size"],
        "max_position_embeddings": t.get("max_position_embeddings", 32768),
        "bos_token_id": t.get("bos_token_id", 2),
        "eos_token_id": t.get("eos_token_id", 1),
        "pad_token_id": t.get("pad_token_id", 0),
    }


def write_head(src: Path, dst: Path, tensors: dict, note: str) -> dict:
    """config.json, model.safetensors (`tensors`, bf16) and the target's tokenizer files into
    `dst`; returns the config written."""
    dst.mkdir(parents=True, exist_ok=True)
    cfg = {
        "architectures": ["LlamaForCausalLMEagle3"],
        "model_type": "llama",
        **target_shape(src),
        "num_hidden_layers": 1,
        "hidden_act": "silu",
        "rms_norm_eps": RMS_EPS,
        "rope_theta": ROPE_THETA,
        "draft_vocab_size": None,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
        "_note": note,
    }
    (dst / "config.json").write_text(json.dumps(cfg, indent=1))
    save_file(tensors, str(dst / "model.safetensors"), metadata={"format": "pt"})
    for name in TOKENIZER_FILES:
        if (src / name).exists():
            shutil.copy(src / name, dst / name)
    return cfg
