"""Probes for exercise 15 (tiled attention with an online softmax).

Each probe calls the student's functions on the inputs it is given and
returns plain data; none asserts. Public tests compare what they return
with PyTorch's own attention (forbidden in submissions) or with properties;
hidden checks compare with the reference's run on the same inputs. The
memory a call needs is never reported from here: the grader reads it from
outside the child (grader/sandbox/proc.py).
"""
from __future__ import annotations

from types import ModuleType

import torch
from torch.overrides import TorchFunctionMode

from coursekit.probes import warm
from coursekit.probes.threads import OneThread


def _copies(*tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return tuple(t.clone() for t in tensors)


@torch.no_grad()
def forward(module: ModuleType, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, block_size: int,
            causal: bool) -> dict:
    """tiled_attention's (output, lse), and whether the inputs came back unchanged."""
    before = _copies(query, key, value)
    output, lse = module.tiled_attention(query, key, value, block_size=block_size, causal=causal)
    unchanged = all(torch.equal(a, b) for a, b in zip((query, key, value), before))
    return {"output": output, "lse": lse, "inputs_unchanged": unchanged}


def gradients(module: ModuleType, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
              grad_output: torch.Tensor, block_size: int, causal: bool, via: str = "apply") -> dict:
    """The output and the gradients of sum(output * grad_output) with respect
    to query, key and value, through ``FlashAttention.apply(q, k, v, causal,
    block_size)`` (``via="apply"``) or ``flash_attention(...)`` with keywords."""
    q, k, v = (t.detach().clone().requires_grad_(True) for t in (query, key, value))
    if via == "apply":
        output = module.FlashAttention.apply(q, k, v, causal, block_size)
    else:
        output = module.flash_attention(q, k, v, block_size=block_size, causal=causal)
    grads = torch.autograd.grad(output, (q, k, v), grad_output, allow_unused=True)
    zero = [torch.zeros_like(t) if g is None else g for g, t in zip(grads, (q, k, v))]
    return {"output": output.detach(), "grad_query": zero[0], "grad_key": zero[1], "grad_value": zero[2]}


def _long_inputs(n: int, head_dim: int, seed: int) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return [torch.randn(1, n, head_dim, generator=gen) for _ in range(4)]


@torch.no_grad()
def long_forward(module: ModuleType, n: int, head_dim: int, block_size: int, seed: int) -> dict:
    """tiled_attention, causal, on one float32 sequence of ``n`` positions
    drawn here from ``seed`` (no input crosses the pipe): (output, lse). The
    grader measures the call's peak memory from outside; one thread."""
    q, k, v, _ = _long_inputs(n, head_dim, seed)
    with OneThread():
        output, lse = module.tiled_attention(q, k, v, block_size=block_size, causal=True)
    return {"output": output, "lse": lse}


def long_sequence(module: ModuleType, n: int, head_dim: int, block_size: int, seed: int) -> dict:
    """flash_attention forward and backward, causal, on one float32 sequence
    of ``n`` positions drawn here from ``seed`` (so that no input crosses the
    pipe). Returns the output and the gradients; the grader measures the
    call's peak memory and time from outside; one thread."""
    q, k, v, grad_output = _long_inputs(n, head_dim, seed)
    q, k, v = (t.requires_grad_(True) for t in (q, k, v))
    with OneThread():
        output = module.flash_attention(q, k, v, block_size=block_size, causal=True)
        output.backward(grad_output)
    # Each zero where a gradient never arrived: a wrong value, not a crash of the probe.
    grads = [torch.zeros_like(t) if t.grad is None else t.grad for t in (q, k, v)]
    return {"output": output.detach(), "grad_query": grads[0], "grad_key": grads[1], "grad_value": grads[2]}




class _Largest(TorchFunctionMode):
    """Records the largest tensor any torch function returns (elements).
    A function mode, not a dispatch mode: the latter's first use imports
    hundreds of modules (seconds), too slow for a public test."""

    def __init__(self) -> None:
        super().__init__()
        self.largest = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(t, torch.Tensor):
                self.largest = max(self.largest, t.numel())
        return out


def memory_watch(module: ModuleType, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                 block_size: int, causal: bool) -> dict:
    """For the public tests' quick look at memory (the grader measures it
    from outside instead): the largest tensor any torch function returned in
    flash_attention's forward and in its backward (elements), and the
    elements autograd saved for the backward. A tiled pass keeps all three
    far below n_q * n_k."""
    q, k, v = (t.detach().clone().requires_grad_(True) for t in (query, key, value))
    saved = [0]

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        saved[0] += tensor.numel()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor), _Largest() as forward_watch:
        output = module.flash_attention(q, k, v, block_size=block_size, causal=causal)
    # The autograd engine does not carry the mode into the backward: call the
    # output's backward node here instead, when it is an autograd.Function's
    # (None otherwise: autograd differentiating the loop, which "saved" shows).
    largest_backward = None
    if hasattr(output.grad_fn, "_forward_cls"):
        with _Largest() as backward_watch:
            output.grad_fn.apply(torch.ones_like(output))
        largest_backward = backward_watch.largest
    return {"largest_forward": forward_watch.largest, "largest_backward": largest_backward, "saved": saved[0]}


warm.explicit_gradients()  # its calls pass an upstream gradient: paid in the server, before a child (see warm)
