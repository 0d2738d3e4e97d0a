#: expect: full
#: about: nn.TransformerDecoderLayer's layout: dropout1..3, one per sublayer, beside the contract's dropout
from torch import nn

from layers import MultiHeadedAttention, PositionwiseFeedForward


class DecoderLayer(nn.Module):
    def __init__(self, d_model, num_heads, d_ff, dropout=0.0):
        super().__init__()
        self.self_attn = MultiHeadedAttention(d_model, num_heads, dropout)
        self.cross_attn = MultiHeadedAttention(d_model, num_heads, dropout)
        self.feed_forward = PositionwiseFeedForward(d_model, d_ff, dropout)
        self.norm1, self.norm2, self.norm3 = (nn.LayerNorm(d_model) for _ in range(3))
        self.dropout = nn.Dropout(dropout)
        self.dropout1, self.dropout2, self.dropout3 = (nn.Dropout(dropout) for _ in range(3))

    def _sa_block(self, x, mask):
        return self.dropout1(self.self_attn(x, x, x, mask))

    def _mha_block(self, x, mem, mask):
        return self.dropout2(self.cross_attn(x, mem, mem, mask))

    def _ff_block(self, x):
        return self.dropout3(self.feed_forward(x))

    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        x = self.norm1(x + self._sa_block(x, tgt_mask))
        x = self.norm2(x + self._mha_block(x, memory, memory_mask))
        return self.norm3(x + self._ff_block(x))


class Decoder(nn.Module):
    def __init__(self, num_layers, d_model, num_heads, d_ff, dropout=0.0):
        super().__init__()
        self.layers = nn.ModuleList([DecoderLayer(d_model, num_heads, d_ff, dropout) for _ in range(num_layers)])

    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        for layer in self.layers:
            x = layer(x, memory, tgt_mask, memory_mask)
        return x
