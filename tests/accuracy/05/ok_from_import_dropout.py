#: expect: full
#: about: from torch.nn.functional import dropout, softmax; dropout(weights, self.dropout.p, training=self.training)
import math

import torch
from torch import nn
from torch.nn.functional import dropout, softmax


class CausalAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, qkv_bias=False):
        super().__init__()
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", torch.ones(context_length, context_length, dtype=torch.bool).triu(1))

    def forward(self, x):
        n = x.shape[-2]
        if n > self.mask.shape[0]:
            raise ValueError("input longer than context_length")
        q, k, v = self.W_query(x), self.W_key(x), self.W_value(x)
        scores = (q @ k.transpose(-2, -1)).masked_fill(self.mask[:n, :n], -math.inf)
        weights = softmax(scores / math.sqrt(k.shape[-1]), dim=-1)
        weights = dropout(weights, self.dropout.p, training=self.training)
        return weights @ v
