"""Dropout seen at the dispatcher: every way of calling it, one behaviour.

A probe that wants reproducible dropout masks cannot replace the attribute
``torch.nn.functional.dropout``: a student who wrote
``from torch.nn.functional import dropout`` holds the original function and
never sees the replacement. :class:`FixedDropout` is a ``TorchFunctionMode``
instead: PyTorch hands it every call of ``F.dropout`` (under any name it was
imported as), ``nn.Dropout`` (which calls ``F.dropout``), ``torch.dropout``,
``torch.dropout_`` and ``torch.native_dropout`` while the mode is active.
Its masks depend on the position of an entry in the last two dimensions
only (:func:`canonical_keep`), so every allowed way of dropping attention
weights (all heads at once, one head at a time, reshaped, transposed)
drops the same entries.
"""
from __future__ import annotations

from collections.abc import Callable

import torch
from torch.nn import functional
from torch.overrides import TorchFunctionMode


def _functional(input, p=0.5, training=True, inplace=False):  # noqa: A002 - F.dropout's own names
    return input, p, training, inplace


def _builtin(input, p, train):  # noqa: A002
    return input, p, train, False


def _builtin_inplace(input, p, train):  # noqa: A002
    return input, p, train, True


# Each dropout entry point -> how to read (input, p, training, inplace) from its arguments.
_ENTRY_POINTS: dict[Callable, Callable] = {
    functional.dropout: _functional,
    torch.dropout: _builtin,
    torch.dropout_: _builtin_inplace,
    torch.native_dropout: _builtin,
}


def canonical_keep(seed: int, shape: tuple[int, ...], p: float) -> torch.Tensor:
    """The keep-mask (bool, ``shape``) that :class:`FixedDropout` gives a
    dropout of ``shape`` under ``seed``: it depends only on the seed and on
    the sizes of the last two dimensions, is the same for every slice over
    the leading ones, and transposing the last two dimensions transposes it
    (a square one is symmetric).

    Why so: a correct attention drops its (queries, keys) weights in one
    call on (b, h, n, n), in one call per head on (b, n, n), on a reshaped
    (b * h, n, n), or keys-first and transposed; with this mask every one of
    them drops the same (query, key) entries, so their outputs agree with
    the reference's. Dropout in the wrong place (on the scores, on the
    output) still drops other numbers and shows.
    """
    rows, cols = (1, shape[-1]) if len(shape) == 1 else (shape[-2], shape[-1]) if shape else (1, 1)
    small, large = min(rows, cols), max(rows, cols)
    # One generator per (seed, sizes): the draw does not depend on how many
    # dropouts ran before, so an extra per-head call shifts nothing.
    mixed = (seed * 1_000_003 + small * 10_007 + large) % (2**63 - 1)
    table = torch.rand(small, large, generator=torch.Generator().manual_seed(mixed)) >= p
    if small == large:  # symmetric: the transpose of a square table is itself
        table = table.triu() | table.triu(1).t()
    if rows > cols:
        table = table.t()
    return table.reshape(shape if len(shape) <= 1 else (rows, cols)).expand(shape)


class FixedDropout(TorchFunctionMode):
    """In this block, every dropout that acts (training mode, ``p > 0``)
    keeps the entries of :func:`canonical_keep` for its seed, shape and p,
    in the tensor's *logical* order, however it is called.

    Why not ``torch.manual_seed``: dropout fills its mask in memory order,
    so a correct solution whose tensor comes out with other strides
    (``einsum`` does that for some sizes) would drop other entries than the
    reference; and a solution that drops each head's weights in its own
    call would draw them in another order. ``shapes`` records the shape of
    every dropout that acted: plain facts for a probe to return.
    """

    def __init__(self, seed: int):
        super().__init__()
        self.seed = seed
        self.shapes: list[list[int]] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        read = _ENTRY_POINTS.get(func)
        if read is None:
            return func(*args, **kwargs)
        input, p, training, inplace = read(*args, **kwargs)  # noqa: A001
        if not training or p == 0:
            return func(*args, **kwargs)  # the mode is off inside: no recursion
        self.shapes.append(list(input.shape))
        keep = canonical_keep(self.seed, tuple(input.shape), p).to(input.device)
        output = input * keep.to(input.dtype) / (1 - p) if p < 1 else input * 0
        if func is torch.native_dropout:
            return output, keep
        return input.copy_(output) if inplace else output


class DropoutWatch(TorchFunctionMode):
    """Record what every dropout call of the block gets and gives back
    (``inputs``, ``outputs``: detached copies), however it was called; with
    ``only_when``, a dropout for which ``only_when()`` is false is switched
    off (returns its input unchanged) instead of running."""

    def __init__(self, only_when: Callable[[], bool] | None = None):
        super().__init__()
        self.only_when = only_when
        self.inputs: list[torch.Tensor] = []
        self.outputs: list[torch.Tensor] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        read = _ENTRY_POINTS.get(func)
        if read is None:
            return func(*args, **kwargs)
        input = read(*args, **kwargs)[0]  # noqa: A001
        if self.only_when is not None and not self.only_when():
            return (input, torch.ones_like(input, dtype=torch.bool)) if func is torch.native_dropout else input
        output = func(*args, **kwargs)
        self.inputs.append(input.detach().clone())
        first = output[0] if isinstance(output, tuple) else output
        self.outputs.append(first.detach().clone())
        return output
