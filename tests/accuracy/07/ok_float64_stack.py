#: expect: full
#: about: angles in float64, sin/cos interleaved with stack + flatten (cut to d_model for odd sizes), the shift with torch.block_diag
import math

import torch
import torch.nn as nn


def _frequencies(d_model):
    return torch.exp(torch.arange(0, d_model, 2, dtype=torch.float64) * (-math.log(10000.0) / d_model))


def sinusoidal_table(max_len, d_model):
    angles = torch.arange(max_len, dtype=torch.float64)[:, None] * _frequencies(d_model)[None, :]
    table = torch.stack((angles.sin(), angles.cos()), dim=-1).flatten(1)
    return table[:, :d_model].to(torch.float32)


class PositionalEncoding(nn.Module):
    def __init__(self, d_model, dropout=0.0, max_len=5000):
        super().__init__()
        self.register_buffer("pe", sinusoidal_table(max_len, d_model).unsqueeze(0), persistent=True)
        self.dropout = nn.Dropout(dropout)
        self.max_len = max_len

    def forward(self, x):
        n = x.size(1)
        if n > self.max_len:
            raise ValueError(f"{n} positions, the table has {self.max_len}")
        return self.dropout(x + self.pe[:, :n])


def relative_shift(delta, d_model):
    if d_model % 2 != 0:
        raise ValueError("relative_shift needs an even d_model")
    theta = delta * _frequencies(d_model)
    blocks = [torch.stack([torch.stack([t.cos(), t.sin()]), torch.stack([-t.sin(), t.cos()])]) for t in theta]
    return torch.block_diag(*blocks).float()
