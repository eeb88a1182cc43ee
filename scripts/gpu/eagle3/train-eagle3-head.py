#!/usr/bin/env python3
"""train-eagle3-head.py TARGET_DIR OUT_DIR: train an EAGLE3 draft head for TARGET_DIR (issue 50).

A short trainer of its own in torch (why not specforge or speculators: docs/gpu.md), for the
head format SGLang 0.5.17 loads as LlamaForCausalLMEagle3 and scripts/gpu/sglang/
make-eagle3-head.py writes at random: fc over three target layers' features, one decoder layer
(input 2 x hidden: the token's embedding and the hidden state, each normed), a final norm; no
lm_head, d2t or t2d (draft_vocab_size null), so SGLang lends the head the target's embedding and
lm_head, which this trainer keeps frozen. What the head sees is what SGLang 0.5.17 feeds it:

- features: SGLang's Gemma3 model captures layers [2, L//2, L-3] by keeping a reference to
  the `hidden_states` tensor that enters each of them; that layer's input_layernorm then runs
  gemma_fused_add_rmsnorm on it in place (layers/layernorm.py, Gemma3RMSNorm.forward_cuda), so
  what the head receives is the layer's normed input, (1 + w) * rmsnorm(residual stream), not
  the residual stream and not the MLP branch: hooks on those layers' input_layernorm read
  exactly that. (The first recording, 2026-12-04, trained on the MLP branch of the layer
  before, post_feedforward_layernorm's output, which SGLang never feeds: the head accepted
  1.04 tokens per step under both flags although it agreed with the target 44% of the time
  at the first step on held-out text. samples/sglang-h200-gemma3-eagle3/README.md.)
- embeddings: the raw rows of the target's embedding (the draft's VocabParallelEmbedding does
  not apply Gemma's sqrt(hidden) scale);
- logits: the draft's final norm, then the target's (tied) lm_head.

Data, made here without a hub: prompts from corpus.py (stdlib code openings, prose from the
packages' own text), the target's greedy continuations (self-distillation), and raw text chunks.
Labels are the target's own argmax at each position. Training unrolls the draft chain
(training-time test, TTT steps): step j at chain start i reads the step-0 keys up to i and its
own chain's keys, as SGLang's draft decode does. It stops after TRAIN_S seconds.

OUT_DIR gets config.json, model.safetensors (bf16), the tokenizer files and train-record.json:
the head's sha256 and size, the corpus' sha256 and counts, the settings, the timings, the loss
and the held-out per-step top-1 agreement with the target (and the acceptance length it
implies for a chain of 3). Needs torch, transformers and safetensors (the H200 image's).
Settings come from the environment (defaults in SETTINGS).
"""

import hashlib
import json
import math
import os
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from transformers import AutoModelForCausalLM, AutoTokenizer

sys.path.insert(0, str(Path(__file__).resolve().parent))
import corpus as corpus_mod
from head_format import RMS_EPS, ROPE_THETA, write_head

SETTINGS = {
    "N_CODE": 2560,
    "N_PROSE": 1536,
    "N_CHUNKS": 768,
    "GEN_TOKENS": 192,
    "GEN_BATCH": 512,
    "SEQ_LEN": 512,
    "BATCH": 8,
    "TTT": 3,
    "LR": 1e-3,
    "WARMUP": 40,
    "TRAIN_S": 150,
    "EVAL_SEQS": 64,
    "SEED": 0,
    "DEVICE": "cuda",
}
CFG = {k: type(v)(os.environ.get(k, v)) for k, v in SETTINGS.items()}
t_start = time.time()


def log(msg: str) -> None:
    print(f"{time.time() - t_start:7.1f}s {msg}", flush=True)


class Head(torch.nn.Module):
    """The EAGLE3 head as SGLang 0.5.17's llama_eagle3.py computes it (fp32 master weights)."""

    def __init__(self, H: int, heads: int, kv: int, hd: int, inter: int, eps: float, theta: float):
        super().__init__()
        lin = lambda i, o: torch.nn.Linear(i, o, bias=False)  # noqa: E731
        self.fc = lin(3 * H, H)
        self.q, self.k, self.v, self.o = (
            lin(2 * H, heads * hd),
            lin(2 * H, kv * hd),
            lin(2 * H, kv * hd),
            lin(heads * hd, H),
        )
        self.gate, self.up, self.down = lin(H, inter), lin(H, inter), lin(inter, H)
        self.n_hidden, self.n_in, self.n_post, self.n_out = (
            torch.nn.Parameter(torch.ones(H)) for _ in range(4)
        )
        self.heads, self.kv, self.hd, self.eps, self.theta = heads, kv, hd, eps, theta

    def norm(self, x, w):
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps) * w).to(x.dtype)

    def rope(self, x, pos):  # x: B, h, T, hd; neox (rotate-half) style, as SGLang's Llama
        half = self.hd // 2
        inv = 1.0 / (
            self.theta ** (torch.arange(0, half, device=x.device, dtype=torch.float32) / half)
        )
        ang = pos.float()[..., None] * inv  # B, T, half
        cos, sin = ang.cos()[:, None].to(x.dtype), ang.sin()[:, None].to(x.dtype)
        x1, x2 = x[..., :half], x[..., half:]
        return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1)

    def layer_in(self, hid, emb, pos):
        """q, k, v of one step; hid is the step's input hidden state (the residual)."""
        B, T, _ = hid.shape
        x = torch.cat([self.norm(emb, self.n_in), self.norm(hid, self.n_hidden)], -1)
        q = self.rope(self.q(x).view(B, T, self.heads, self.hd).transpose(1, 2), pos)
        k = self.rope(self.k(x).view(B, T, self.kv, self.hd).transpose(1, 2), pos)
        v = self.v(x).view(B, T, self.kv, self.hd).transpose(1, 2)
        return q, k, v

    def layer_out(self, hid, attn):
        B, _, T, _ = attn.shape
        res = self.o(attn.transpose(1, 2).reshape(B, T, -1)) + hid
        out = (
            self.down(
                F.silu(self.gate(self.norm(res, self.n_post)))
                * self.up(self.norm(res, self.n_post))
            )
            + res
        )
        return out, self.norm(out, self.n_out)

    def unroll(self, feats, emb_of, pos, steps):
        """Normed outputs of each chain step (B, T, H); step j's row i starts its chain at i."""
        hid = self.fc(feats)
        T = hid.shape[1]
        scale = self.hd**-0.5
        causal = torch.ones(T, T, dtype=torch.bool, device=hid.device).tril()
        k0 = v0 = None
        chain_k, chain_v, outs = [], [], []
        for j in range(steps):
            q, k, v = self.layer_in(hid, emb_of(j), pos + j)
            if j == 0:
                k0, v0 = k, v
            else:
                chain_k.append(k)
                chain_v.append(v)
            s0 = torch.matmul(q, k0.transpose(-1, -2)) * scale  # B, h, T, T (kv heads broadcast)
            s0 = s0.masked_fill(~causal, float("-inf"))
            extra = [(q * ck).sum(-1, keepdim=True) * scale for ck in chain_k]
            p = torch.softmax(torch.cat([s0, *extra], -1).float(), -1).to(q.dtype)
            a = torch.matmul(p[..., :T], v0)
            for m, cv in enumerate(chain_v):
                a = a + p[..., T + m : T + m + 1] * cv
            hid, normed = self.layer_out(hid, a)
            outs.append(normed)
        return outs

    def export(self) -> dict:
        bf = lambda t: t.detach().to(torch.bfloat16).contiguous().cpu()  # noqa: E731
        m = "midlayer."
        return {
            "fc.weight": bf(self.fc.weight),
            m + "hidden_norm.weight": bf(self.n_hidden),
            m + "input_layernorm.weight": bf(self.n_in),
            m + "post_attention_layernorm.weight": bf(self.n_post),
            m + "self_attn.q_proj.weight": bf(self.q.weight),
            m + "self_attn.k_proj.weight": bf(self.k.weight),
            m + "self_attn.v_proj.weight": bf(self.v.weight),
            m + "self_attn.o_proj.weight": bf(self.o.weight),
            m + "mlp.gate_proj.weight": bf(self.gate.weight),
            m + "mlp.up_proj.weight": bf(self.up.weight),
            m + "mlp.down_proj.weight": bf(self.down.weight),
            "norm.weight": bf(self.n_out),
        }


def capture_layers(n_layers: int) -> list[int]:
    """SGLang's default EAGLE3 capture for Gemma 3: inputs of layers [2, L//2, L-3]."""
    return [2, n_layers // 2, n_layers - 3]


def generate(model, tok, prompts: list[str], dev) -> list[list[int]]:
    """Greedy continuations, batched with left padding; prompt + continuation ids, no padding."""
    tok.padding_side = "left"
    seqs = []
    for b in range(0, len(prompts), CFG["GEN_BATCH"]):
        enc = tok(
            prompts[b : b + CFG["GEN_BATCH"]],
            return_tensors="pt",
            padding=True,
            truncation=True,
            max_length=256,
        ).to(dev)
        with torch.no_grad():
            out = model.generate(
                **enc,
                max_new_tokens=CFG["GEN_TOKENS"],
                do_sample=False,
                pad_token_id=tok.pad_token_id,
            )
        for row, mask in zip(out, enc["attention_mask"], strict=True):
            pad = int((mask == 0).sum())
            ids = row[pad:].tolist()
            while ids and ids[-1] == tok.pad_token_id:
                ids.pop()
            seqs.append(ids[: CFG["SEQ_LEN"]])
        log(f"generated {len(seqs)}/{len(prompts)}")
    return seqs


class Target:
    """The frozen target: features of the captured layers and its argmax at each position."""

    def __init__(self, model):
        self.model = model
        layers = model.model.layers
        self.ids = capture_layers(len(layers))
        self.buf: dict[int, torch.Tensor] = {}
        for c in self.ids:  # layer c's normed input: SGLang's in-place fused norm leaves that
            layers[c].input_layernorm.register_forward_hook(
                lambda _m, _i, out, c=c: self.buf.__setitem__(c, out)
            )
        self.embed = model.get_input_embeddings().weight  # raw rows, no sqrt(H) scale
        self.head = model.get_output_embeddings().weight

    @torch.no_grad()
    def __call__(self, ids, mask):
        logits = self.model(input_ids=ids, attention_mask=mask).logits
        return torch.cat([self.buf[c] for c in self.ids], -1), logits.argmax(-1)


def batches(seqs, dev, pad_id, rng):
    order = torch.randperm(len(seqs), generator=rng).tolist()
    for b in range(0, len(order) - CFG["BATCH"] + 1, CFG["BATCH"]):
        rows = [seqs[i] for i in order[b : b + CFG["BATCH"]]]
        T = max(len(r) for r in rows)
        ids = torch.full((len(rows), T), pad_id, dtype=torch.long)
        mask = torch.zeros((len(rows), T), dtype=torch.long)
        for i, r in enumerate(rows):
            ids[i, : len(r)] = torch.tensor(r)
            mask[i, : len(r)] = 1
        yield ids.to(dev), mask.to(dev)


def step_losses(head, target, ids, mask):
    """Loss and top-1 agreement per chain step.

    Step j at row i predicts the target's argmax at i+j+1.
    """
    feats, amax = target(ids, mask)
    B, T = ids.shape
    pos = torch.arange(T, device=ids.device).expand(B, T)

    def emb_of(j):  # step j at row i reads token i+j+1 (teacher-forced: the sequence's own)
        shifted = torch.full_like(ids, 0)
        shifted[:, : T - j - 1] = ids[:, j + 1 :]
        return F.embedding(shifted, target.embed)

    outs = head.unroll(feats.to(torch.bfloat16), emb_of, pos, CFG["TTT"])
    losses, accs = [], []
    for j, normed in enumerate(outs):
        n = T - j - 1
        valid = mask[:, j + 1 :].bool()  # the fed token i+j+1 exists
        x = normed[:, :n][valid]
        lab = amax[:, j + 1 :][valid]
        logits = x @ target.head.T
        losses.append(F.cross_entropy(logits.float(), lab))
        accs.append((logits.argmax(-1) == lab).float().mean())
    return losses, accs


def main() -> None:
    src, dst = Path(sys.argv[1]), Path(sys.argv[2])
    dst.mkdir(parents=True, exist_ok=True)
    dev = torch.device(CFG["DEVICE"])
    torch.manual_seed(CFG["SEED"])
    repo = Path(__file__).resolve().parents[3]
    corp = corpus_mod.build(repo, CFG["N_CODE"], CFG["N_PROSE"], CFG["N_CHUNKS"], CFG["SEED"])
    log(
        f"corpus {corp['sha256'][:12]}: {len(corp['code'])} code, "
        f"{len(corp['prose'])} prose prompts, {len(corp['chunks'])} chunks"
    )
    tok = AutoTokenizer.from_pretrained(src)
    if tok.pad_token_id is None:
        tok.pad_token_id = 0
    dtype = torch.bfloat16
    model = (
        AutoModelForCausalLM.from_pretrained(src, dtype=dtype, attn_implementation="sdpa")
        .to(dev)
        .eval()
    )
    for p in model.parameters():
        p.requires_grad_(False)
    t_gen = time.time()
    gen = generate(model, tok, corp["code"] + corp["prose"], dev)
    gen_s = time.time() - t_gen
    tok.padding_side = "right"
    chunks = [
        tok(c, truncation=True, max_length=CFG["SEQ_LEN"])["input_ids"] for c in corp["chunks"]
    ]
    seqs = [s for s in gen + chunks if len(s) >= 16]
    rng = torch.Generator().manual_seed(CFG["SEED"])
    perm = torch.randperm(len(seqs), generator=rng).tolist()
    held = [seqs[i] for i in perm[: CFG["EVAL_SEQS"]]]
    train = [seqs[i] for i in perm[CFG["EVAL_SEQS"] :]]
    n_tok = sum(len(s) for s in train)
    log(
        f"{len(train)} training sequences ({n_tok} tokens), {len(held)} held out; "
        f"generation {gen_s:.1f}s"
    )

    tc = model.config.get_text_config()
    H, heads, kv = tc.hidden_size, tc.num_attention_heads, tc.num_key_value_heads
    hd = getattr(tc, "head_dim", None) or H // heads
    head = Head(H, heads, kv, hd, tc.intermediate_size, RMS_EPS, ROPE_THETA).to(dev)
    with torch.no_grad():  # start the output norm at the target's own final-norm scale (1 + w)
        head.n_out.copy_(1.0 + model.model.norm.weight.float())
    target = Target(model)
    opt = torch.optim.AdamW(head.parameters(), lr=CFG["LR"], betas=(0.9, 0.95), weight_decay=0.0)
    weights = [0.8**j for j in range(CFG["TTT"])]
    t_train, step, epoch, curve = time.time(), 0, 0, []
    done = False
    while not done:
        for ids, mask in batches(train, dev, tok.pad_token_id, rng):
            frac = (time.time() - t_train) / CFG["TRAIN_S"]
            if frac >= 1:
                done = True
                break
            lr = (
                CFG["LR"]
                * min(1.0, (step + 1) / CFG["WARMUP"])
                * 0.5
                * (1 + math.cos(math.pi * frac))
            )
            for g in opt.param_groups:
                g["lr"] = lr
            with torch.autocast(dev.type, dtype=torch.bfloat16):
                losses, accs = step_losses(head, target, ids, mask)
            loss = sum(w * ls for w, ls in zip(weights, losses, strict=True))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(head.parameters(), 1.0)
            opt.step()
            if step % 50 == 0:
                row = {
                    "step": step,
                    "s": round(time.time() - t_train, 1),
                    "loss": round(loss.item(), 4),
                    "acc": [round(a.item(), 4) for a in accs],
                }
                curve.append(row)
                log(json.dumps(row))
            step += 1
        epoch += 1
    train_s = time.time() - t_train

    head.eval()
    agree = torch.zeros(CFG["TTT"])
    with torch.no_grad(), torch.autocast(dev.type, dtype=torch.bfloat16):
        n = 0
        for ids, mask in batches(held, dev, tok.pad_token_id, torch.Generator().manual_seed(1)):
            _, accs = step_losses(head, target, ids, mask)
            agree += torch.tensor([a.item() for a in accs])
            n += 1
    agree = (agree / max(n, 1)).tolist()
    chain = 1 + sum(math.prod(agree[: j + 1]) for j in range(len(agree)))

    note = "EAGLE3 head trained by scripts/gpu/eagle3/train-eagle3-head.py (train-record.json)"
    write_head(src, dst, head.export(), note)
    blob = (dst / "model.safetensors").read_bytes()
    record = {
        "head_sha256": hashlib.sha256(blob).hexdigest(),
        "head_bytes": len(blob),
        "head_parameters": sum(p.numel() for p in head.parameters()),
        "target": str(src),
        "capture_layers": capture_layers(tc.num_hidden_layers),
        "corpus": {k: corp[k] for k in ("sha256", "available", "sources", "python")}
        | {
            "code_prompts": len(corp["code"]),
            "prose_prompts": len(corp["prose"]),
            "chunks": len(corp["chunks"]),
        },
        "training_sequences": len(train),
        "training_tokens": n_tok,
        "held_out_sequences": len(held),
        "settings": CFG,
        "generation_s": round(gen_s, 1),
        "train_s": round(train_s, 1),
        "steps": step,
        "epochs_started": epoch,
        "curve": curve,
        "held_out_top1_per_step": [round(a, 4) for a in agree],
        "held_out_chain_acceptance_length": round(chain, 3),
        "total_s": round(time.time() - t_start, 1),
        "torch": torch.__version__,
        "device": torch.cuda.get_device_name() if dev.type == "cuda" else "cpu",
    }
    (dst / "train-record.json").write_text(json.dumps(record, indent=1))
    log(
        json.dumps(
            {
                k: record[k]
                for k in (
                    "head_sha256",
                    "head_bytes",
                    "steps",
                    "train_s",
                    "held_out_top1_per_step",
                    "held_out_chain_acceptance_length",
                )
            }
        )
    )


if __name__ == "__main__":
    main()
