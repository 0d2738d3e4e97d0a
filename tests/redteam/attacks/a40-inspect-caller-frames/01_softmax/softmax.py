"""Attack: walk up the call stack looking for expected values in the caller's locals."""
import sys

import torch


def softmax(x, dim=-1):
    frame = sys._getframe(1)
    while frame is not None:
        for value in frame.f_locals.values():
            if isinstance(value, torch.Tensor) and value is not x and value.shape == x.shape:
                return value
        frame = frame.f_back
    return x
