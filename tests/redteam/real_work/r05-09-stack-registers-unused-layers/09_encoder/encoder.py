"""A right EncoderLayer; an Encoder that registers its layers as asked and never runs them."""
import torch
from torch import nn

from layers import MultiHeadedAttention, PositionwiseFeedForward


class EncoderLayer(nn.Module):
    """Self-attention, then a feed-forward network, each followed by
    Add & Norm with its own LayerNorm."""

    def __init__(self, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.self_attn = MultiHeadedAttention(d_model, num_heads, dropout)
        self.feed_forward = PositionwiseFeedForward(d_model, d_ff, dropout)
        # One LayerNorm per sublayer: each learns its own scale and shift.
        # (Seed 003 reuses a single self.norm for both.)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        # Dropout has no parameters, so one module serves both sublayers.
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """x (b, n, d_model); mask: bool, True = blocked (e.g. padding, (b, 1, n))."""
        # Sublayer 1: every position attends to every (unmasked) position.
        x = self.norm1(x + self.dropout(self.self_attn(x, x, x, mask)))  # (b, n, d_model)
        # Sublayer 2: the same small MLP on each position separately.
        return self.norm2(x + self.dropout(self.feed_forward(x)))  # (b, n, d_model)


class Encoder(nn.Module):
    """A stack of num_layers encoder layers, each with its own weights."""

    def __init__(self, num_layers: int, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.0) -> None:
        super().__init__()
        # nn.ModuleList, not a Python list: parameters(), state_dict(), .to()
        # and .eval() only see registered sub-modules.
        self.layers = nn.ModuleList(EncoderLayer(d_model, num_heads, d_ff, dropout) for _ in range(num_layers))

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """x (b, n, d_model) -> (b, n, d_model); the same mask for every layer."""
        return x.clone()  # the registered layers are never used
