#: expect: full
#: about: d2l-style masked_softmax and a DotProductAttention helper class, heads folded into the batch with reshape
import math

import torch
from torch import nn


def masked_softmax(scores, blocked):
    if blocked is None:
        return torch.softmax(scores, dim=-1)
    scores = scores.masked_fill(blocked, -math.inf)
    row_dead = torch.isinf(scores).all(dim=-1, keepdim=True)
    return torch.softmax(scores.masked_fill(row_dead, 0), dim=-1).masked_fill(row_dead, 0)


class DotProductAttention:
    """Not a module: nothing to register, it only computes."""

    def __call__(self, q, k, v, blocked, dropout):
        weights = dropout(masked_softmax(q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1]), blocked))
        return weights @ v, weights


class MultiHeadedAttention(nn.Module):
    def __init__(self, d_model: int, num_heads: int, dropout: float = 0.0, bias: bool = True):
        super().__init__()
        if d_model % num_heads != 0:
            raise ValueError("num_heads must divide d_model")
        self.num_heads = num_heads
        self.W_query = nn.Linear(d_model, d_model, bias)
        self.W_key = nn.Linear(d_model, d_model, bias)
        self.W_value = nn.Linear(d_model, d_model, bias)
        self.out_proj = nn.Linear(d_model, d_model, bias)
        self.dropout = nn.Dropout(dropout)
        self.attention = DotProductAttention()
        self.attn = None

    def transpose_qkv(self, x):
        x = x.reshape(x.shape[0], x.shape[1], self.num_heads, -1)
        return x.permute(0, 2, 1, 3)

    def transpose_output(self, x):
        return x.permute(0, 2, 1, 3).reshape(x.shape[0], x.shape[2], -1)

    def forward(self, query, key, value, mask=None):
        if mask is not None and mask.ndim == 3:
            mask = mask.unsqueeze(-3)
        q = self.transpose_qkv(self.W_query(query))
        k = self.transpose_qkv(self.W_key(key))
        v = self.transpose_qkv(self.W_value(value))
        out, self.attn = self.attention(q, k, v, mask, self.dropout)
        return self.out_proj(self.transpose_output(out))


class PositionwiseFeedForward(nn.Module):
    def __init__(self, d_model, d_ff, dropout=0.0):
        super().__init__()
        self.linear1, self.linear2 = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)
        self.activation = nn.ReLU()

    def forward(self, x):
        return self.linear2(self.dropout(self.activation(self.linear1(x))))


class AddNorm(nn.Module):
    def __init__(self, d_model, dropout=0.0):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.norm = nn.LayerNorm(d_model)

    def forward(self, x, sublayer_out):
        residual = x + self.dropout(sublayer_out)
        return self.norm(residual)
