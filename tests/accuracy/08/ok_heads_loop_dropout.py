#: expect: full
#: about: MultiHeadedAttention that loops over the heads, slicing each head's features and calling dropout once per head on (b, n_q, n_k)
"""Exercise 08, a submission: the Transformer's building blocks."""
import math

import torch
from torch import nn


def _attend(query, key, value, mask=None, dropout=None):
    """Scaled dot-product attention over (batch, heads, n, head_dim) tensors.

    mask: bool, True where attention is blocked; broadcasts to the scores
    (batch, heads, n_query, n_key). Returns (output, weights).
    """
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.size(-1))  # (b, h, n_q, n_k)
    if mask is not None:
        # A query that may attend to nothing gets zero weights, not NaN:
        # leave its scores finite for the softmax and zero its row afterwards.
        blocked_row = mask.all(dim=-1, keepdim=True)
        scores = scores.masked_fill(mask & ~blocked_row, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    if mask is not None:
        weights = weights.masked_fill(blocked_row, 0.0)
    if dropout is not None:
        weights = dropout(weights)  # on the weights, after the softmax; a no-op in eval mode
    return weights @ value, weights  # (b, h, n_q, d_v), (b, h, n_q, n_k)


class MultiHeadedAttention(nn.Module):
    """Multi-head attention for self-attention (query = key = value) and
    cross-attention (keys and values from another sequence)."""

    def __init__(self, d_model: int, num_heads: int, dropout: float = 0.0, bias: bool = True):
        super().__init__()
        if d_model % num_heads:
            raise ValueError(f"d_model ({d_model}) must be divisible by num_heads ({num_heads})")
        self.num_heads = num_heads
        self.head_dim = d_model // num_heads
        # One projection per role for all heads at once: head j uses the
        # output features j*head_dim .. (j+1)*head_dim - 1 of each.
        self.W_query = nn.Linear(d_model, d_model, bias=bias)
        self.W_key = nn.Linear(d_model, d_model, bias=bias)
        self.W_value = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)
        self.attn = None  # the last attention weights, (b, h, n_q, n_k)

    def _split(self, x):
        b, n, _ = x.shape
        # (b, n, d) -> (b, n, h, hd): each token's features cut into h pieces;
        # then swap so that each head sees all tokens: (b, h, n, hd).
        return x.view(b, n, self.num_heads, self.head_dim).transpose(1, 2)

    def forward(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                mask: torch.Tensor | None = None) -> torch.Tensor:
        """query (b, n_q, d_model); key, value (b, n_k, d_model).

        mask: bool, True = blocked; (n_q, n_k), (b, n_q, n_k), (b, 1, n_k)
        or already 4-D (b, 1 or h, n_q, n_k). Returns (b, n_q, d_model).
        """
        if mask is not None and mask.dim() == 3:
            mask = mask.unsqueeze(1)  # the same mask for every head
        q, k, v = self.W_query(query), self.W_key(key), self.W_value(value)
        contexts, weights = [], []
        for h in range(self.num_heads):  # one head at a time, each with its own dropout call
            cols = slice(h * self.head_dim, (h + 1) * self.head_dim)
            head_mask = None if mask is None else mask[:, min(h, mask.size(1) - 1)] if mask.dim() == 4 else mask
            context, w = _attend(q[..., cols], k[..., cols], v[..., cols], head_mask, self.dropout)
            contexts.append(context)
            weights.append(w)
        self.attn = torch.stack(weights, dim=1)  # (b, h, n_q, n_k)
        merged = torch.cat(contexts, dim=-1)  # (b, n_q, d_model)
        return self.out_proj(merged)  # (b, n_q, d_model)


class PositionwiseFeedForward(nn.Module):
    """linear2(dropout(relu(linear1(x)))), applied to each position alike."""

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0):
        super().__init__()
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # nn.Linear acts on the last dimension: every position gets the same
        # MLP, and positions never mix. (b, n, d) -> (b, n, d_ff) -> (b, n, d)
        return self.linear2(self.dropout(torch.relu(self.linear1(x))))


class AddNorm(nn.Module):
    """Post-norm residual connection: LayerNorm(x + Dropout(sublayer_out))."""

    def __init__(self, d_model: int, dropout: float = 0.0):
        super().__init__()
        self.norm = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, sublayer_out: torch.Tensor) -> torch.Tensor:
        # Dropout on the sublayer's output only: the residual path stays intact.
        return self.norm(x + self.dropout(sublayer_out))
