"""The reference, plus a named_parameters() that lies about what is registered\n(it hides the key projection): the structure check asks nn.Module, not the module."""
import torch
from torch import nn


class SelfAttention(nn.Module):
    """Single-head scaled dot-product self-attention (seed 001, SelfAttention_v2)."""

    def __init__(self, d_in: int, d_out: int, qkv_bias: bool = False):
        # nn.Module sets up its registries of parameters and sub-modules here;
        # assigning a layer before this call fails.
        super().__init__()
        # Plain attributes: nn.Module registers each layer under its name, so
        # parameters(), state_dict(), .to() and .eval() all see them.
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x (batch, n, d_in) or (n, d_in) -> (batch, n, d_out) or (n, d_out)."""
        queries = self.W_query(x)  # (..., n, d_out)
        keys = self.W_key(x)       # (..., n, d_out)
        values = self.W_value(x)   # (..., n, d_out)
        # transpose(-2, -1) swaps tokens and features only; .T would also move
        # the batch dim to the back.
        scores = queries @ keys.transpose(-2, -1)  # (..., n, n)
        # Divide by sqrt(d_k): dot products of d_k-dim vectors grow like
        # sqrt(d_k), and large scores saturate the softmax (tiny gradients).
        weights = torch.softmax(scores / keys.size(-1) ** 0.5, dim=-1)  # each row sums to 1
        return weights @ values  # (..., n, d_out)

    def named_parameters(self, prefix="", recurse=True, remove_duplicate=True):
        for name, p in super().named_parameters(prefix, recurse, remove_duplicate):
            if not name.startswith("W_key"):
                yield name, p
