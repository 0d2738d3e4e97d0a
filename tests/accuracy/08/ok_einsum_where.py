#: expect: full
#: about: einsum with a head axis, torch.where masking, mask lifted to 4-D by a helper, F.relu and F.layer_norm
import torch
import torch.nn.functional as fn
from torch import nn


def _as_4d(mask):
    if mask is None:
        return None
    return mask[:, None] if mask.dim() == 3 else mask


class MultiHeadedAttention(nn.Module):
    def __init__(self, d_model, num_heads, dropout=0.0, bias=True):
        super().__init__()
        if d_model % num_heads:
            raise ValueError(f"{num_heads} heads do not divide d_model={d_model}")
        self.h, self.hd = num_heads, d_model // num_heads
        self.W_query = nn.Linear(d_model, d_model, bias=bias)
        self.W_key = nn.Linear(d_model, d_model, bias=bias)
        self.W_value = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)
        self.attn = None

    def _heads(self, t):
        return t.unflatten(-1, (self.h, self.hd))  # (b, n, h, hd)

    def forward(self, query, key, value, mask=None):
        q, k, v = self._heads(self.W_query(query)), self._heads(self.W_key(key)), self._heads(self.W_value(value))
        scores = torch.einsum("bqhd,bkhd->bhqk", q, k) / self.hd ** 0.5
        mask = _as_4d(mask)
        if mask is not None:
            scores = torch.where(mask, torch.full_like(scores, float("-inf")), scores)
            empty = mask.all(-1, keepdim=True)
            scores = torch.where(empty, torch.zeros_like(scores), scores)
        weights = scores.softmax(-1)
        if mask is not None:
            weights = torch.where(empty, torch.zeros_like(weights), weights)
        self.attn = self.dropout(weights)
        out = torch.einsum("bhqk,bkhd->bqhd", self.attn, v).flatten(2)
        return self.out_proj(out)


class PositionwiseFeedForward(nn.Module):
    def __init__(self, d_model, d_ff, dropout=0.0):
        super().__init__()
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        hidden = fn.relu(self.linear1(x))
        return self.linear2(self.dropout(hidden))


class AddNorm(nn.Module):
    def __init__(self, d_model, dropout=0.0):
        super().__init__()
        self.norm = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, sublayer_out):
        n = self.norm
        return fn.layer_norm(x + self.dropout(sublayer_out), n.normalized_shape, n.weight, n.bias, n.eps)
