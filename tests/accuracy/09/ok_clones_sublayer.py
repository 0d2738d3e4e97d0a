#: expect: full
#: about: annotated-transformer clones() (deepcopy of a prototype layer) and a sublayer helper taking a lambda
import copy

import torch.nn as nn

from layers import MultiHeadedAttention, PositionwiseFeedForward


def clones(module, N):
    return nn.ModuleList([copy.deepcopy(module) for _ in range(N)])


class EncoderLayer(nn.Module):
    def __init__(self, d_model, num_heads, d_ff, dropout=0.0):
        super().__init__()
        self.self_attn = MultiHeadedAttention(d_model, num_heads, dropout)
        self.feed_forward = PositionwiseFeedForward(d_model, d_ff, dropout)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def _sublayer(self, x, norm, fn):
        return norm(x + self.dropout(fn(x)))

    def forward(self, x, mask=None):
        x = self._sublayer(x, self.norm1, lambda t: self.self_attn(t, t, t, mask))
        return self._sublayer(x, self.norm2, self.feed_forward)


class Encoder(nn.Module):
    def __init__(self, num_layers, d_model, num_heads, d_ff, dropout=0.0):
        super().__init__()
        self.layers = clones(EncoderLayer(d_model, num_heads, d_ff, dropout), num_layers)

    def forward(self, x, mask=None):
        for layer in self.layers:
            x = layer(x, mask)
        return x
