"""Probes for exercise 09 (encoder). The generic work is in
:mod:`coursekit.probes.stacks`; these name the inputs of the encoder.

``config`` for ``EncoderLayer``: ``{d_model, num_heads, d_ff, dropout}``;
for ``Encoder`` add ``num_layers``. ``mask``: bool, True = blocked,
broadcasting to ``(batch, n, n)`` (a padding mask is ``(batch, 1, n)``).
"""
from __future__ import annotations

from types import ModuleType

import torch

from coursekit.probes import stacks


def encoder_layer_output(module: ModuleType, config: dict, weights: dict[str, torch.Tensor],
                         x: torch.Tensor, mask: torch.Tensor | None = None) -> dict:
    """``EncoderLayer(**config)`` with ``weights``, in eval mode, on ``(x, mask)``."""
    return stacks.output(module, "EncoderLayer", config, weights, [x, mask])


def encoder_output(module: ModuleType, config: dict, weights: dict[str, torch.Tensor],
                   x: torch.Tensor, mask: torch.Tensor | None = None) -> dict:
    """``Encoder(**config)`` with ``weights``, in eval mode, on ``(x, mask)``."""
    return stacks.output(module, "Encoder", config, weights, [x, mask])


def encoder_layer_structure(module: ModuleType, config: dict) -> dict:
    """See :func:`coursekit.probes.stacks.structure`."""
    return stacks.structure(module, "EncoderLayer", config)


def encoder_structure(module: ModuleType, config: dict) -> dict:
    """See :func:`coursekit.probes.stacks.structure`."""
    return stacks.structure(module, "Encoder", config)


def encoder_layer_gradients(module: ModuleType, config: dict, weights: dict[str, torch.Tensor],
                            x: torch.Tensor, mask: torch.Tensor | None, upstream: torch.Tensor) -> dict:
    """Which parameters (and whether ``x``) get a gradient."""
    return stacks.gradients(module, "EncoderLayer", config, weights, [x, mask], upstream)


def encoder_layer_train_eval(module: ModuleType, config: dict, x: torch.Tensor,
                             mask: torch.Tensor | None = None) -> dict:
    """Outputs in train and eval mode, two seeds each."""
    return stacks.train_eval(module, "EncoderLayer", config, [x, mask])


def encoder_float64(module: ModuleType, config: dict, x: torch.Tensor, mask: torch.Tensor | None = None) -> dict:
    """``Encoder(**config).to(torch.float64)`` on float64 input."""
    return stacks.float64_output(module, "Encoder", config, [x, mask])
