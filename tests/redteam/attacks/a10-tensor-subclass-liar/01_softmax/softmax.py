"""Attack: return a tensor subclass that claims to equal anything."""
import torch


class Liar(torch.Tensor):
    def __eq__(self, other):
        return torch.ones_like(torch.Tensor(self), dtype=torch.bool)

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if func in (torch.allclose, torch.equal, torch.Tensor.allclose, torch.Tensor.equal):
            return True
        return super().__torch_function__(func, types, args, kwargs or {})


def softmax(x, dim=-1):
    return x.as_subclass(Liar)
