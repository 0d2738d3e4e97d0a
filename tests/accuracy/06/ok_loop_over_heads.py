#: expect: full
#: about: MultiHeadAttention that loops over the heads, slicing each one's features from the shared projections, and concatenates; dropout per head
import math

import torch
from torch import nn

from causal_attention import CausalAttention


def split_heads(x, num_heads):
    b, n, d = x.shape
    if d % num_heads:
        raise ValueError("indivisible")
    hd = d // num_heads
    return torch.stack([x[..., i * hd:(i + 1) * hd] for i in range(num_heads)], dim=1)


def merge_heads(x):
    return torch.cat(x.unbind(dim=1), dim=-1)


class MultiHeadAttentionWrapper(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        self.heads = nn.ModuleList([CausalAttention(d_in, d_out, context_length, dropout, qkv_bias)
                                    for _ in range(num_heads)])

    def forward(self, x):
        return torch.cat([head(x) for head in self.heads], dim=-1)


class MultiHeadAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        if d_out % num_heads:
            raise ValueError("d_out must be divisible by num_heads")
        self.num_heads, self.head_dim, self.context_length = num_heads, d_out // num_heads, context_length
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length, dtype=torch.bool), 1))

    def forward(self, x):
        n = x.size(1)
        if n > self.context_length:
            raise ValueError("too long")
        q, k, v = self.W_query(x), self.W_key(x), self.W_value(x)
        blocked = self.mask[:n, :n]
        heads = []
        for i in range(self.num_heads):
            cols = slice(i * self.head_dim, (i + 1) * self.head_dim)
            scores = q[..., cols] @ k[..., cols].transpose(1, 2) / math.sqrt(self.head_dim)
            weights = torch.softmax(scores.masked_fill(blocked, float("-inf")), dim=-1)
            weights = self.dropout(weights)
            heads.append(weights @ v[..., cols])
        return self.out_proj(torch.cat(heads, dim=-1))
