#: expect: loses
#: fails: [03-dropout-train, 03-dropout-placement]
#: about: returns the weights from before dropout, not the ones multiplied with value
"""Exercise 03, a submission: masks and scaled dot-product attention.

Mask convention of the course: True means "blocked" (may not attend).
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import nn


def causal_mask(seq_len: int, device: torch.device | str | None = None) -> torch.Tensor:
    """(seq_len, seq_len) bool mask, True strictly above the diagonal."""
    # Query i may look at keys 0..i, so key j is blocked when j > i: the
    # part strictly above the diagonal. The diagonal itself stays visible.
    ones = torch.ones(seq_len, seq_len, dtype=torch.bool, device=device)
    return torch.triu(ones, diagonal=1)


def padding_mask(lengths: torch.Tensor | Sequence[int], seq_len: int) -> torch.Tensor:
    """(batch, seq_len) bool mask, True at positions >= the sequence's length."""
    lengths = torch.as_tensor(lengths)
    positions = torch.arange(seq_len, device=lengths.device)  # (seq_len,)
    # (seq_len,) against (batch, 1) broadcasts to (batch, seq_len): each row
    # compares every position with its own sequence's length.
    return positions >= lengths.unsqueeze(-1)                 # (batch, seq_len)


def scaled_dot_product_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    mask: torch.Tensor | None = None,
    dropout: nn.Module | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """softmax(Q K^T / sqrt(d_k)) V over the last two dimensions.

    query (..., n_q, d_k), key (..., n_k, d_k), value (..., n_k, d_v);
    mask: bool, True = blocked, broadcastable to (..., n_q, n_k).
    Returns (output (..., n_q, d_v), weights (..., n_q, n_k)); the weights
    are the ones actually used, i.e. after dropout.
    """
    d_k = query.size(-1)
    # Dot products of d_k-dimensional vectors grow like sqrt(d_k); dividing
    # by it keeps the softmax away from saturation (and vanishing gradients).
    scores = query @ key.transpose(-2, -1) / math.sqrt(d_k)   # (..., n_q, n_k)
    if mask is not None:
        # Mask *before* the softmax: exp(-inf) is exactly 0, so blocked keys
        # get no weight and the visible ones still sum to one. (-1e9 would
        # not be exact, and does not even fit in float16.)
        scores = scores.masked_fill(mask, float("-inf"))
    # A query whose keys are all blocked has a row of -inf, where softmax
    # computes 0/0 = NaN. Such a query attends to nothing: give the softmax
    # a finite row, then zero its weights (so the gradient is zero, too).
    blocked_row = torch.isneginf(scores).all(dim=-1, keepdim=True)  # (..., n_q, 1)
    weights = torch.softmax(scores.masked_fill(blocked_row, 0.0), dim=-1)
    weights = weights.masked_fill(blocked_row, 0.0)           # (..., n_q, n_k)
    if dropout is not None:
        # Dropout acts on the weights, after the softmax; an nn.Dropout does
        # nothing in eval mode.
        return dropout(weights) @ value, weights
    return weights @ value, weights                           # (..., n_q, d_v)
