#: expect: loses
#: fails: [09-layer-padding-mask]
#: hint: [mask-not-passed]
#: about: EncoderLayer never passes the mask to self_attn (the mask argument is unused)
from functools import reduce

import torch
from torch import nn

from layers import MultiHeadedAttention as MHA
from layers import PositionwiseFeedForward as FFN


class EncoderLayer(nn.Module):
    def __init__(self, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.0):
        super().__init__()
        self.self_attn = MHA(d_model, num_heads, dropout)
        self.feed_forward = FFN(d_model, d_ff, dropout)
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, mask=None) -> torch.Tensor:
        steps = ((lambda t: self.self_attn(t, t, t), self.norm1),
                 (self.feed_forward, self.norm2))
        for sublayer, norm in steps:
            x = norm(x + self.drop(sublayer(x)))
        return x


class Encoder(nn.Module):
    def __init__(self, num_layers, d_model, num_heads, d_ff, dropout=0.0):
        super().__init__()
        self.layers = nn.ModuleList()
        for _ in range(num_layers):
            self.layers.append(EncoderLayer(d_model, num_heads, d_ff, dropout))

    def forward(self, x, mask=None):
        return reduce(lambda h, layer: layer(h, mask), self.layers, x)
