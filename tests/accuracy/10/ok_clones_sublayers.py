#: expect: full
#: about: annotated-transformer DecoderLayer shape: a SublayerConnection-like helper, lambdas, clones() for the stack
import copy

from torch import nn

from layers import MultiHeadedAttention, PositionwiseFeedForward


def clones(module, n):
    return nn.ModuleList(copy.deepcopy(module) for _ in range(n))


class DecoderLayer(nn.Module):
    def __init__(self, d_model, num_heads, d_ff, dropout=0.0):
        super().__init__()
        self.self_attn = MultiHeadedAttention(d_model, num_heads, dropout)
        self.cross_attn = MultiHeadedAttention(d_model, num_heads, dropout)
        self.feed_forward = PositionwiseFeedForward(d_model, d_ff, dropout)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.norm3 = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def sublayer(self, x, norm, fn):
        return norm(x + self.dropout(fn(x)))

    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        m = memory
        x = self.sublayer(x, self.norm1, lambda x: self.self_attn(x, x, x, tgt_mask))
        x = self.sublayer(x, self.norm2, lambda x: self.cross_attn(x, m, m, memory_mask))
        return self.sublayer(x, self.norm3, self.feed_forward)


class Decoder(nn.Module):
    def __init__(self, num_layers, d_model, num_heads, d_ff, dropout=0.0):
        super().__init__()
        self.layers = clones(DecoderLayer(d_model, num_heads, d_ff, dropout), num_layers)

    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        for layer in self.layers:
            x = layer(x, memory, tgt_mask, memory_mask)
        return x
