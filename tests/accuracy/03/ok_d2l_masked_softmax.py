#: expect: full
#: about: d2l-style masked_softmax helper (with -inf and zero rows), comparison-built masks
import math

import torch
import torch.nn.functional as F


def causal_mask(seq_len, device=None):
    idx = torch.arange(seq_len, device=device)
    return idx[None, :] > idx[:, None]


def padding_mask(lengths, seq_len):
    if not torch.is_tensor(lengths):
        lengths = torch.tensor(lengths, dtype=torch.long)
    return torch.arange(seq_len, device=lengths.device)[None, :] >= lengths[:, None]


def masked_softmax(scores, mask):
    """Softmax over the last axis that ignores blocked entries; rows with
    nothing allowed come out as zeros."""
    if mask is None:
        return F.softmax(scores, dim=-1)
    scores = scores.masked_fill(mask, float("-inf"))
    dead = torch.isneginf(scores).all(dim=-1, keepdim=True)
    weights = F.softmax(scores.masked_fill(dead, 0.0), dim=-1)
    return weights.masked_fill(dead, 0.0)


def scaled_dot_product_attention(query, key, value, mask=None, dropout=None):
    d = query.shape[-1]
    scores = torch.matmul(query, key.transpose(-2, -1)) / math.sqrt(d)
    weights = masked_softmax(scores, mask)
    if dropout is not None:
        weights = dropout(weights)
    return torch.matmul(weights, value), weights
