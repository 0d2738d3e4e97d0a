#: expect: full
#: about: its own causal attention in gpt.py (the contract's parameter names), looping over the heads with one dropout call per head, aliased imports (import torch as T, torch.nn.functional as fn), blocks applied through nn.Sequential(*self.blocks)
import math

import torch as T
import torch.nn.functional as fn
from torch import nn as N


class CausalSelfAttention(N.Module):
    """W_query/W_key/W_value/out_proj as in multihead.py; one head at a time."""

    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        if d_out % num_heads:
            raise ValueError("d_out must be divisible by num_heads")
        self.heads, self.width = num_heads, d_out // num_heads
        self.W_query = N.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = N.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = N.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = N.Linear(d_out, d_out)
        self.dropout = N.Dropout(dropout)
        self.register_buffer("mask", T.triu(T.ones(context_length, context_length, dtype=T.bool), diagonal=1))

    def forward(self, x):
        n = x.shape[1]
        q, k, v = self.W_query(x), self.W_key(x), self.W_value(x)
        outs = []
        for h in range(self.heads):
            part = slice(h * self.width, (h + 1) * self.width)
            scores = q[..., part] @ k[..., part].mT / math.sqrt(self.width)
            w = fn.softmax(scores.masked_fill(self.mask[:n, :n], -T.inf), dim=-1)
            outs.append(self.dropout(w) @ v[..., part])
        return self.out_proj(T.cat(outs, dim=-1))


class GPTBlock(N.Module):
    def __init__(self, d_model, num_heads, context_length, dropout=0.0, qkv_bias=False):
        super().__init__()
        self.norm1 = N.LayerNorm(d_model)
        self.attn = CausalSelfAttention(d_model, d_model, context_length, dropout, num_heads, qkv_bias)
        self.norm2 = N.LayerNorm(d_model)
        self.ff = N.Sequential(N.Linear(d_model, 4 * d_model), N.GELU(), N.Linear(4 * d_model, d_model))
        self.drop = N.Dropout(dropout)

    def forward(self, x):
        x = x + self.drop(self.attn(self.norm1(x)))
        return x + self.drop(self.ff(self.norm2(x)))


class GPT(N.Module):
    def __init__(self, vocab_size, context_length, d_model, num_heads, num_layers, dropout=0.0,
                 qkv_bias=False, tie_weights=True):
        super().__init__()
        self.context_length = context_length
        self.tok_emb = N.Embedding(vocab_size, d_model)
        self.pos_emb = N.Embedding(context_length, d_model)
        self.drop = N.Dropout(dropout)
        self.blocks = N.ModuleList([GPTBlock(d_model, num_heads, context_length, dropout, qkv_bias)
                                    for _ in range(num_layers)])
        self.final_norm = N.LayerNorm(d_model)
        self.head = N.Linear(d_model, vocab_size, bias=False)
        if tie_weights:
            self.head.weight = self.tok_emb.weight

    def forward(self, idx):
        n = idx.shape[-1]
        if n > self.context_length:
            raise ValueError("too many tokens")
        x = self.drop(self.tok_emb(idx) + self.pos_emb(T.arange(n, device=idx.device)))
        x = N.Sequential(*self.blocks)(x)
        return self.head(self.final_norm(x))
