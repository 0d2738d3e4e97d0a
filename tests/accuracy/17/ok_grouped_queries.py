#: expect: full
#: about: no repeat_kv in the layer: the query heads grouped as (b, g, n_rep, n, hd) against k[:, :, None], an expanded repeat_kv, an explicit mask built per call, and a cache held as a list
"""A correct submission of exercise 17 written unlike the reference."""
import math

import torch
from torch import nn


def repeat_kv(x, n_rep):
    b, g, n, hd = x.shape
    return x[:, :, None].expand(b, g, n_rep, n, hd).reshape(b, g * n_rep, n, hd)


def cache_bytes_per_token(num_layers, num_kv_heads, head_dim, dtype=torch.float16):
    bits = torch.finfo(dtype).bits if dtype.is_floating_point else torch.iinfo(dtype).bits
    return num_layers * 2 * num_kv_heads * head_dim * bits // 8


class GroupedQueryAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, num_kv_heads, qkv_bias=False):
        super().__init__()
        if d_out % num_heads or num_heads % num_kv_heads:
            raise ValueError("bad head counts")
        self.h, self.g, self.hd, self.ctx = num_heads, num_kv_heads, d_out // num_heads, context_length
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, num_kv_heads * self.hd, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, num_kv_heads * self.hd, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", torch.ones(context_length, context_length, dtype=torch.bool).triu(1))

    def forward(self, x):
        return self.forward_cached(x, None)[0]

    def forward_cached(self, x, past_kv=None):
        b, n, _ = x.shape
        t = 0 if past_kv is None else past_kv[0].shape[2]
        if t + n > self.ctx:
            raise ValueError("too long")
        q = self.W_query(x).view(b, n, self.g, self.h // self.g, self.hd).permute(0, 2, 3, 1, 4)  # (b, g, r, n, hd)
        k = self.W_key(x).view(b, n, self.g, self.hd).transpose(1, 2)
        v = self.W_value(x).view(b, n, self.g, self.hd).transpose(1, 2)
        if past_kv is not None:
            k, v = torch.cat([past_kv[0], k], 2), torch.cat([past_kv[1], v], 2)
        scores = (q @ k[:, :, None].transpose(-1, -2)) * self.hd ** -0.5      # (b, g, r, n, t + n)
        blocked = torch.ones(n, t + n, dtype=torch.bool, device=x.device).triu(t + 1)
        weights = self.dropout(torch.softmax(scores.masked_fill(blocked, -math.inf), dim=-1))
        out = (weights @ v[:, :, None]).permute(0, 3, 1, 2, 4).reshape(b, n, self.h * self.hd)
        return self.out_proj(out), [k, v]
