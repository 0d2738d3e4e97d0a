#: expect: loses
#: fails: [01-random-shapes]
#: hint: [softmax-dim0]
#: not_hint: [softmax-overflow]
#: about: always normalises over the last dim, whatever dim it is given
"""Exercise 01, a submission: a numerically stable softmax."""
import torch


def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Softmax of `x` along `dim`; a slice that is entirely -inf gives zeros."""
    # softmax(x) == softmax(x - c) for any constant c; with c = max the
    # largest exponent is exp(0) = 1, so nothing can overflow.
    row_max = x.amax(dim=-1, keepdim=True)
    # A fully blocked slice has max -inf, and -inf - (-inf) is NaN: shift
    # such slices by 0 instead, so every exp is exactly 0.
    row_max = torch.where(torch.isfinite(row_max), row_max, torch.zeros_like(row_max))
    exp = torch.exp(x - row_max)
    total = exp.sum(dim=-1, keepdim=True)
    # The total is >= 1 wherever the slice has a finite entry; clamping it
    # only matters for fully blocked slices, where it turns 0/0 into 0/tiny
    # (zeros, with zero gradients instead of NaN).
    return exp / total.clamp_min(torch.finfo(x.dtype).tiny)
