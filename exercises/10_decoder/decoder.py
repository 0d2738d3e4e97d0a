"""Exercise 10: the Transformer's decoder (post-norm, as in the paper).

`layers.py` in this folder is exercise 08's solution, working code you can
use: `MultiHeadedAttention(d_model, num_heads, dropout)` (its forward is
`(query, key, value, mask=None)`) and `PositionwiseFeedForward(d_model, d_ff, dropout)`.
Using `nn.TransformerDecoderLayer` / `nn.TransformerDecoder` is not allowed.
"""
import torch
from torch import nn

from layers import MultiHeadedAttention, PositionwiseFeedForward


class DecoderLayer(nn.Module):
    """One decoder layer: masked self-attention, cross-attention over the
    encoder's output `memory`, then a feed-forward network; each followed by
    Add & Norm:

        x = norm1(x + dropout(self_attn(x, x, x, tgt_mask)))
        x = norm2(x + dropout(cross_attn(x, memory, memory, memory_mask)))
        x = norm3(x + dropout(feed_forward(x)))
    """

    def __init__(self, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.0) -> None:
        """Create these sub-modules (the names are part of the contract):

        self_attn, cross_attn: two separate MultiHeadedAttention(d_model, num_heads, dropout)
        feed_forward:          PositionwiseFeedForward(d_model, d_ff, dropout)
        norm1, norm2, norm3:   three separate nn.LayerNorm(d_model)
        and an nn.Dropout(dropout) for the sublayers' outputs.
        """
        super().__init__()
        raise NotImplementedError("DecoderLayer.__init__: see README.md, section 'What to write'")

    def forward(self, x: torch.Tensor, memory: torch.Tensor,
                tgt_mask: torch.Tensor | None = None, memory_mask: torch.Tensor | None = None) -> torch.Tensor:
        """x:           (batch, n_tgt, d_model), the decoder's input
        memory:      (batch, n_src, d_model), the encoder's output
        tgt_mask:    bool, True = blocked, broadcasting to (batch, n_tgt, n_tgt):
                     the causal mask (n_tgt, n_tgt), possibly with target padding
        memory_mask: bool, True = blocked, broadcasting to (batch, n_tgt, n_src):
                     source padding, (batch, 1, n_src)
        returns:     (batch, n_tgt, d_model)
        """
        raise NotImplementedError("DecoderLayer.forward: see README.md, section 'The formulas'")


class Decoder(nn.Module):
    """`num_layers` decoder layers applied one after the other."""

    def __init__(self, num_layers: int, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.0) -> None:
        """self.layers: an nn.ModuleList of `num_layers` separate DecoderLayer
        objects (each with its own weights)."""
        super().__init__()
        raise NotImplementedError("Decoder.__init__: see README.md, section 'What to write'")

    def forward(self, x: torch.Tensor, memory: torch.Tensor,
                tgt_mask: torch.Tensor | None = None, memory_mask: torch.Tensor | None = None) -> torch.Tensor:
        """x (batch, n_tgt, d_model), memory (batch, n_src, d_model) -> (batch, n_tgt, d_model).
        Every layer gets the same memory and masks."""
        raise NotImplementedError("Decoder.forward: see README.md, section 'What to write'")
