"""Exercise 04: self-attention with trainable weights (notes/01_attention.md §2-§3).

Queries, keys and values are three learned linear projections of the same
input; the output is softmax(Q K^T / sqrt(d_k)) V. Inputs are batch-first
(batch, n, d_in), and an unbatched (n, d_in) input must work too.
"""
import torch
from torch import nn


class SelfAttention(nn.Module):
    """Single-head scaled dot-product self-attention.

    Attributes (the tests look them up by name and copy weights into them):
        W_query, W_key, W_value: nn.Linear(d_in, d_out, bias=qkv_bias)
    """

    def __init__(self, d_in: int, d_out: int, qkv_bias: bool = False):
        """d_in: features per input token; d_out: size of queries, keys,
        values and of the output; qkv_bias: whether the three projections
        have a bias.

        Start with super().__init__(), then create the three layers as
        attributes (not in a plain Python list).
        """
        raise NotImplementedError("SelfAttention.__init__: create W_query, W_key and W_value; see README.md")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Self-attention of the tokens of `x` over each other.

        x:       (batch, n, d_in) or (n, d_in)
        returns: (batch, n, d_out) or (n, d_out)

        Scale the scores by 1/sqrt(d_k) (d_k = d_out) before the softmax over
        the last dim. Do not modify `x`.
        """
        raise NotImplementedError("SelfAttention.forward: see README.md, section 'The computation'")
