"""An independent correct exercise 06 (written apart from the reference: view/permute, einsum, a
loop-built ModuleList), for tests/test_similarity.py: it must not be flagged against the reference."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from causal_attention import CausalAttention


def split_heads(x, num_heads):
    batch, tokens, width = x.size()
    if width % num_heads:
        raise ValueError("width must divide into heads")
    per_head = width // num_heads
    out = x.view(batch, tokens, num_heads, per_head)
    return out.permute(0, 2, 1, 3)


def merge_heads(x):
    batch, heads, tokens, per_head = x.size()
    return x.permute(0, 2, 1, 3).contiguous().view(batch, tokens, heads * per_head)


class MultiHeadAttentionWrapper(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        self.heads = nn.ModuleList()
        for _ in range(num_heads):
            self.heads.append(CausalAttention(d_in, d_out, context_length, dropout, qkv_bias))

    def forward(self, x):
        outs = []
        for h in self.heads:
            outs.append(h(x))
        return torch.cat(outs, -1)


class MultiHeadAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        if d_out % num_heads != 0:
            raise ValueError("d_out % num_heads != 0")
        self.h = num_heads
        self.hd = d_out // num_heads
        self.ctx = context_length
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", torch.ones(context_length, context_length).triu(1).bool())

    def forward(self, x):
        T = x.shape[1]
        if T > self.ctx:
            raise ValueError("too long")
        Q = split_heads(self.W_query(x), self.h)
        K = split_heads(self.W_key(x), self.h)
        V = split_heads(self.W_value(x), self.h)
        att = torch.einsum("bhqd,bhkd->bhqk", Q, K) * self.hd ** -0.5
        att = att.masked_fill(self.mask[:T, :T], -torch.inf)
        att = self.dropout(F.softmax(att, dim=-1))
        return self.out_proj(merge_heads(att @ V))
