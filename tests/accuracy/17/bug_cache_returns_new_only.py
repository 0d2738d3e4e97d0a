#: expect: loses
#: fails: [17-cache-values, 17-cache-heads]
#: about: forward_cached returns the new tokens' keys and values only, not all t + n positions: the next step forgets the past
"""A submission of exercise 17: the reference with the mistake its label describes."""
import math

import torch
from torch import nn

from multihead import merge_heads, split_heads


def repeat_kv(x, n_rep):
    return x.repeat_interleave(n_rep, dim=1)


def cache_bytes_per_token(num_layers, num_kv_heads, head_dim, dtype=torch.float16):
    return 2 * num_layers * num_kv_heads * head_dim * torch.empty(0, dtype=dtype).element_size()


class GroupedQueryAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, num_kv_heads, qkv_bias=False):
        super().__init__()
        if d_out % num_heads or num_heads % num_kv_heads:
            raise ValueError("bad head counts")
        self.num_heads, self.num_kv_heads, self.head_dim = num_heads, num_kv_heads, d_out // num_heads
        self.n_rep, self.context_length = num_heads // num_kv_heads, context_length
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, num_kv_heads * self.head_dim, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, num_kv_heads * self.head_dim, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", torch.ones(context_length, context_length, dtype=torch.bool).triu(1))

    def forward(self, x):
        return self.forward_cached(x)[0]

    def forward_cached(self, x, past_kv=None):
        n = x.size(1)
        start = 0 if past_kv is None else past_kv[0].size(2)
        if start + n > self.context_length:
            raise ValueError("too long")
        q = split_heads(self.W_query(x), self.num_heads)
        k_new = split_heads(self.W_key(x), self.num_kv_heads)
        v_new = split_heads(self.W_value(x), self.num_kv_heads)
        k, v = k_new, v_new
        if past_kv is not None:
            k, v = torch.cat([past_kv[0], k_new], 2), torch.cat([past_kv[1], v_new], 2)
        scores = q @ repeat_kv(k, self.n_rep).transpose(-2, -1) / math.sqrt(self.head_dim)
        scores = scores.masked_fill(self.mask[start:start + n, :start + n], float("-inf"))
        weights = self.dropout(torch.softmax(scores, dim=-1))
        return self.out_proj(merge_heads(weights @ repeat_kv(v, self.n_rep))), (k_new, v_new)
