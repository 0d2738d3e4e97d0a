#: expect: full
#: about: d2l's transpose_qkv / transpose_output as split_heads / merge_heads, a helper attend(), torch.concat for the wrapper
import math

import torch
from torch import nn

from causal_attention import CausalAttention


def transpose_qkv(X, num_heads):
    """(b, n, d) -> (b, h, n, d/h), as d2l.transpose_qkv without the final flatten."""
    if X.shape[-1] % num_heads:
        raise ValueError("features do not divide into heads")
    X = X.reshape(X.shape[0], X.shape[1], num_heads, -1)
    return X.permute(0, 2, 1, 3)


def transpose_output(X):
    X = X.permute(0, 2, 1, 3)
    return X.reshape(X.shape[0], X.shape[1], -1)


split_heads = transpose_qkv
merge_heads = transpose_output


def attend(q, k, v, blocked, dropout):
    scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    scores = scores.masked_fill(blocked, float("-inf"))
    return dropout(torch.softmax(scores, dim=-1)) @ v


class MultiHeadAttentionWrapper(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        self.heads = nn.ModuleList()
        for _ in range(num_heads):
            self.heads.append(CausalAttention(d_in, d_out, context_length, dropout, qkv_bias))

    def forward(self, x):
        return torch.concat([h(x) for h in self.heads], dim=2)


class MultiHeadAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        if d_out % num_heads != 0:
            raise ValueError("d_out must be divisible by num_heads")
        self.num_heads = num_heads
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", torch.ones(context_length, context_length).triu(1).bool())

    def forward(self, x):
        n = x.shape[1]
        if n > self.mask.shape[0]:
            raise ValueError("too long")
        q = transpose_qkv(self.W_query(x), self.num_heads)
        k = transpose_qkv(self.W_key(x), self.num_heads)
        v = transpose_qkv(self.W_value(x), self.num_heads)
        out = attend(q, k, v, self.mask[:n, :n], self.dropout)
        return self.out_proj(transpose_output(out))
