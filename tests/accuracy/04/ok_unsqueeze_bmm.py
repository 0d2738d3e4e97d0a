#: expect: full
#: about: unbatched inputs lifted to a batch of one, torch.bmm, then squeezed back
import torch
from torch import nn


class SelfAttention(nn.Module):
    def __init__(self, d_in: int, d_out: int, qkv_bias: bool = False):
        super().__init__()
        self.W_query = nn.Linear(d_in, d_out, qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, qkv_bias)

    def forward(self, x):
        unbatched = x.dim() == 2
        if unbatched:
            x = x.unsqueeze(0)
        queries, keys, values = self.W_query(x), self.W_key(x), self.W_value(x)
        scores = torch.bmm(queries, keys.permute(0, 2, 1))
        weights = torch.softmax(scores / torch.tensor(keys.shape[-1], dtype=x.dtype).sqrt(), dim=-1)
        out = torch.bmm(weights, values)
        return out.squeeze(0) if unbatched else out
