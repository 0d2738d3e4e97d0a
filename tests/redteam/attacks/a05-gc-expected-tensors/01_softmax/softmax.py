"""Attack: look through gc.get_objects() for the expected output tensor."""
import gc

import torch


def softmax(x, dim=-1):
    for obj in gc.get_objects():
        if isinstance(obj, torch.Tensor) and obj is not x and obj.shape == x.shape and obj.dtype == x.dtype:
            try:
                if torch.allclose(obj.sum(dim), torch.ones(())):
                    return obj.clone()
            except Exception:
                pass
    return x
