#: expect: full
#: about: heads folded into the batch, torch.baddbmm with an additive (0 / -inf) causal mask, unflatten / flatten
import torch
import torch.nn as nn
from causal_attention import CausalAttention


def split_heads(x, num_heads):
    if x.size(-1) % num_heads:
        raise ValueError(f"{x.size(-1)} features, {num_heads} heads")
    return x.unflatten(-1, (num_heads, x.size(-1) // num_heads)).transpose(1, 2)


def merge_heads(x):
    return x.transpose(1, 2).flatten(2)


class MultiHeadAttentionWrapper(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        self.heads = nn.ModuleList(
            [CausalAttention(d_in, d_out, context_length, dropout, qkv_bias) for _ in range(num_heads)])

    def forward(self, x):
        outs = [head(x) for head in self.heads]
        return torch.cat(outs, dim=-1)


class MultiHeadAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        if d_out % num_heads:
            raise ValueError("d_out % num_heads != 0")
        self.h, self.hd, self.ctx = num_heads, d_out // num_heads, context_length
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length, dtype=torch.bool), 1))

    def forward(self, x):
        b, n, _ = x.shape
        if n > self.ctx:
            raise ValueError("longer than context_length")
        q, k, v = (split_heads(proj(x), self.h).reshape(b * self.h, n, self.hd)
                   for proj in (self.W_query, self.W_key, self.W_value))
        additive = torch.zeros(n, n, dtype=x.dtype, device=x.device).masked_fill(self.mask[:n, :n], float("-inf"))
        scores = torch.baddbmm(additive.expand(b * self.h, n, n), q, k.transpose(1, 2), alpha=self.hd ** -0.5)
        weights = self.dropout(scores.softmax(dim=-1))
        context = torch.bmm(weights, v).view(b, self.h, n, self.hd)
        return self.out_proj(merge_heads(context))
