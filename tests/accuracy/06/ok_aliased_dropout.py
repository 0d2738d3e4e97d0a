#: expect: full
#: about: from torch.nn.functional import dropout, softmax; dropout(weights, p, training=self.training)
import math

import torch
from torch import nn
from torch.nn.functional import dropout, softmax

from causal_attention import CausalAttention


def split_heads(x, num_heads):
    b, n, d = x.shape
    if d % num_heads:
        raise ValueError("indivisible")
    return x.view(b, n, num_heads, d // num_heads).transpose(1, 2)


def merge_heads(x):
    b, h, n, hd = x.shape
    return x.transpose(1, 2).contiguous().view(b, n, h * hd)


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
        self.num_heads, self.context_length = num_heads, context_length
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), diagonal=1).bool())

    def forward(self, x):
        n = x.shape[1]
        if n > self.context_length:
            raise ValueError("input longer than context_length")
        q, k, v = (split_heads(layer(x), self.num_heads) for layer in (self.W_query, self.W_key, self.W_value))
        scores = (q @ k.transpose(2, 3)) / math.sqrt(q.shape[-1])
        scores = scores.masked_fill(self.mask[:n, :n], -math.inf)
        weights = dropout(softmax(scores, dim=-1), self.dropout.p, training=self.training)
        return self.out_proj(merge_heads(weights @ v))
