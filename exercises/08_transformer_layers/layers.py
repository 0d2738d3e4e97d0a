"""Exercise 08: the Transformer's building blocks.

Multi-head attention (for self- and cross-attention), the position-wise
feed-forward network and Add & Norm. Exercises 09-11 build the encoder, the
decoder and the whole Transformer from these three classes.

Not allowed here: F.scaled_dot_product_attention and nn.MultiheadAttention
(the tests use the latter as the oracle). See README.md for shapes, masks
and a worked example.
"""
import math  # noqa: F401  (math.sqrt may help)

import torch
from torch import nn


def _attend(query, key, value, mask=None, dropout=None):
    """A helper you may write and use (or inline): scaled dot-product
    attention over (batch, heads, n, head_dim) tensors.

    query:   (b, h, n_q, d_k)     key: (b, h, n_k, d_k)     value: (b, h, n_k, d_v)
    mask:    bool, True where attention is blocked; broadcasts to (b, h, n_q, n_k)
    dropout: an nn.Dropout applied to the weights after the softmax, or None
    returns: (output (b, h, n_q, d_v), weights (b, h, n_q, n_k)); a query
             whose keys are all blocked gets all-zero weights, not NaN.
    """
    raise NotImplementedError("_attend: see README.md, section 'Scaled dot-product attention, per head'")


class MultiHeadedAttention(nn.Module):
    """Multi-head attention with one projection per role for all heads.

    Attributes to create in __init__ (names are part of the contract):
        W_query, W_key, W_value, out_proj: nn.Linear(d_model, d_model, bias=bias)
        dropout: nn.Dropout(dropout), on the attention weights
        attn:    None until the first forward; then the last attention
                 weights, (batch, num_heads, n_q, n_k)
    d_model % num_heads != 0 raises ValueError.
    """

    def __init__(self, d_model: int, num_heads: int, dropout: float = 0.0, bias: bool = True):
        super().__init__()
        raise NotImplementedError("MultiHeadedAttention.__init__: see README.md, section 'MultiHeadedAttention'")

    def forward(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                mask: torch.Tensor | None = None) -> torch.Tensor:
        """query (b, n_q, d_model); key and value (b, n_k, d_model).

        mask: bool, True = blocked, or None. (n_q, n_k) is shared by the whole
              batch; (b, n_q, n_k) or (b, 1, n_k) is per batch element and
              shared by all heads; a 4-D mask (b, 1 or h, n_q, n_k) is used as is.
        returns: (b, n_q, d_model); stores the weights in self.attn.
        """
        raise NotImplementedError("MultiHeadedAttention.forward: see README.md, section 'MultiHeadedAttention'")


class PositionwiseFeedForward(nn.Module):
    """linear2(dropout(relu(linear1(x)))), the same MLP at every position.

    Attributes: linear1 = nn.Linear(d_model, d_ff), linear2 = nn.Linear(d_ff, d_model),
                dropout = nn.Dropout(dropout).
    """

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0):
        super().__init__()
        raise NotImplementedError("PositionwiseFeedForward.__init__: see README.md, section 'PositionwiseFeedForward'")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x (b, n, d_model) -> (b, n, d_model)."""
        raise NotImplementedError("PositionwiseFeedForward.forward: see README.md, section 'PositionwiseFeedForward'")


class AddNorm(nn.Module):
    """The post-norm residual connection: LayerNorm(x + Dropout(sublayer_out)).

    Attributes: norm = nn.LayerNorm(d_model), dropout = nn.Dropout(dropout).
    """

    def __init__(self, d_model: int, dropout: float = 0.0):
        super().__init__()
        raise NotImplementedError("AddNorm.__init__: see README.md, section 'AddNorm'")

    def forward(self, x: torch.Tensor, sublayer_out: torch.Tensor) -> torch.Tensor:
        """x: the sublayer's input, sublayer_out: its output, both (b, n, d_model).
        returns: (b, n, d_model)."""
        raise NotImplementedError("AddNorm.forward: see README.md, section 'AddNorm'")
