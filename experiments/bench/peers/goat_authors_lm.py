#!/usr/bin/env python3
"""Model-level check of lcr's GOAT against the GOAT authors' own module (goat-attention 0.1.1).

    python3 goat_authors_lm.py --task copy_mixture --arm goat_authors --seed 1 [--device cuda]

Trains the small decoder lcr trains (core/model/config.hpp: token embedding, pre-RMSNorm
blocks of attention and a SwiGLU MLP, final RMSNorm, tied LM head, no biases; matrices
N(0, 0.02^2), output projections scaled by 1/sqrt(2 n_layers); AdamW with lcr's betas, decay
groups, warmup + cosine schedule and clipping) with one attention module swapped in:

  goat_authors  their GoatAttention.for_gpt (their GPT recipe: no relative modes, the key bias
                MLP, per-head gain and bump, softplus recency slope seeded at ALiBi's slopes),
                with its q/k/v/out projections re-initialised like lcr's and without biases,
                so only the positional part differs from the rope arm
  rope          plain RoPE (half-split pairs, base 10000), the same harness as a control: its
                curve beside lcr's RoPE run says whether this harness trains like lcr

Data are drawn like lcr's tasks: copy_mixture (core/data/tasks/copy_mixture.cpp, the options
of experiments/configs/copy_mixture_goat.toml) or byte text (the built-in corpus of
core/data/text.cpp, read from --corpus, last 10% held out). Evaluation: mean next-token loss
at 1x, 2x, ..., 16x the training length (copy_mixture: 32 fresh sequences per length; text:
8 windows from the held-out tail). Prints one JSON line per evaluation.

The authors' package is installed only for this check, in a throw-away environment, e.g.
    python3 -m pip download --no-deps goat-attention==0.1.1   # on a machine with PyPI
    python3 -m pip install --no-deps --target /tmp/site goat_attention-0.1.1-py3-none-any.whl
    PYTHONPATH=/tmp/site python3 experiments/bench/peers/goat_authors_lm.py ...
"""
import argparse
import json
import math
import os

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

CORPUS = ["GPL-3", "GPL-2", "GPL-1", "LGPL-3", "LGPL-2.1", "LGPL-2", "GFDL-1.3", "GFDL-1.2",
          "Apache-2.0", "MPL-2.0", "MPL-1.1", "Artistic", "CC0-1.0", "BSD"]


class CopyMixture:
    """x_0 uniform; x_t = x_0 (p_first), x_{t-offset} (p_relative, t >= offset), else uniform."""

    def __init__(self, vocab=32, p_first=0.3, p_relative=0.45, offset=3):
        self.vocab, self.p_first, self.p_rel, self.offset = vocab, p_first, p_relative, offset

    def batch(self, rng, B, L):
        x = np.empty((B, L), dtype=np.int64)
        x[:, 0] = rng.integers(0, self.vocab, B)
        u = rng.random((B, L))
        noise = rng.integers(0, self.vocab, (B, L))
        for t in range(1, L):
            rel = x[:, t - self.offset] if t >= self.offset else noise[:, t]
            rel_ok = (u[:, t] >= self.p_first) & (u[:, t] < self.p_first + self.p_rel)
            x[:, t] = np.where(u[:, t] < self.p_first, x[:, 0],
                               np.where(rel_ok & (t >= self.offset), rel, noise[:, t]))
        return torch.from_numpy(x)


class ByteText:
    def __init__(self, corpus_dir):
        data = b"".join(open(os.path.join(corpus_dir, n), "rb").read() for n in CORPUS)
        tokens = np.frombuffer(data, dtype=np.uint8).astype(np.int64)
        cut = len(tokens) - int(len(tokens) * 0.1)
        self.train, self.valid = tokens[:cut], tokens[cut:]
        self.vocab = 256

    def batch(self, rng, B, L):
        starts = rng.integers(0, len(self.train) - L, B)
        return torch.from_numpy(np.stack([self.train[s:s + L] for s in starts]))

    def windows(self, n, L):
        n = min(n, len(self.valid) // L)
        return torch.from_numpy(np.stack([self.valid[i * L:(i + 1) * L] for i in range(n)]))


class RMSNorm(nn.Module):
    def __init__(self, d, eps=1e-5):
        super().__init__()
        self.g, self.eps = nn.Parameter(torch.ones(d)), eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.g


class RopeAttention(nn.Module):
    def __init__(self, d_model, heads, head_dim, base=10000.0):
        super().__init__()
        self.h, self.d = heads, head_dim
        self.wq = nn.Linear(d_model, heads * head_dim, bias=False)
        self.wk = nn.Linear(d_model, heads * head_dim, bias=False)
        self.wv = nn.Linear(d_model, heads * head_dim, bias=False)
        self.out_proj = nn.Linear(heads * head_dim, d_model, bias=False)
        self.register_buffer("inv", base ** (-torch.arange(0, head_dim, 2).double() / head_dim),
                             persistent=False)

    def rotate(self, x):  # x [B, H, L, d], half-split pairs (m, m + d/2)
        L = x.shape[2]
        ang = torch.arange(L, device=x.device, dtype=torch.float64)[:, None] * self.inv[None]
        cos, sin = ang.cos().to(x.dtype), ang.sin().to(x.dtype)
        a, b = x[..., : self.d // 2], x[..., self.d // 2:]
        return torch.cat([a * cos - b * sin, a * sin + b * cos], dim=-1)

    def forward(self, x):
        B, L, _ = x.shape
        q, k, v = (w(x).view(B, L, self.h, self.d).transpose(1, 2)
                   for w in (self.wq, self.wk, self.wv))
        o = F.scaled_dot_product_attention(self.rotate(q), self.rotate(k), v, is_causal=True)
        return self.out_proj(o.transpose(1, 2).reshape(B, L, -1))


class AuthorsGoat(nn.Module):
    def __init__(self, d_model, heads, train_len):
        super().__init__()
        from goat import GoatAttention  # the authors' module
        self.m = GoatAttention.for_gpt(d_model, heads, training_seq_len=train_len, bias=False)

    def forward(self, x):
        return self.m(x, x, x, is_causal=True, need_weights=False)[0]


class Block(nn.Module):
    def __init__(self, args, vocab_len):
        super().__init__()
        D = args.d_model
        self.n1, self.n2 = RMSNorm(D), RMSNorm(D)
        if args.arm == "rope":
            self.attn = RopeAttention(D, args.heads, D // args.heads)
        else:
            self.attn = AuthorsGoat(D, args.heads, args.seq_len)
        F_ = int(round(8 * D / 3 / 8)) * 8
        self.w_gate = nn.Linear(D, F_, bias=False)
        self.w_up = nn.Linear(D, F_, bias=False)
        self.w_down = nn.Linear(F_, D, bias=False)

    def forward(self, x):
        x = x + self.attn(self.n1(x))
        h = self.n2(x)
        return x + self.w_down(F.silu(self.w_gate(h)) * self.w_up(h))


class Model(nn.Module):
    def __init__(self, args, vocab):
        super().__init__()
        self.embed = nn.Embedding(vocab, args.d_model)
        self.blocks = nn.ModuleList(Block(args, vocab) for _ in range(args.n_layers))
        self.norm = RMSNorm(args.d_model)
        # lcr's init: matrices N(0, 0.02^2); output projections (attention out, w_down) / sqrt(2 n).
        out_std = 0.02 / math.sqrt(2 * args.n_layers)
        for name, p in self.named_parameters():
            if name.endswith("embed.weight"):
                nn.init.normal_(p, std=0.02)
            elif (name.endswith("proj.weight") or name.startswith("blocks")) and p.dim() == 2 \
                    and "key_bias" not in name and "lambda" not in name:
                std = out_std if ("out_proj" in name or "w_down" in name) else 0.02
                nn.init.normal_(p, std=std)

    def forward(self, tokens):
        x = self.embed(tokens)
        for b in self.blocks:
            x = b(x)
        return self.norm(x) @ self.embed.weight.T


def decayed(name, p):  # lcr's groups: the weight matrices only (not embeddings, gains, priors)
    return p.dim() == 2 and "embed" not in name and "key_bias" not in name and "lambda" not in name


def lr_at(step, args):
    if step < args.warmup:
        return args.lr * (step + 1) / args.warmup
    t = min(1.0, (step - args.warmup) / max(1, args.steps - args.warmup))
    return args.min_lr + 0.5 * (args.lr - args.min_lr) * (1 + math.cos(math.pi * t))


@torch.no_grad()
def evaluate(model, data, args, rng):
    out = {}
    f = 1
    while f <= args.max_length_factor:
        L = args.seq_len * f
        x = data.windows(8, L) if isinstance(data, ByteText) else data.batch(rng, 32, L)
        x = x.to(args.device)
        losses = []
        for i in range(0, x.shape[0], 4):
            xb = x[i:i + 4]
            logits = model(xb[:, :-1])
            losses.append(F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(),
                                          xb[:, 1:].reshape(-1), reduction="sum").item())
        out[str(L)] = sum(losses) / (x.shape[0] * (L - 1))
        f *= 2
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--task", choices=["copy_mixture", "text"], default="copy_mixture")
    ap.add_argument("--arm", choices=["goat_authors", "rope"], default="goat_authors")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--corpus", default="/usr/share/common-licenses")
    ap.add_argument("--d-model", dest="d_model", type=int, default=128)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--n-layers", dest="n_layers", type=int, default=2)
    ap.add_argument("--seq-len", dest="seq_len", type=int, default=0)
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--min-lr", dest="min_lr", type=float, default=3e-4)
    ap.add_argument("--warmup", type=int, default=40)
    ap.add_argument("--max-length-factor", dest="max_length_factor", type=int, default=16)
    args = ap.parse_args()
    if args.seq_len == 0:
        args.seq_len = 256 if args.task == "copy_mixture" else 128
    torch.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    data = CopyMixture() if args.task == "copy_mixture" else ByteText(args.corpus)
    vocab = data.vocab
    model = Model(args, vocab).to(args.device)
    groups = [{"params": [p for n, p in model.named_parameters() if decayed(n, p)],
               "weight_decay": 0.1},
              {"params": [p for n, p in model.named_parameters() if not decayed(n, p)],
               "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=args.lr, betas=(0.9, 0.95), eps=1e-8)
    for step in range(args.steps):
        for g in opt.param_groups:
            g["lr"] = lr_at(step, args)
        x = data.batch(rng, args.batch, args.seq_len).to(args.device)
        logits = model(x[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, vocab), x[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if (step + 1) % 20 == 0:
            print(json.dumps({"step": step + 1, "loss": round(loss.item(), 4)}), flush=True)
    result = {"task": args.task, "arm": args.arm, "seed": args.seed,
              "eval": evaluate(model, data, args, np.random.default_rng(10_000 + args.seed))}
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
