"""Exercise 17: grouped-query attention (GQA) and multi-query attention (MQA).

`multihead.py` next to this file is exercise 06's reference (with
`causal_attention.py`, which it imports): working code you can use
(`split_heads`, `merge_heads`, and `MultiHeadAttention` to compare with).
Do not edit them.

Calling a built-in attention (`F.scaled_dot_product_attention`,
`nn.MultiheadAttention`, `nn.TransformerEncoderLayer` /
`nn.TransformerDecoderLayer`) is not allowed here; `torch.softmax` is.
"""
import math  # noqa: F401  (you will probably want math.sqrt)

import torch
from torch import nn

from multihead import merge_heads, split_heads  # noqa: F401  (working code from exercise 06)

KVPair = tuple[torch.Tensor, torch.Tensor]


def repeat_kv(x: torch.Tensor, n_rep: int) -> torch.Tensor:
    """Copy every key/value head for the query heads it serves.

    x:       (b, g, n, hd), g key/value heads
    returns: (b, g * n_rep, n, hd); head j of x becomes heads
             j * n_rep, j * n_rep + 1, ..., (j + 1) * n_rep - 1
             (each head next to its own copies: 0, 0, 1, 1, not 0, 1, 0, 1)

    Do not modify `x` in place.
    """
    raise NotImplementedError("repeat_kv(x, n_rep): see README.md, section 'What to write'")


def cache_bytes_per_token(num_layers: int, num_kv_heads: int, head_dim: int,
                          dtype: torch.dtype = torch.float16) -> int:
    """The bytes one more token of ONE sequence adds to the KV cache of a
    model of `num_layers` GroupedQueryAttention layers whose cache stores
    numbers of `dtype` (the README's formula)."""
    raise NotImplementedError("cache_bytes_per_token: see README.md, section 'How much the cache saves'")


class GroupedQueryAttention(nn.Module):
    """Causal self-attention whose num_heads query heads share num_kv_heads
    key/value heads (README.md, 'What to write', lists the attribute names)."""

    def __init__(self, d_in: int, d_out: int, context_length: int, dropout: float, num_heads: int,
                 num_kv_heads: int, qkv_bias: bool = False):
        """raises ValueError when d_out is not divisible by num_heads, or
        num_heads is not a multiple of num_kv_heads."""
        super().__init__()
        raise NotImplementedError("GroupedQueryAttention.__init__: see README.md, section 'What to write'")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x (b, n, d_in) with n <= context_length -> (b, n, d_out); raises
        ValueError when n > context_length."""
        raise NotImplementedError("GroupedQueryAttention.forward: see README.md, section 'What to write'")

    def forward_cached(self, x: torch.Tensor, past_kv: KVPair | None = None) -> tuple[torch.Tensor, KVPair]:
        """x:       (b, n, d_in), the new tokens, after the t positions in past_kv
        past_kv: None (t = 0), or (keys, values), each (b, num_kv_heads, t, head_dim)
        returns: (output, (keys, values)): the new tokens' outputs (b, n, d_out),
                 equal to forward() of all t + n tokens at these positions, and
                 the keys and values of all t + n positions, each
                 (b, num_kv_heads, t + n, head_dim): not repeated
        raises ValueError when t + n > context_length
        Do not modify x or past_kv in place.
        """
        raise NotImplementedError("GroupedQueryAttention.forward_cached: see README.md, section 'The cache'")
