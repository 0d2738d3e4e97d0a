"""Exercise 10, reference solution: the decoder (post-norm, as in the paper)."""
from torch import nn

from layers import MultiHeadedAttention, PositionwiseFeedForward


class DecoderLayer(nn.Module):
    """Masked self-attention, cross-attention over the encoder's output,
    then a feed-forward network; each followed by Add & Norm."""

    def __init__(self, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.0):
        super().__init__()
        self.self_attn = MultiHeadedAttention(d_model, num_heads, dropout)
        self.cross_attn = MultiHeadedAttention(d_model, num_heads, dropout)
        self.feed_forward = PositionwiseFeedForward(d_model, d_ff, dropout)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.norm3 = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        """x (b, n_tgt, d_model) the decoder's input; memory (b, n_src, d_model)
        the encoder's output. tgt_mask blocks future (and padded) targets,
        memory_mask padded sources; both bool, True = blocked."""
        x = self.norm1(x + self.dropout(self.self_attn(x, x, x, tgt_mask)))
        # Queries from the decoder, keys and values from the encoder.
        x = self.norm2(x + self.dropout(self.cross_attn(x, memory, memory, memory_mask)))
        return self.norm3(x + self.dropout(self.feed_forward(x)))


class Decoder(nn.Module):
    """A stack of num_layers decoder layers."""

    def __init__(self, num_layers: int, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.0):
        super().__init__()
        self.layers = nn.ModuleList(DecoderLayer(d_model, num_heads, d_ff, dropout) for _ in range(num_layers))

    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        for layer in self.layers:
            x = layer(x, memory, tgt_mask, memory_mask)
        return x
