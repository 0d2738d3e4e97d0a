"""Exercise 06, reference solution: multi-head attention, two ways.

MultiHeadAttentionWrapper runs `num_heads` independent CausalAttention
modules and concatenates their outputs. MultiHeadAttention computes the same
kind of thing with one projection per role (query, key, value) for all heads,
cut into heads by split_heads and glued back by merge_heads.
"""
import math

import torch
from torch import nn

from causal_attention import CausalAttention


def split_heads(x: torch.Tensor, num_heads: int) -> torch.Tensor:
    """(b, n, d) -> (b, num_heads, n, d // num_heads)."""
    b, n, d = x.shape
    if d % num_heads != 0:
        raise ValueError(f"the feature size {d} is not divisible by num_heads={num_heads}")
    # Cut each token's vector into num_heads consecutive pieces (head i gets
    # features i*hd .. (i+1)*hd - 1), then move the head axis in front of the
    # tokens, so that each head is a (n, hd) matrix for batched matmuls.
    return x.reshape(b, n, num_heads, d // num_heads).transpose(1, 2)  # (b, h, n, hd)


def merge_heads(x: torch.Tensor) -> torch.Tensor:
    """(b, h, n, hd) -> (b, n, h * hd): the inverse of split_heads."""
    b, h, n, hd = x.shape
    # Tokens back in front of the heads first: only then are one token's h
    # pieces next to each other. The transposed tensor is not contiguous in
    # memory, so reshape (which copies when it must), not view.
    return x.transpose(1, 2).reshape(b, n, h * hd)  # (b, n, d)


class MultiHeadAttentionWrapper(nn.Module):
    """num_heads independent causal attention heads, outputs concatenated."""

    def __init__(self, d_in: int, d_out: int, context_length: int, dropout: float, num_heads: int,
                 qkv_bias: bool = False):
        super().__init__()
        heads = [CausalAttention(d_in, d_out, context_length, dropout, qkv_bias) for _ in range(num_heads)]
        # An nn.ModuleList registers the heads: their weights are in
        # parameters() and state_dict(), and .to() / .eval() reach them.
        self.heads = nn.ModuleList(heads)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x (b, n, d_in) -> (b, n, num_heads * d_out)."""
        # Every head gives (b, n, d_out); stack them side by side along the
        # features, token by token.
        return torch.cat([head(x) for head in self.heads], dim=-1)  # (b, n, h * d_out)


class MultiHeadAttention(nn.Module):
    """Causal multi-head self-attention with one projection per role."""

    def __init__(self, d_in: int, d_out: int, context_length: int, dropout: float, num_heads: int,
                 qkv_bias: bool = False):
        super().__init__()
        if d_out % num_heads != 0:
            raise ValueError(f"d_out={d_out} is not divisible by num_heads={num_heads}")
        self.d_out = d_out
        self.num_heads = num_heads
        self.head_dim = d_out // num_heads
        self.context_length = context_length
        # One (d_in -> d_out) projection per role serves all heads at once:
        # head i owns output features i*head_dim .. (i+1)*head_dim - 1.
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        # Mixes what the heads found. It always has a bias (LLMs from scratch does the
        # same; so does nn.MultiheadAttention with its default bias=True).
        self.out_proj = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(dropout)
        # True above the diagonal = blocked. A buffer: moved by .to(), saved.
        causal = torch.triu(torch.ones(context_length, context_length, dtype=torch.bool), diagonal=1)
        self.register_buffer("mask", causal)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x (b, n, d_in) with n <= context_length -> (b, n, d_out)."""
        n = x.size(1)
        if n > self.context_length:
            raise ValueError(f"input has {n} tokens, more than context_length={self.context_length}")
        q = split_heads(self.W_query(x), self.num_heads)  # (b, h, n, hd)
        k = split_heads(self.W_key(x), self.num_heads)    # (b, h, n, hd)
        v = split_heads(self.W_value(x), self.num_heads)  # (b, h, n, hd)
        # Every head at once; the scale uses one head's size, not d_out.
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)  # (b, h, n, n)
        # A slice of the buffer for this length; masked_fill (no underscore)
        # returns a new tensor and leaves the buffer alone.
        scores = scores.masked_fill(self.mask[:n, :n], float("-inf"))
        # Over the keys: each query's weights sum to one. The diagonal is
        # never blocked, so no row is entirely -inf.
        weights = torch.softmax(scores, dim=-1)
        weights = self.dropout(weights)
        context = merge_heads(weights @ v)  # (b, n, d_out)
        return self.out_proj(context)       # (b, n, d_out)
