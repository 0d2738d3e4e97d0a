"""Exercise 03: masks and scaled dot-product attention.

Course convention: a boolean mask is True where attention is BLOCKED.
(`torch.nn.functional.scaled_dot_product_attention` uses the opposite sense,
True = allowed; it and `nn.MultiheadAttention` may not be used here.)
"""
from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn


def causal_mask(seq_len: int, device: torch.device | str | None = None) -> torch.Tensor:
    """The causal ("look-ahead") mask for a sequence of `seq_len` tokens.

    seq_len: number of tokens (>= 1)
    device:  where to create the mask (for example `x.device`); None means
             PyTorch's default device
    returns: bool tensor (seq_len, seq_len); entry [i, j] is True when query
             i may NOT look at key j, i.e. when j > i (strictly above the
             diagonal). A token always sees itself.
    """
    raise NotImplementedError("causal_mask(seq_len, device): see README.md, section 'What to write'")


def padding_mask(lengths: torch.Tensor | Sequence[int], seq_len: int) -> torch.Tensor:
    """The padding mask of a batch of sequences padded to `seq_len`.

    lengths: the true length of each sequence, shape (batch,): a 1-D integer
             tensor or a list of ints, each between 0 and seq_len
    seq_len: the padded length
    returns: bool tensor (batch, seq_len), True at the padding positions
             (position >= lengths[b]), on the same device as `lengths`.
             Do not modify `lengths`.
    """
    raise NotImplementedError("padding_mask(lengths, seq_len): see README.md, section 'What to write'")


def scaled_dot_product_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    mask: torch.Tensor | None = None,
    dropout: nn.Module | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """softmax(Q K^T / sqrt(d_k)) V, with an optional mask and dropout.

    query:   (..., n_q, d_k)   any number of leading (batch, head) dims
    key:     (..., n_k, d_k)   n_k may differ from n_q
    value:   (..., n_k, d_v)   d_v may differ from d_k
    mask:    bool, True = blocked, broadcastable to the scores (..., n_q, n_k);
             or None. Blocked scores become -inf (not -1e9) before the
             softmax; a query whose keys are all blocked gets all-zero
             weights (not NaN) and a finite gradient.
    dropout: an nn.Module applied to the weights after the softmax (for
             example nn.Dropout(0.1)), or None
    returns: (output (..., n_q, d_v), weights (..., n_q, n_k)); the weights
             are those multiplied with `value`, i.e. after dropout.

    Do not modify the inputs in place.
    """
    raise NotImplementedError("scaled_dot_product_attention(query, key, value, mask, dropout): see README.md, section 'What to write'")
