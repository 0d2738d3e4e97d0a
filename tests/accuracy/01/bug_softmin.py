#: expect: loses
#: fails: [01-no-forbidden-calls]
#: about: returns F.softmin(-x), a built-in softmax under another name, which the README forbids
import torch
import torch.nn.functional as F


def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    # softmin(-x) == softmax(x); nan_to_num for the fully blocked slices.
    blocked = torch.isneginf(x).all(dim=dim, keepdim=True)
    safe = torch.where(blocked, torch.zeros_like(x), x)
    return F.softmin(-safe, dim=dim).masked_fill(blocked, 0.0)
