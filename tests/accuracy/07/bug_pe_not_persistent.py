#: expect: loses
#: fails: [07-pe-buffer]
#: not_hint: [mask-not-buffer]
#: about: pe registered with persistent=False: not saved in state_dict, which the README asks for; the check's own words name state_dict, and the register_buffer hint is not offered: pe IS a registered buffer that moves with .to() (mask-not-buffer's variant fails 07-moves-with-module, which this passes)
"""Exercise 07, a submission: sinusoidal positional encoding."""
import math

import torch
from torch import nn


def sinusoidal_table(max_len: int, d_model: int) -> torch.Tensor:
    """(max_len, d_model) table: PE[p, 2i] = sin(p / 10000^(2i/d)),
    PE[p, 2i+1] = cos(p / 10000^(2i/d)). Odd d_model drops the last cosine."""
    positions = torch.arange(max_len, dtype=torch.float32).unsqueeze(1)    # (max_len, 1)
    even_columns = torch.arange(0, d_model, 2, dtype=torch.float32)        # the 2i values
    # 1 / 10000^(2i/d), written as exp(-ln(10000) * 2i/d): the same number
    # without ever forming the huge power 10000^(2i/d).
    frequencies = torch.exp(-math.log(10000.0) * even_columns / d_model)  # (ceil(d/2),)
    angles = positions * frequencies                                       # (max_len, ceil(d/2))
    table = torch.zeros(max_len, d_model)
    table[:, 0::2] = torch.sin(angles)
    # Each cosine column shares its frequency with the sine column before it.
    # With an odd d_model the last sine has no partner: drop the last angle.
    table[:, 1::2] = torch.cos(angles[:, : d_model // 2])
    return table


class PositionalEncoding(nn.Module):
    """Adds the sinusoidal table to a (batch, n, d_model) input, then dropout."""

    def __init__(self, d_model: int, dropout: float = 0.0, max_len: int = 5000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        # A buffer, not a parameter: never trained, but saved in state_dict and
        # moved by .to(device) / .to(dtype) together with the rest of the model.
        self.register_buffer("pe", sinusoidal_table(max_len, d_model).unsqueeze(0), persistent=False)  # (1, max_len, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n = x.size(1)
        if n > self.pe.size(1):
            raise ValueError(f"sequence length {n} exceeds max_len {self.pe.size(1)}")
        # pe[:, :n] is (1, n, d) and broadcasts over the batch. Not in place:
        # the caller's x stays as it was.
        return self.dropout(x + self.pe[:, :n])


def relative_shift(delta: int, d_model: int) -> torch.Tensor:
    """The (d_model, d_model) matrix M with table[p + delta] == table[p] @ M.T
    for every position p: shifting positions is a linear map of the table.

    Each (sin, cos) column pair turns by the angle delta * w_i, so M is block
    diagonal with one 2x2 rotation per pair. An odd d_model leaves a lone
    sine column whose shift needs the missing cosine: ValueError.
    """
    if d_model % 2:
        raise ValueError(f"relative_shift needs an even d_model, got {d_model}")
    # float64 for the angles, so that a large delta stays accurate.
    even_columns = torch.arange(0, d_model, 2, dtype=torch.float64)
    angles = delta * torch.exp(-math.log(10000.0) * even_columns / d_model)  # (d_model/2,)
    c, s = torch.cos(angles), torch.sin(angles)
    shift = torch.zeros(d_model, d_model, dtype=torch.float64)
    # sin(a + b) = sin a cos b + cos a sin b;  cos(a + b) = cos a cos b - sin a sin b
    # so the block of pair i is [[cos b, sin b], [-sin b, cos b]], b = delta * w_i.
    idx = torch.arange(0, d_model, 2)
    shift[idx, idx], shift[idx, idx + 1] = c, s
    shift[idx + 1, idx], shift[idx + 1, idx + 1] = -s, c
    return shift.to(torch.float32)
