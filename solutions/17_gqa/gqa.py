"""Exercise 17, reference solution: grouped-query attention (GQA) and
multi-query attention (MQA), with a KV cache that stores only the key/value
heads.

``num_heads`` query heads share ``num_kv_heads`` key/value heads: query
heads ``j * n_rep .. (j + 1) * n_rep - 1`` all read key/value head ``j``,
with ``n_rep = num_heads // num_kv_heads``. ``num_kv_heads == num_heads`` is
exercise 06's multi-head attention; ``num_kv_heads == 1`` is MQA.
"""
import math

import torch
from torch import nn

from multihead import merge_heads, split_heads

KVPair = tuple[torch.Tensor, torch.Tensor]


def repeat_kv(x: torch.Tensor, n_rep: int) -> torch.Tensor:
    """(b, g, n, hd) -> (b, g * n_rep, n, hd): head j becomes heads
    j * n_rep .. (j + 1) * n_rep - 1 (each key/value head next to its copies)."""
    # repeat_interleave, not repeat: repeat would give heads 0, 1, .., g-1, 0, 1, ..
    # and pair query head 1 with key/value head 1 instead of 0.
    return x.repeat_interleave(n_rep, dim=1)


def cache_bytes_per_token(num_layers: int, num_kv_heads: int, head_dim: int,
                          dtype: torch.dtype = torch.float16) -> int:
    """Bytes one more token of one sequence adds to the KV cache: every layer
    stores a key and a value of num_kv_heads * head_dim numbers each."""
    element_size = torch.empty(0, dtype=dtype).element_size()
    return 2 * num_layers * num_kv_heads * head_dim * element_size


class GroupedQueryAttention(nn.Module):
    """Causal self-attention with num_heads query heads sharing num_kv_heads
    key/value heads."""

    def __init__(self, d_in: int, d_out: int, context_length: int, dropout: float, num_heads: int,
                 num_kv_heads: int, qkv_bias: bool = False):
        super().__init__()
        if d_out % num_heads != 0:
            raise ValueError(f"d_out={d_out} is not divisible by num_heads={num_heads}")
        if num_kv_heads < 1 or num_heads % num_kv_heads != 0:
            raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}: "
                             "every key/value head must serve the same number of query heads")
        self.d_out = d_out
        self.num_heads = num_heads
        self.num_kv_heads = num_kv_heads
        self.n_rep = num_heads // num_kv_heads
        # A head has d_out // num_heads features, whether it is a query head
        # or a key/value head: q . k needs the same size on both sides.
        self.head_dim = d_out // num_heads
        self.context_length = context_length
        kv_dim = num_kv_heads * self.head_dim   # smaller than d_out unless num_kv_heads == num_heads
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, kv_dim, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, kv_dim, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(dropout)
        causal = torch.triu(torch.ones(context_length, context_length, dtype=torch.bool), diagonal=1)
        self.register_buffer("mask", causal)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x (b, n, d_in) with n <= context_length -> (b, n, d_out)."""
        output, _ = self.forward_cached(x)
        return output

    def forward_cached(self, x: torch.Tensor, past_kv: KVPair | None = None) -> tuple[torch.Tensor, KVPair]:
        """x:       (b, n, d_in), the new tokens, after the t positions in past_kv
        past_kv: None (t = 0), or (keys, values), each (b, num_kv_heads, t, head_dim)
        returns: the new tokens' outputs (b, n, d_out), equal to forward() of
                 all t + n tokens at these positions, and the keys and values of
                 all t + n positions, each (b, num_kv_heads, t + n, head_dim)
        raises ValueError when t + n > context_length
        """
        n = x.size(1)
        start = 0 if past_kv is None else past_kv[0].size(2)
        total = start + n
        if total > self.context_length:
            raise ValueError(f"{start} cached + {n} new tokens is more than context_length={self.context_length}")
        q = split_heads(self.W_query(x), self.num_heads)     # (b, h, n, hd)
        k = split_heads(self.W_key(x), self.num_kv_heads)    # (b, g, n, hd)
        v = split_heads(self.W_value(x), self.num_kv_heads)  # (b, g, n, hd)
        if past_kv is not None:
            k = torch.cat([past_kv[0], k], dim=2)            # (b, g, t + n, hd)
            v = torch.cat([past_kv[1], v], dim=2)
        # The cache keeps the g key/value heads; the copies for the query
        # heads are made on the fly and dropped after this call.
        keys, values = repeat_kv(k, self.n_rep), repeat_kv(v, self.n_rep)  # (b, h, t + n, hd)
        scores = q @ keys.transpose(-2, -1) / math.sqrt(self.head_dim)      # (b, h, n, t + n)
        # The new queries sit at positions start .. total - 1: those rows of the mask.
        scores = scores.masked_fill(self.mask[start:total, :total], float("-inf"))
        weights = torch.softmax(scores, dim=-1)
        weights = self.dropout(weights)
        context = merge_heads(weights @ values)              # (b, n, d_out)
        return self.out_proj(context), (k, v)
