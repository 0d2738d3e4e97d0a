"""Exercise 09: the Transformer's encoder (post-norm, as in the paper).

`layers.py` in this folder is exercise 08's solution, working code you can
use: `MultiHeadedAttention(d_model, num_heads, dropout)` and
`PositionwiseFeedForward(d_model, d_ff, dropout)`.
Using `nn.TransformerEncoderLayer` / `nn.TransformerEncoder` is not allowed.
"""
import torch
from torch import nn

from layers import MultiHeadedAttention, PositionwiseFeedForward


class EncoderLayer(nn.Module):
    """One encoder layer: self-attention, then a feed-forward network, each
    followed by Add & Norm:

        x = norm1(x + dropout(self_attn(x, x, x, mask)))
        x = norm2(x + dropout(feed_forward(x)))
    """

    def __init__(self, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.0) -> None:
        """Create these sub-modules (the names are part of the contract):

        self_attn:    MultiHeadedAttention(d_model, num_heads, dropout)
        feed_forward: PositionwiseFeedForward(d_model, d_ff, dropout)
        norm1, norm2: two separate nn.LayerNorm(d_model), one per sublayer
        and an nn.Dropout(dropout) for the sublayers' outputs.
        """
        super().__init__()
        raise NotImplementedError("EncoderLayer.__init__: see README.md, section 'What to write'")

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """x:       (batch, n, d_model)
        mask:    bool, True where attention is blocked, broadcasting to
                 (batch, n, n); a padding mask is (batch, 1, n). Or None.
        returns: (batch, n, d_model)
        """
        raise NotImplementedError("EncoderLayer.forward: see README.md, section 'The formulas'")


class Encoder(nn.Module):
    """`num_layers` encoder layers applied one after the other."""

    def __init__(self, num_layers: int, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.0) -> None:
        """self.layers: an nn.ModuleList of `num_layers` separate EncoderLayer
        objects (each with its own weights)."""
        super().__init__()
        raise NotImplementedError("Encoder.__init__: see README.md, section 'What to write'")

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """x (batch, n, d_model) -> (batch, n, d_model); every layer gets the same mask."""
        raise NotImplementedError("Encoder.forward: see README.md, section 'What to write'")
