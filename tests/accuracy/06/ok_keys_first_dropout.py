#: expect: full
#: about: keys-first attention: scores as (b, h, keys, queries), softmax over the keys' axis (-2), dropout on that transposed layout, F.dropout with training=self.training, then einsum back
import torch
from torch import nn
from torch.nn import functional as F

from causal_attention import CausalAttention


def split_heads(x, num_heads):
    b, n, d = x.shape
    if d % num_heads != 0:
        raise ValueError("d % num_heads != 0")
    return torch.einsum("bnhe->bhne", x.reshape(b, n, num_heads, d // num_heads))


def merge_heads(x):
    b, h, n, e = x.shape
    return torch.einsum("bhne->bnhe", x).reshape(b, n, h * e)


class MultiHeadAttentionWrapper(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        self.heads = nn.ModuleList(CausalAttention(d_in, d_out, context_length, dropout, qkv_bias)
                                   for _ in range(num_heads))

    def forward(self, x):
        return torch.cat(tuple(map(lambda head: head(x), self.heads)), -1)


class MultiHeadAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        if d_out % num_heads != 0:
            raise ValueError("bad num_heads")
        self.num_heads, self.p = num_heads, dropout
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out, bias=True)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", torch.ones(context_length, context_length, dtype=torch.bool).triu(1))

    def forward(self, x):
        n = x.size(1)
        if n > self.mask.size(0):
            raise ValueError("context too long")
        q = split_heads(self.W_query(x), self.num_heads)
        k = split_heads(self.W_key(x), self.num_heads)
        v = split_heads(self.W_value(x), self.num_heads)
        # (b, h, key, query): a key blocks a query when the key comes later.
        s_t = torch.einsum("bhke,bhqe->bhkq", k, q) / q.size(-1) ** 0.5
        s_t = s_t.masked_fill(self.mask[:n, :n].T, float("-inf"))
        a_t = F.dropout(torch.softmax(s_t, dim=-2), self.p, training=self.training)
        return self.out_proj(merge_heads(torch.einsum("bhkq,bhke->bhqe", a_t, v)))
