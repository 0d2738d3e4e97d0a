#: expect: full
#: about: its own attention with the three projections fused at run time (one F.linear on the concatenated W_query/W_key/W_value weights, then chunk), heads by einsum, dropout on (b, h, n, n) through F.dropout(training=self.training); ff an nn.Sequential built from an OrderedDict keyed "0", "1", "2"; the head tied with register_parameter
from collections import OrderedDict

import torch
from torch import nn
from torch.nn import functional as F


class FusedAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        if d_out % num_heads != 0:
            raise ValueError("num_heads must divide d_out")
        self.h, self.p = num_heads, dropout
        self.W_query, self.W_key, self.W_value = (nn.Linear(d_in, d_out, bias=qkv_bias) for _ in range(3))
        self.out_proj = nn.Linear(d_out, d_out)
        self.register_buffer("mask", torch.ones(context_length, context_length).triu(1).bool())

    def forward(self, x):
        b, n, _ = x.shape
        projections = (self.W_query, self.W_key, self.W_value)
        weight = torch.cat([p.weight for p in projections])
        bias = torch.cat([p.bias for p in projections]) if self.W_query.bias is not None else None
        q, k, v = F.linear(x, weight, bias).chunk(3, dim=-1)
        q, k, v = (t.reshape(b, n, self.h, -1) for t in (q, k, v))          # (b, n, h, hd)
        scores = torch.einsum("bqhd,bkhd->bhqk", q, k) / q.shape[-1] ** 0.5
        scores = scores.masked_fill(self.mask[:n, :n], float("-inf"))
        attn = F.dropout(scores.softmax(-1), self.p, training=self.training)
        return self.out_proj(torch.einsum("bhqk,bkhd->bqhd", attn, v).flatten(2))


class GPTBlock(nn.Module):
    def __init__(self, d_model, num_heads, context_length, dropout=0.0, qkv_bias=False):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.attn = FusedAttention(d_model, d_model, context_length, dropout, num_heads, qkv_bias)
        self.ff = nn.Sequential(OrderedDict([("0", nn.Linear(d_model, 4 * d_model)), ("1", nn.GELU()),
                                             ("2", nn.Linear(4 * d_model, d_model))]))
        self.drop = nn.Dropout(dropout)

    def forward(self, x):
        x = self.drop(self.attn(self.norm1(x))) + x
        x = self.drop(self.ff(self.norm2(x))) + x
        return x


class GPT(nn.Module):
    def __init__(self, vocab_size, context_length, d_model, num_heads, num_layers, dropout=0.0,
                 qkv_bias=False, tie_weights=True):
        super().__init__()
        self.tok_emb = nn.Embedding(vocab_size, d_model)
        self.pos_emb = nn.Embedding(context_length, d_model)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(map(lambda _: GPTBlock(d_model, num_heads, context_length, dropout, qkv_bias),
                                        range(num_layers)))
        self.final_norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size, bias=False)
        if tie_weights:
            del self.head.weight
            self.head.register_parameter("weight", self.tok_emb.weight)

    def forward(self, idx):
        if idx.size(1) > self.pos_emb.num_embeddings:
            raise ValueError("longer than context_length")
        pos = torch.arange(idx.size(1), device=idx.device).unsqueeze(0)       # (1, n)
        x = self.drop(self.tok_emb(idx) + self.pos_emb(pos))
        for block in self.blocks:
            x = block(x)
        return self.head(self.final_norm(x))
