#: expect: full
#: about: Add & Norm through F.layer_norm with the registered norms' parameters, F.dropout with training=self.training
import torch.nn.functional as F
from torch import nn

from layers import MultiHeadedAttention, PositionwiseFeedForward


class EncoderLayer(nn.Module):
    def __init__(self, d_model, num_heads, d_ff, dropout=0.0):
        super().__init__()
        self.self_attn = MultiHeadedAttention(d_model, num_heads, dropout)
        self.feed_forward = PositionwiseFeedForward(d_model, d_ff, dropout)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def _add_norm(self, x, out, norm):
        out = F.dropout(out, self.dropout.p, training=self.training)
        return F.layer_norm(x + out, norm.normalized_shape, norm.weight, norm.bias, norm.eps)

    def forward(self, x, mask=None):
        h = self._add_norm(x, self.self_attn(x, x, x, mask), self.norm1)
        return self._add_norm(h, self.feed_forward(h), self.norm2)


class Encoder(nn.Module):
    def __init__(self, num_layers, d_model, num_heads, d_ff, dropout=0.0):
        super().__init__()
        self.layers = nn.ModuleList([EncoderLayer(d_model, num_heads, d_ff, dropout) for i in range(num_layers)])

    def forward(self, x, mask=None):
        out = x
        for i in range(len(self.layers)):
            out = self.layers[i](out, mask=mask)
        return out
