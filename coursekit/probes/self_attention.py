"""Probes for exercise 04 (SelfAttention with trainable weights).

Each probe builds the student's ``SelfAttention`` sized for a set of
weights, copies the weights in by name (so results do not depend on the
order in which layers draw random numbers), runs one thing and returns
plain data; it never asserts. The probes that run ``forward`` also return
the load report (``"load"``: parameter names that did not match) and the
attributes holding plain lists of modules (``"hidden_lists"``).
"""
from __future__ import annotations

from types import ModuleType

import torch
from torch import nn

from coursekit.probes.modules import dtypes_after_to, hidden_list_modules, load_weights, registered

PROJECTIONS = ("W_query", "W_key", "W_value")


def make_weights(d_in: int, d_out: int, qkv_bias: bool = False, seed: int = 0, scale: float = 1.0) -> dict[str, torch.Tensor]:
    """Random weights for the three projections in ``nn.Linear`` layout
    (``weight`` is ``(d_out, d_in)``), drawn like nn.Linear's default
    init, times ``scale`` (a large scale makes unscaled scores saturate)."""
    gen = torch.Generator().manual_seed(seed)
    bound = scale / d_in ** 0.5
    weights = {}
    for name in PROJECTIONS:
        weights[f"{name}.weight"] = (2 * torch.rand(d_out, d_in, generator=gen) - 1) * bound
        if qkv_bias:
            weights[f"{name}.bias"] = (2 * torch.rand(d_out, generator=gen) - 1) * bound
    return weights


def sizes(weights: dict[str, torch.Tensor]) -> tuple[int, int, bool]:
    """(d_in, d_out, qkv_bias) of a weight dict from :func:`make_weights`."""
    d_out, d_in = weights["W_query.weight"].shape
    return d_in, d_out, "W_query.bias" in weights


def build(module: ModuleType, weights: dict[str, torch.Tensor]) -> tuple[nn.Module, dict]:
    """``module.SelfAttention`` sized for ``weights`` with them copied in,
    and the load report (names that did not match)."""
    d_in, d_out, qkv_bias = sizes(weights)
    attention = module.SelfAttention(d_in, d_out, qkv_bias=qkv_bias)
    return attention, load_weights(attention, {k: v.clone() for k, v in weights.items()})


def structure(module: ModuleType, d_in: int, d_out: int, qkv_bias: bool = False) -> dict:
    """What ``SelfAttention(d_in, d_out, qkv_bias)`` registers, and what its
    W_query / W_key / W_value attributes are."""
    attention = module.SelfAttention(d_in, d_out, qkv_bias=qkv_bias)
    layers = {}
    for name in PROJECTIONS:
        layer = getattr(attention, name, None)
        layers[name] = None if layer is None else {
            "type": type(layer).__name__,
            "in_features": getattr(layer, "in_features", None),
            "out_features": getattr(layer, "out_features", None),
            "bias": getattr(layer, "bias", None) is not None,
        }
    return {
        "is_module": isinstance(attention, nn.Module),
        "layers": layers,
        "hidden_lists": hidden_list_modules(attention),
        "registered": registered(attention),
    }


def forward_output(module: ModuleType, weights: dict[str, torch.Tensor], x: torch.Tensor) -> dict:
    """The output for ``x`` with ``weights`` copied in, the load report,
    hidden module lists, and whether ``x`` came back unchanged."""
    attention, load = build(module, weights)
    before = x.clone()
    with torch.no_grad():
        output = attention(x)
    return {"load": load, "hidden_lists": hidden_list_modules(attention),
            "output": output, "input_unchanged": bool(torch.equal(x, before))}


def per_example(module: ModuleType, weights: dict[str, torch.Tensor], x: torch.Tensor) -> dict:
    """The output for a batch ``x`` (batch, n, d_in) at once (``"batched"``)
    and for each unbatched ``(n, d_in)`` example separately, stacked
    (``"per_example"``)."""
    attention, load = build(module, weights)
    with torch.no_grad():
        batched = attention(x)
        singles = torch.stack([attention(example) for example in x])
    return {"load": load, "hidden_lists": hidden_list_modules(attention), "batched": batched, "per_example": singles}


def gradients(module: ModuleType, weights: dict[str, torch.Tensor], x: torch.Tensor, upstream: torch.Tensor) -> dict:
    """Gradients of ``sum(forward(x) * upstream)`` with respect to ``x``
    (``"input"``) and to every parameter by name (``"parameters"``, None
    where no gradient arrived)."""
    attention, load = build(module, weights)
    x = x.detach().clone().requires_grad_(True)
    (attention(x) * upstream).sum().backward()
    return {"load": load, "hidden_lists": hidden_list_modules(attention), "input": x.grad,
            "parameters": {name: p.grad for name, p in attention.named_parameters()}}


def after_to(module: ModuleType, weights: dict[str, torch.Tensor], x: torch.Tensor, dtype: torch.dtype) -> dict:
    """``.to(dtype)`` on the module: the dtypes of its tensors afterwards and
    its output for ``x`` converted to ``dtype``."""
    attention, load = build(module, weights)
    hidden = hidden_list_modules(attention)
    dtypes = dtypes_after_to(attention, dtype)
    with torch.no_grad():
        output = attention(x.to(dtype))
    return {"load": load, "hidden_lists": hidden, "dtypes": dtypes, "output": output}


def forward_twice(module: ModuleType, weights: dict[str, torch.Tensor], x: torch.Tensor) -> dict:
    """Two forward calls on the same ``x``: both outputs, whether ``x`` and
    the module's parameters and buffers came back unchanged (a forward that
    rescales a weight in place, or caches state, shows up here)."""
    attention, load = build(module, weights)
    before_x = x.clone()
    before_state = {name: t.detach().clone() for name, t in attention.state_dict().items()}
    with torch.no_grad():
        first = attention(x)
        second = attention(x)
    after_state = attention.state_dict()
    state_unchanged = before_state.keys() == after_state.keys() and all(
        torch.equal(before_state[name], after_state[name]) for name in before_state)
    return {"load": load, "first": first, "second": second, "input_unchanged": bool(torch.equal(x, before_x)),
            "state_unchanged": bool(state_unchanged)}
