#: expect: full
#: about: a loop over column pairs (vectorised over positions), pow instead of exp/log, registered via a helper
import torch
from torch import nn


def sinusoidal_table(max_len, d_model):
    table = torch.empty(max_len, d_model, dtype=torch.float64)
    position = torch.arange(max_len, dtype=torch.float64)
    for col in range(0, d_model, 2):
        angle = position / torch.pow(torch.tensor(10000.0, dtype=torch.float64), col / d_model)
        table[:, col] = torch.sin(angle)
        if col + 1 < d_model:
            table[:, col + 1] = torch.cos(angle)
    return table.float()


class PositionalEncoding(nn.Module):
    def __init__(self, d_model, dropout=0.0, max_len=5000):
        super().__init__()
        self._add_table(sinusoidal_table(max_len, d_model))
        self.dropout = nn.Dropout(dropout)

    def _add_table(self, table):
        self.register_buffer("pe", table.unsqueeze(0))

    def forward(self, x):
        seq_len = x.shape[-2]
        if seq_len > self.pe.size(1):
            raise ValueError("too many positions")
        out = x + self.pe[:, :seq_len]
        return self.dropout(out)


def relative_shift(delta, d_model):
    if d_model % 2:
        raise ValueError("odd d_model")
    m = torch.zeros(d_model, d_model, dtype=torch.float64)
    for col in range(0, d_model, 2):
        b = torch.tensor(delta / 10000.0 ** (col / d_model), dtype=torch.float64)
        m[col, col], m[col, col + 1] = torch.cos(b), torch.sin(b)
        m[col + 1, col], m[col + 1, col + 1] = -torch.sin(b), torch.cos(b)
    return m.to(torch.float32)
