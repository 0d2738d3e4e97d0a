"""Exercise 06: multi-head attention.

Write the four pieces below. `causal_attention.py` next to this file is a
working CausalAttention (the reference of exercise 05): use it for the
wrapper and do not edit it.

Calling a built-in attention (`F.scaled_dot_product_attention`,
`nn.MultiheadAttention`) is not allowed here; `torch.softmax` is.
"""
import math  # noqa: F401  (you will probably want math.sqrt)

import torch
from torch import nn

from causal_attention import CausalAttention  # noqa: F401  (for the wrapper)


def split_heads(x: torch.Tensor, num_heads: int) -> torch.Tensor:
    """Cut the features of every token into `num_heads` heads.

    x:       (b, n, d), d divisible by num_heads
    returns: (b, num_heads, n, d // num_heads); head i of token t holds
             x[:, t, i*hd:(i+1)*hd] with hd = d // num_heads
    raises:  ValueError if d is not divisible by num_heads

    Do not modify `x` in place.
    """
    raise NotImplementedError("split_heads(x, num_heads): see README.md, section 'What to write'")


def merge_heads(x: torch.Tensor) -> torch.Tensor:
    """The inverse of split_heads.

    x:       (b, h, n, hd)
    returns: (b, n, h * hd), with merge_heads(split_heads(y, h)) == y
    """
    raise NotImplementedError("merge_heads(x): see README.md, section 'What to write'")


class MultiHeadAttentionWrapper(nn.Module):
    """`num_heads` independent CausalAttention heads whose outputs are
    concatenated along the features.

    Attributes: `heads`, an nn.ModuleList of `num_heads` CausalAttention
    modules, each CausalAttention(d_in, d_out, context_length, dropout, qkv_bias).
    """

    def __init__(self, d_in: int, d_out: int, context_length: int, dropout: float, num_heads: int,
                 qkv_bias: bool = False):
        super().__init__()
        raise NotImplementedError("MultiHeadAttentionWrapper.__init__: see README.md, section 'The wrapper'")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x (b, n, d_in), n <= context_length -> (b, n, num_heads * d_out)."""
        raise NotImplementedError("MultiHeadAttentionWrapper.forward: see README.md, section 'The wrapper'")


class MultiHeadAttention(nn.Module):
    """Causal multi-head self-attention with one projection per role.

    Attributes:
      W_query, W_key, W_value: nn.Linear(d_in, d_out, bias=qkv_bias)
      out_proj: nn.Linear(d_out, d_out), always with a bias
      dropout:  nn.Dropout(dropout), on the attention weights
      mask:     registered bool buffer (context_length, context_length),
                True above the diagonal (blocked)
    raises: ValueError if d_out is not divisible by num_heads
    """

    def __init__(self, d_in: int, d_out: int, context_length: int, dropout: float, num_heads: int,
                 qkv_bias: bool = False):
        super().__init__()
        raise NotImplementedError("MultiHeadAttention.__init__: see README.md, section 'MultiHeadAttention'")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x (b, n, d_in) -> (b, n, d_out).

        n <= context_length (a longer input raises ValueError). Each head
        attends causally with scale 1/sqrt(d_out // num_heads); dropout acts
        on the weights after the softmax, in training mode only; the merged
        heads go through out_proj.
        """
        raise NotImplementedError("MultiHeadAttention.forward: see README.md, section 'MultiHeadAttention'")
