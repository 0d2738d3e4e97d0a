"""Probes for exercise 01 (softmax)."""
from __future__ import annotations

from types import ModuleType

import torch


def softmax_output(module: ModuleType, x: torch.Tensor, dim: int = -1) -> dict:
    """``module.softmax(x, dim)``, and whether ``x`` came back unchanged."""
    before = x.clone()
    output = module.softmax(x, dim=dim)
    return {"output": output, "input_unchanged": bool(torch.equal(x, before))}


def softmax_gradient(module: ModuleType, x: torch.Tensor, upstream: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """d(sum(softmax(x) * upstream)) / dx."""
    x = x.detach().clone().requires_grad_(True)
    (module.softmax(x, dim=dim) * upstream).sum().backward()
    return x.grad
