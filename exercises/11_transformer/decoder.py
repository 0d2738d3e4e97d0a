"""Exercise 10, reference solution: the decoder (post-norm, as in the paper)."""
import torch
from torch import nn

from layers import MultiHeadedAttention, PositionwiseFeedForward


class DecoderLayer(nn.Module):
    """Masked self-attention, cross-attention over the encoder's output,
    then a feed-forward network; each followed by Add & Norm."""

    def __init__(self, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.self_attn = MultiHeadedAttention(d_model, num_heads, dropout)
        # A second attention with its own weights: it compares decoder
        # positions with encoder positions, a different job from self_attn.
        self.cross_attn = MultiHeadedAttention(d_model, num_heads, dropout)
        self.feed_forward = PositionwiseFeedForward(d_model, d_ff, dropout)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.norm3 = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, memory: torch.Tensor,
                tgt_mask: torch.Tensor | None = None, memory_mask: torch.Tensor | None = None) -> torch.Tensor:
        """x (b, n_tgt, d_model) the decoder's input; memory (b, n_src, d_model)
        the encoder's output. tgt_mask blocks future (and padded) targets,
        memory_mask padded sources; both bool, True = blocked."""
        # Sublayer 1: each target position sees itself and earlier positions.
        x = self.norm1(x + self.dropout(self.self_attn(x, x, x, tgt_mask)))
        # Sublayer 2: queries from the decoder, keys and values from the
        # encoder, so the output keeps the decoder's length n_tgt. (Figures that
        # list the inputs as V, K, Q are easy to read backwards.)
        x = self.norm2(x + self.dropout(self.cross_attn(x, memory, memory, memory_mask)))  # (b, n_tgt, d_model)
        # Sublayer 3: the position-wise feed-forward network.
        return self.norm3(x + self.dropout(self.feed_forward(x)))  # (b, n_tgt, d_model)


class Decoder(nn.Module):
    """A stack of num_layers decoder layers; each one attends to the same memory."""

    def __init__(self, num_layers: int, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.layers = nn.ModuleList(DecoderLayer(d_model, num_heads, d_ff, dropout) for _ in range(num_layers))

    def forward(self, x: torch.Tensor, memory: torch.Tensor,
                tgt_mask: torch.Tensor | None = None, memory_mask: torch.Tensor | None = None) -> torch.Tensor:
        """x (b, n_tgt, d_model), memory (b, n_src, d_model) -> (b, n_tgt, d_model)."""
        for layer in self.layers:
            x = layer(x, memory, tgt_mask, memory_mask)
        return x
