#: expect: loses
#: fails: [05-train-dropout]
#: hint: [dropout-before-softmax]
#: about: dropout on the masked scores before the softmax (a dropped -inf becomes NaN)
import math

import torch
import torch.nn as nn


class CausalAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, qkv_bias=False):
        super().__init__()
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", torch.tril(torch.ones(context_length, context_length)) == 0)

    def forward(self, x):
        T = x.shape[-2]
        if T > self.mask.size(0):
            raise ValueError("sequence longer than context_length")
        q, k, v = self.W_query(x), self.W_key(x), self.W_value(x)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = torch.where(self.mask[:T, :T], float("-inf"), att)
        att = torch.softmax(self.dropout(att), dim=-1)
        return att @ v
