"""Exercise 05, reference solution: causal self-attention with dropout."""
import torch
from torch import nn


class CausalAttention(nn.Module):
    """Single-head self-attention in which position i sees positions <= i."""

    def __init__(self, d_in: int, d_out: int, context_length: int, dropout: float, qkv_bias: bool = False):
        super().__init__()
        self.context_length = context_length
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.dropout = nn.Dropout(dropout)
        # True above the diagonal: token i may not look at tokens j > i.
        # A buffer, so .to(device) moves it and state_dict() saves it.
        causal = torch.triu(torch.ones(context_length, context_length, dtype=torch.bool), diagonal=1)
        self.register_buffer("mask", causal)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x (batch, n, d_in) or unbatched (n, d_in), n <= context_length
        -> (batch, n, d_out) or (n, d_out)."""
        n = x.size(-2)  # counted from the end, so unbatched inputs work too
        if n > self.context_length:
            raise ValueError(f"input has {n} tokens, more than context_length={self.context_length}")
        queries, keys, values = self.W_query(x), self.W_key(x), self.W_value(x)  # (b, n, d_out)
        # transpose(-2, -1), not .T: .T would reverse the batch dimension too.
        scores = queries @ keys.transpose(-2, -1)                                 # (b, n, n)
        # Mask before the softmax: a -inf score gets weight exp(-inf) = 0 and
        # the other weights still sum to one. Slice the buffer to the input's
        # length; masked_fill (no underscore) returns a new tensor and leaves
        # the buffer as it is.
        scores = scores.masked_fill(self.mask[:n, :n], float("-inf"))
        # Scale by 1/sqrt(d_k). The diagonal is never blocked, so no row is
        # all -inf and the built-in softmax cannot return NaN here.
        weights = torch.softmax(scores / keys.size(-1) ** 0.5, dim=-1)
        # Dropout on the weights, after the softmax; nn.Dropout is the
        # identity in eval mode, so evaluation is deterministic.
        weights = self.dropout(weights)
        return weights @ values                                                   # (b, n, d_out)
