#: expect: full
#: about: softmax as exp(x - logsumexp(x)), with the fully blocked slices handled by torch.where
import torch


def softmax(x, dim=-1):
    finite_row = torch.isfinite(x.amax(dim=dim, keepdim=True))
    # logsumexp of an all -inf slice is -inf; shift those by 0 instead.
    safe_x = torch.where(finite_row, x, torch.zeros_like(x))
    log_norm = torch.logsumexp(safe_x, dim=dim, keepdim=True)
    probs = torch.exp(safe_x - log_norm)
    return torch.where(finite_row, probs, torch.zeros_like(probs))
