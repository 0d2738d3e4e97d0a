"""05, a mistake: the registered buffer goes unused; forward builds a fresh
mask on the CPU (right on the CPU, wrong on a GPU)."""
import torch
from torch import nn


class CausalAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, qkv_bias=False):
        super().__init__()
        self.context_length = context_length
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length, dtype=torch.bool), 1))

    def forward(self, x):
        n = x.shape[-2]
        if n > self.context_length:
            raise ValueError("too long")
        q, k, v = self.W_query(x), self.W_key(x), self.W_value(x)
        scores = q @ k.transpose(-2, -1) / k.shape[-1] ** 0.5
        fresh = torch.triu(torch.ones(n, n), diagonal=1).bool()
        weights = torch.softmax(scores.masked_fill(fresh, float("-inf")), dim=-1)
        return self.dropout(weights) @ v
