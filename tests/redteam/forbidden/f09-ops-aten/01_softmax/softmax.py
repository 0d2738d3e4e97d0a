"""The ATen operator itself, through torch.ops."""
import torch


def softmax(x, dim=-1):
    # A correct softmax in every other way: fully -inf rows give zeros.
    blocked = torch.isneginf(x).all(dim=dim, keepdim=True)
    safe = x.masked_fill(blocked, 0.0)
    out = torch.ops.aten._softmax(safe, dim, False)
    return out.masked_fill(blocked, 0.0)
