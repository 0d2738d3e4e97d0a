#: expect: full
#: about: a helper that works on the last dim only; movedim brings any dim there and back
import torch


def _softmax_last(x: torch.Tensor) -> torch.Tensor:
    top = x.max(dim=-1, keepdim=True).values
    top = torch.nan_to_num(top, neginf=0.0)  # all -inf slice: shift by 0
    e = (x - top).exp()
    denom = e.sum(dim=-1, keepdim=True)
    denom = torch.where(denom == 0, torch.ones_like(denom), denom)
    return e / denom


def softmax(x, dim=-1):
    moved = torch.movedim(x, dim, -1)
    return torch.movedim(_softmax_last(moved), -1, dim)
