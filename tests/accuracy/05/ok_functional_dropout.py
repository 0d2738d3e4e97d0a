#: expect: full
#: about: F.dropout with the module's p and training=self.training, einsum, the mask built by comparing aranges
import torch
import torch.nn.functional as F
from torch import nn


class CausalAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, qkv_bias=False):
        super().__init__()
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.dropout = nn.Dropout(dropout)
        pos = torch.arange(context_length)
        self.register_buffer("mask", pos.unsqueeze(0) > pos.unsqueeze(1))

    def forward(self, x):
        n = x.size(-2)
        if n > self.mask.shape[-1]:
            raise ValueError("input longer than context_length")
        q, k, v = self.W_query(x), self.W_key(x), self.W_value(x)
        scores = torch.einsum("...id,...jd->...ij", q, k) / q.shape[-1] ** 0.5
        scores = scores.masked_fill(self.mask[:n, :n], float("-inf"))
        weights = F.dropout(F.softmax(scores, dim=-1), p=self.dropout.p, training=self.training)
        return torch.einsum("...ij,...jd->...id", weights, v)
