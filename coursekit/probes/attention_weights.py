"""Probes for exercise 02 (attention without trainable weights).

Each probe calls one of the student's functions and returns plain data; it
never asserts. The public tests and the grader's hidden checks compare the
results with what PyTorch (or the reference) gives.
"""
from __future__ import annotations

from types import ModuleType

import torch

FUNCTIONS = ("attention_scores", "attention_weights", "context_vectors")


def _function(module: ModuleType, name: str):
    if name not in FUNCTIONS:
        raise ValueError(f"unknown function {name!r}; expected one of {FUNCTIONS}")
    return getattr(module, name)


def call(module: ModuleType, name: str, x: torch.Tensor) -> dict:
    """``module.<name>(x)`` for one of :data:`FUNCTIONS`, and whether ``x``
    came back unchanged."""
    before = x.clone()
    output = _function(module, name)(x)
    return {"output": output, "input_unchanged": bool(torch.equal(x, before))}


def per_example(module: ModuleType, name: str, x: torch.Tensor) -> dict:
    """``module.<name>`` on a batch ``x`` of shape ``(..., n, d)`` at once
    (``"batched"``), and on each ``(n, d)`` slice of it separately, stacked
    back into the batch's leading shape (``"per_example"``).

    A function that works on 2-D input but mixes up batched input (``.T`` on
    a 3-D tensor) gives different results."""
    function = _function(module, name)
    batched = function(x)
    singles = torch.stack([function(matrix) for matrix in x.reshape(-1, *x.shape[-2:])])
    return {"batched": batched, "per_example": singles.reshape(*x.shape[:-2], *singles.shape[1:])}


def context_gradient(module: ModuleType, x: torch.Tensor, upstream: torch.Tensor) -> torch.Tensor:
    """d(sum(context_vectors(x) * upstream)) / dx."""
    x = x.detach().clone().requires_grad_(True)
    (module.context_vectors(x) * upstream).sum().backward()
    return x.grad


def gradient(module: ModuleType, name: str, x: torch.Tensor, upstream: torch.Tensor) -> torch.Tensor:
    """d(sum(<name>(x) * upstream)) / dx for one of :data:`FUNCTIONS` (the
    hidden checks differentiate each function, not only context_vectors)."""
    x = x.detach().clone().requires_grad_(True)
    (_function(module, name)(x) * upstream).sum().backward()
    return x.grad
