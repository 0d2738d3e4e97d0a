#: expect: full
#: about: einsum for scores and output, scale applied to the queries first
import torch
from torch import nn


class SelfAttention(nn.Module):
    def __init__(self, d_in, d_out, qkv_bias=False):
        super().__init__()
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)

    def forward(self, x):
        q = self.W_query(x) / self.W_key.out_features ** 0.5
        k, v = self.W_key(x), self.W_value(x)
        attn = torch.einsum("...id,...jd->...ij", q, k).softmax(-1)
        return torch.einsum("...ij,...jd->...id", attn, v)
