#: expect: loses
#: fails: [10-layer-causal]
#: hint: [mask-not-passed]
#: about: tgt_mask never reaches self_attn: the decoder sees the future
import torch
import torch.nn as tnn

from layers import MultiHeadedAttention as Attention
from layers import PositionwiseFeedForward as FeedForward


class DecoderLayer(tnn.Module):
    def __init__(self, d_model, num_heads, d_ff, dropout=0.0):
        super().__init__()
        self.self_attn = Attention(d_model, num_heads, dropout=dropout)
        self.cross_attn = Attention(d_model, num_heads, dropout=dropout)
        self.feed_forward = FeedForward(d_model, d_ff, dropout=dropout)
        self.norm1 = tnn.LayerNorm(d_model)
        self.norm2 = tnn.LayerNorm(d_model)
        self.norm3 = tnn.LayerNorm(d_model)
        self.dropout = tnn.Dropout(dropout)

    def forward(self, x: torch.Tensor, memory: torch.Tensor, tgt_mask=None, memory_mask=None):
        attended = self.self_attn(query=x, key=x, value=x)
        x = self.norm1(x + self.dropout(attended))
        consulted = self.cross_attn(query=x, key=memory, value=memory, mask=memory_mask)
        x = self.norm2(x + self.dropout(consulted))
        return self.norm3(x + self.dropout(self.feed_forward(x)))


class Decoder(tnn.Module):
    def __init__(self, num_layers, d_model, num_heads, d_ff, dropout=0.0):
        super().__init__()
        self.layers = tnn.ModuleList([DecoderLayer(d_model, num_heads, d_ff, dropout) for _ in range(num_layers)])

    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        for _, layer in enumerate(self.layers):
            x = layer(x, memory, tgt_mask=tgt_mask, memory_mask=memory_mask)
        return x
