#!/usr/bin/env python3
"""make-dummy-llama.py [OUT_DIR]: a model folder without weights, for vLLM's --load-format dummy.

Writes OUT_DIR (default ./model) with a Llama config (22 layers, hidden 2048, 32 heads, 4 KV
heads, bf16: the model of tests/data/real-runs/h200-vllm-0.26) and a byte-level BPE tokenizer
of 32,000 tokens trained here on the first 400 modules of Python's standard library, so that
nothing has to come from a model hub. vLLM fills the weights with random numbers: greedy output
repeats itself and n-gram drafts are accepted almost always, so such a model measures the
engine (capture, runners, restarts), never a real model's acceptance.

scripts/gpu-vllm-sweep runs it on the CPU machine for `--model mla` and keeps only the
tokenizer files, beside tests/data/real-runs/h200-vllm-0.26-mla/model-config.json.
Needs the `tokenizers` package (pip install tokenizers). Prints the vocabulary size and the
number of training files.
"""

import glob
import json
import os
import sys

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers


def dump(obj: object, path: str, indent: int | None = None) -> None:
    with open(path, "w") as f:
        json.dump(obj, f, indent=indent)


def main() -> None:
    out = sys.argv[1] if len(sys.argv) > 1 else "model"
    stdlib = os.path.dirname(os.__file__)
    files = sorted(glob.glob(os.path.join(stdlib, "*.py")))[:400]  # the training text
    tok = Tokenizer(models.BPE(unk_token=None, byte_fallback=False))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=32000,
        special_tokens=["<s>", "</s>", "<pad>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train(files, trainer)
    bos, eos, pad = (tok.token_to_id(t) for t in ("<s>", "</s>", "<pad>"))
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A", special_tokens=[("<s>", bos)]
    )
    os.makedirs(out, exist_ok=True)
    tok.save(os.path.join(out, "tokenizer.json"))
    vocab = tok.get_vocab_size()
    special = {"bos_token": "<s>", "eos_token": "</s>", "pad_token": "<pad>"}
    tokenizer_config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        **special,
        "model_max_length": 4096,
        "add_bos_token": True,
    }
    dump(tokenizer_config, os.path.join(out, "tokenizer_config.json"), indent=1)
    dump(special, os.path.join(out, "special_tokens_map.json"))
    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": 2048,
        "intermediate_size": 5632,
        "num_hidden_layers": 22,
        "num_attention_heads": 32,
        "num_key_value_heads": 4,
        "vocab_size": vocab,
        "max_position_embeddings": 4096,
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "hidden_act": "silu",
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
        "bos_token_id": bos,
        "eos_token_id": eos,
        "pad_token_id": pad,
    }
    dump(config, os.path.join(out, "config.json"), indent=1)
    dump({"bos_token_id": bos, "eos_token_id": eos}, os.path.join(out, "generation_config.json"))
    print(vocab, len(files))


if __name__ == "__main__":
    main()
