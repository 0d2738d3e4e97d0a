#: expect: full
#: about: the table built with numpy (float64) and converted with torch.from_numpy(...).float(); the shift from numpy blocks
import numpy as np
import torch
from torch import nn


def sinusoidal_table(max_len, d_model):
    pos = np.arange(max_len)[:, np.newaxis]
    i = np.arange(d_model)[np.newaxis, :]
    angle_rates = 1 / np.power(10000, (2 * (i // 2)) / np.float64(d_model))
    angles = pos * angle_rates
    angles[:, 0::2] = np.sin(angles[:, 0::2])
    angles[:, 1::2] = np.cos(angles[:, 1::2])
    return torch.from_numpy(angles).float()


class PositionalEncoding(nn.Module):
    def __init__(self, d_model, dropout=0.0, max_len=5000):
        super().__init__()
        self.dropout = nn.Dropout(p=dropout)
        self.register_buffer("pe", sinusoidal_table(max_len, d_model)[None])

    def forward(self, x):
        if x.shape[1] > self.pe.shape[1]:
            raise ValueError("sequence longer than max_len")
        return self.dropout(x + self.pe[:, : x.shape[1], :])


def relative_shift(delta, d_model):
    if d_model % 2:
        raise ValueError("odd d_model has no relative shift matrix")
    w = 1 / np.power(10000, np.arange(0, d_model, 2) / np.float64(d_model))
    m = np.zeros((d_model, d_model))
    for k, omega in enumerate(w):
        c, s = np.cos(delta * omega), np.sin(delta * omega)
        m[2 * k:2 * k + 2, 2 * k:2 * k + 2] = [[c, s], [-s, c]]
    return torch.tensor(m, dtype=torch.float32)
