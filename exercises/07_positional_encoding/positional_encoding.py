"""Exercise 07: sinusoidal positional encoding.

Write the table of the paper (notes/02_sequence_models.md §4), a module that adds it to its
input, and the matrix that shifts every position by the same amount.
See README.md for the formulas, shapes and a worked example.
"""
import math  # noqa: F401  (math.log may help)

import torch
from torch import nn


def sinusoidal_table(max_len: int, d_model: int) -> torch.Tensor:
    """The sinusoidal positional-encoding table.

    returns: float32 tensor of shape (max_len, d_model) with
             PE[p, 2i]   = sin(p / 10000^(2i / d_model))
             PE[p, 2i+1] = cos(p / 10000^(2i / d_model))
             for p = 0 .. max_len-1. An odd d_model is allowed: the last
             column is then a sine without its cosine partner.
    """
    raise NotImplementedError("sinusoidal_table(max_len, d_model): see README.md, section 'The table'")


class PositionalEncoding(nn.Module):
    """Adds the sinusoidal table to its input, then applies dropout.

    Attributes to create in __init__:
        pe:      a registered buffer (self.register_buffer), shape
                 (1, max_len, d_model), holding sinusoidal_table(max_len, d_model)
        dropout: nn.Dropout(dropout)
    """

    def __init__(self, d_model: int, dropout: float = 0.0, max_len: int = 5000):
        super().__init__()
        raise NotImplementedError("PositionalEncoding.__init__: see README.md, section 'The module'")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x: (batch, n, d_model) with n <= max_len  ->  dropout(x + pe[:, :n]),
        same shape. n > max_len raises ValueError. Do not modify x in place."""
        raise NotImplementedError("PositionalEncoding.forward: see README.md, section 'The module'")


def relative_shift(delta: int, d_model: int) -> torch.Tensor:
    """The matrix that moves every row of the table by `delta` positions.

    returns: float32 tensor M of shape (d_model, d_model) such that
             sinusoidal_table(L, d_model)[p + delta] == sinusoidal_table(L, d_model)[p] @ M.T
             for every position p (M does not depend on p). M is block
             diagonal: one 2x2 rotation per (sin, cos) column pair.
             An odd d_model raises ValueError (README.md says why).
    """
    raise NotImplementedError("relative_shift(delta, d_model): see README.md, section 'Relative positions'")
