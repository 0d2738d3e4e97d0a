"""Exercise 05: causal self-attention with dropout.

Write `CausalAttention`: single-head scaled dot-product self-attention in
which token i may only look at tokens 0..i, with dropout on the attention
weights. Calling `F.scaled_dot_product_attention` or `nn.MultiheadAttention`
is not allowed here (the tests use them to check your answer).
"""
import torch
from torch import nn


class CausalAttention(nn.Module):
    """Causal (masked) self-attention, one head.

    d_in:           size of each input token vector
    d_out:          size of the queries, keys, values and of each output vector
    context_length: the longest sequence the module accepts
    dropout:        probability of zeroing an attention weight (training only)
    qkv_bias:       whether the three projections have a bias

    Attributes the tests look for:
      W_query, W_key, W_value: nn.Linear(d_in, d_out, bias=qkv_bias)
      dropout:                 nn.Dropout(dropout), applied to the attention weights
      mask:                    a registered bool buffer (context_length, context_length),
                               True above the diagonal (where attention is blocked)
    """

    def __init__(self, d_in: int, d_out: int, context_length: int, dropout: float, qkv_bias: bool = False):
        super().__init__()
        raise NotImplementedError(
            "CausalAttention.__init__: create W_query, W_key, W_value, dropout and the buffer 'mask'; "
            "see README.md, section 'What to write'"
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x: (batch, n, d_in) or unbatched (n, d_in), with n <= context_length.

        returns: (batch, n, d_out), or (n, d_out) for an unbatched input.
        Raises ValueError when n > context_length. Mask the scores with -inf
        before the softmax, using the first n rows and columns of self.mask,
        and never modify self.mask (or x) in place.
        """
        raise NotImplementedError("CausalAttention.forward: see README.md, section 'The computation'")
