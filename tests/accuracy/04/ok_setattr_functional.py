#: expect: full
#: about: layers created in a loop with setattr, projections through F.linear with the layers' weights
import math

import torch
import torch.nn.functional as F
from torch import nn


class SelfAttention(nn.Module):
    ROLES = ("W_query", "W_key", "W_value")

    def __init__(self, d_in, d_out, qkv_bias=False):
        super().__init__()
        for role in self.ROLES:
            setattr(self, role, nn.Linear(d_in, d_out, bias=qkv_bias))
        self.d_out = d_out

    def _project(self, role, x):
        layer = getattr(self, role)
        return F.linear(x, layer.weight, layer.bias)

    def forward(self, x):
        q, k, v = (self._project(role, x) for role in self.ROLES)
        scores = torch.matmul(q, torch.transpose(k, -1, -2)) / math.sqrt(self.d_out)
        return torch.matmul(F.softmax(scores, dim=-1), v)
