"""Probes for exercise 05 (causal_attention).

Every probe builds a fresh ``CausalAttention`` from the student's module,
copies the given weights in (so nothing depends on the order in which the
student's ``__init__`` draws random numbers), runs one thing and returns
plain data. None of them asserts.

The attention weights can be read in two ways. :func:`revealing_setup`
picks inputs and weights whose values form the identity matrix, so the
output *is* the weight matrix, whatever the implementation calls. And
:func:`forward` records, at the dispatcher, what goes into and out of every
dropout (``nn.Dropout`` or ``F.dropout`` under any name; empty when the
student never calls one); public tests use that only to pick which hint
to show.
"""
from __future__ import annotations

from types import ModuleType

import torch
from torch import nn

from coursekit.probes.dropout import DropoutWatch, FixedDropout
from coursekit.probes.modules import (
    devices_after_to,
    dtypes_after_to,
    gradient_reach,
    load_weights,
    registered,
    tensor_attributes,
)

PROJECTIONS = ("W_query", "W_key", "W_value")


def random_weights(d_in: int, d_out: int, qkv_bias: bool = False, seed: int = 0,
                   dtype: torch.dtype = torch.float32) -> dict[str, torch.Tensor]:
    """A state dict for the three projections, drawn from its own generator.

    Entries are N(0, 1/d_in) so that scores are O(1): the softmax is neither
    uniform nor one-hot, and mistakes show in the numbers."""
    gen = torch.Generator().manual_seed(seed)
    weights = {}
    for name in PROJECTIONS:
        weights[f"{name}.weight"] = torch.randn(d_out, d_in, generator=gen, dtype=dtype) / d_in ** 0.5
        if qkv_bias:
            weights[f"{name}.bias"] = 0.5 * torch.randn(d_out, generator=gen, dtype=dtype)
    return weights


def revealing_setup(batch: int, n: int, n_features: int = 3, qkv_bias: bool = False,
                    seed: int = 0) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """An input ``x`` (batch, n, n + n_features) and weights (use
    ``d_out = n``) for which the output *is* the attention weight matrix.

    Token i's input is ``[one_hot(i), random features]`` and ``W_value``
    keeps only the one-hot part, so the values are the (n, n) identity and
    ``weights @ values == weights``. Queries and keys use every coordinate.
    This reads the weights of any implementation, whatever it calls."""
    gen = torch.Generator().manual_seed(seed)
    d_in = n + n_features
    positions = torch.eye(n).expand(batch, n, n)
    x = torch.cat([positions, torch.randn(batch, n, n_features, generator=gen)], dim=-1)
    weights = random_weights(d_in, n, qkv_bias, seed=seed + 1)
    weights["W_value.weight"] = torch.cat([torch.eye(n), torch.zeros(n, n_features)], dim=1)
    if qkv_bias:
        weights["W_value.bias"] = torch.zeros(n)
    return x, weights


def build(module: ModuleType, d_in: int, d_out: int, context_length: int, dropout: float = 0.0,
          qkv_bias: bool = False, weights: dict[str, torch.Tensor] | None = None) -> tuple[nn.Module, dict]:
    """``module.CausalAttention(...)`` with ``weights`` copied in; also the
    names that did not load (see :func:`coursekit.probes.modules.load_weights`).
    A helper for the probes below, not a probe: it returns the module."""
    attention = module.CausalAttention(d_in, d_out, context_length, dropout, qkv_bias=qkv_bias)
    load = load_weights(attention, weights) if weights is not None else {"missing": [], "unexpected": []}
    return attention, load


def _mask_snapshot(attention: nn.Module) -> torch.Tensor | None:
    mask = getattr(attention, "mask", None)
    return mask.detach().clone() if isinstance(mask, torch.Tensor) else None


def structure(module: ModuleType, d_in: int, d_out: int, context_length: int, dropout: float = 0.0,
              qkv_bias: bool = False) -> dict:
    """What the constructor registers: parameters, buffers, children (see
    :func:`coursekit.probes.modules.registered`), plain tensor attributes,
    the dropout probability and a copy of the ``mask`` attribute (buffer or
    not; None if there is none)."""
    attention, _ = build(module, d_in, d_out, context_length, dropout, qkv_bias)
    drop = getattr(attention, "dropout", None)
    return {
        **registered(attention),
        "tensor_attributes": tensor_attributes(attention),
        "dropout_p": float(drop.p) if isinstance(drop, nn.Dropout) else None,
        "mask": _mask_snapshot(attention),
    }


def forward(module: ModuleType, x: torch.Tensor, *, d_out: int, context_length: int, dropout: float = 0.0,
            qkv_bias: bool = False, weights: dict[str, torch.Tensor] | None = None,
            train: bool = False, seed: int = 0, calls: int = 1) -> dict:
    """Build a module (``d_in = x.size(-1)``), load ``weights``, set train or
    eval mode, then ``calls`` times: ``torch.manual_seed(seed)`` and
    ``module(x)``.

    Returns ``outputs`` (one per call), ``weights_in`` / ``weights_out``
    (what each call passed into and got back from a dropout, seen at the
    dispatcher: lists of tensors, empty when no dropout ran), ``load`` (weights
    that did not load), ``mask_before`` / ``mask_after`` (copies of the
    ``mask`` attribute), ``input_unchanged``."""
    attention, load = build(module, x.size(-1), d_out, context_length, dropout, qkv_bias, weights)
    attention.train(train)
    x_before = x.clone()
    mask_before = _mask_snapshot(attention)
    outputs = []
    watch = DropoutWatch()
    with torch.no_grad(), watch:
        for _ in range(calls):
            torch.manual_seed(seed)
            outputs.append(attention(x))
    return {
        "outputs": outputs,
        "weights_in": watch.inputs,
        "weights_out": watch.outputs,
        "load": load,
        "mask_before": mask_before,
        "mask_after": _mask_snapshot(attention),
        "input_unchanged": bool(torch.equal(x, x_before)),
    }


def raised(module: ModuleType, x: torch.Tensor, *, d_out: int, context_length: int) -> dict:
    """Run ``module(x)`` and report what it raised: ``{"raised": None}`` when
    it returned, else the exception's class name and message. A stub's
    NotImplementedError is not caught: it still means 'not implemented'."""
    attention, _ = build(module, x.size(-1), d_out, context_length, 0.0)
    try:
        with torch.no_grad():
            output = attention(x)
    except NotImplementedError:
        raise
    except Exception as exc:  # student code: any exception is an answer
        return {"raised": type(exc).__name__, "message": str(exc)}
    return {"raised": None, "message": "", "output_shape": list(output.shape)}


def gradients(module: ModuleType, x: torch.Tensor, *, d_out: int, context_length: int, qkv_bias: bool = True,
              weights: dict[str, torch.Tensor] | None = None) -> dict:
    """Backpropagate ``(module(x) * upstream).sum()`` with a fixed upstream
    gradient: which parameters got a non-zero gradient, and the input's
    gradient."""
    attention, _ = build(module, x.size(-1), d_out, context_length, 0.0, qkv_bias, weights)
    x = x.detach().clone().requires_grad_(True)
    upstream = torch.randn(*x.shape[:-1], d_out, generator=torch.Generator().manual_seed(0), dtype=x.dtype)
    reach = gradient_reach(attention, lambda m: m(x) * upstream)
    return {"reach": reach, "input_grad": x.grad}


def after_to(module: ModuleType, x: torch.Tensor, *, d_out: int, context_length: int, dtype: torch.dtype,
             qkv_bias: bool = False, weights: dict[str, torch.Tensor] | None = None) -> dict:
    """``module.to(dtype)``: the dtype of every parameter, buffer and plain
    tensor attribute afterwards, and the output for ``x`` (converted to
    ``dtype``) in eval mode. ``weights`` are loaded after the conversion,
    so they keep their full precision."""
    attention, _ = build(module, x.size(-1), d_out, context_length, 0.0, qkv_bias)
    dtypes = dtypes_after_to(attention, dtype)
    load = load_weights(attention, weights) if weights is not None else {"missing": [], "unexpected": []}
    attention.eval()
    with torch.no_grad():
        output = attention(x.to(dtype))
    return {"dtypes": dtypes, "output": output, "load": load}


def devices(module: ModuleType, d_in: int, d_out: int, context_length: int,
            device: str = "meta") -> dict[str, str]:
    """:func:`devices_after_to` on a freshly built ``CausalAttention``."""
    attention, _ = build(module, d_in, d_out, context_length, 0.0)
    return devices_after_to(attention, device)


def dropout_runs(module: ModuleType, x: torch.Tensor, *, d_out: int, context_length: int, dropout: float,
                 train: bool, seeds: list[int], qkv_bias: bool = False,
                 weights: dict[str, torch.Tensor] | None = None) -> dict:
    """Dropout, seen against the submission's own output without it.

    ``clean``: the output of a module built with ``dropout=0.0`` (eval
    mode); ``outputs``: one per seed, each from a fresh module built with
    ``dropout`` in train or eval mode, its dropout masks drawn from ``seed``
    at the dispatcher (:class:`coursekit.probes.dropout.FixedDropout`).
    Every module gets the same ``weights`` and is called once, so only dropout differs between them; comparing them reads
    what dropout did, whatever else the implementation gets wrong."""
    plain, load = build(module, x.size(-1), d_out, context_length, 0.0, qkv_bias, weights)
    plain.eval()
    outputs = []
    with torch.no_grad():
        clean = plain(x)
        for seed in seeds:
            noisy, _ = build(module, x.size(-1), d_out, context_length, dropout, qkv_bias, weights)
            noisy.train(train)
            torch.manual_seed(seed)
            with FixedDropout(seed):
                outputs.append(noisy(x))
    return {"clean": clean, "outputs": outputs, "load": load}


def weight_symptoms(weights: torch.Tensor) -> dict[str, bool]:
    """Plain facts about causal attention weights ``(..., n, n)`` that point
    at known mistakes: NaN anywhere, rows (those without NaN) that do not sum
    to one, weight on a future token, a diagonal that is entirely zero (a
    token that cannot see itself)."""
    w = weights.detach().to(torch.float64)
    n = w.size(-1)
    future = torch.ones(n, n, dtype=torch.bool).triu(1)
    nan_rows = w.isnan().any(dim=-1)
    sums = w.sum(dim=-1)
    return {
        "nan": bool(nan_rows.any()),
        "rows_sum_to_one": bool(((sums - 1).abs() < 1e-5)[~nan_rows].all()),
        "future_is_zero": bool((w.nan_to_num(0.0) * future).eq(0).all()),
        "diagonal_zero": bool(w.diagonal(dim1=-2, dim2=-1).nan_to_num(0.0).eq(0).all()),
    }


def all_gradients(module: ModuleType, x: torch.Tensor, *, d_out: int, context_length: int, qkv_bias: bool = False,
                  weights: dict[str, torch.Tensor] | None = None, dropout: float = 0.0, train: bool = False,
                  seed: int = 0, upstream_seed: int = 0) -> dict:
    """Backpropagate ``(module(x) * upstream).sum()`` (``upstream`` drawn
    from ``upstream_seed``; dropout masks drawn from ``seed`` at the
    dispatcher, so they are reproducible whatever the memory layout) and return the gradient of
    the input and of every parameter, by name (None where none arrived).

    The module is converted to ``x.dtype`` before ``weights`` are loaded, so
    float64 weights keep their precision. Also returns ``load``."""
    attention, _ = build(module, x.size(-1), d_out, context_length, dropout, qkv_bias)
    attention.to(x.dtype)
    load = load_weights(attention, weights) if weights is not None else {"missing": [], "unexpected": []}
    attention.train(train)
    x = x.detach().clone().requires_grad_(True)
    upstream = torch.randn(*x.shape[:-1], d_out, generator=torch.Generator().manual_seed(upstream_seed),
                           dtype=x.dtype)
    attention.zero_grad(set_to_none=True)
    torch.manual_seed(seed)
    with FixedDropout(seed):
        output = attention(x)
    (output * upstream).sum().backward()
    return {
        "input_grad": x.grad,
        "parameter_grads": {name: p.grad for name, p in attention.named_parameters()},
        "load": load,
    }
