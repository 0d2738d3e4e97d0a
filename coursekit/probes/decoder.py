"""Probes for exercise 10 (decoder). The generic work is in
:mod:`coursekit.probes.stacks`; these name the inputs of the decoder.

``config`` for ``DecoderLayer``: ``{d_model, num_heads, d_ff, dropout}``;
for ``Decoder`` add ``num_layers``. ``x`` ``(batch, n_tgt, d_model)``,
``memory`` ``(batch, n_src, d_model)``; ``tgt_mask`` bool, True = blocked,
broadcasting to ``(batch, n_tgt, n_tgt)``; ``memory_mask`` bool, broadcasting
to ``(batch, n_tgt, n_src)`` (a padding mask is ``(batch, 1, n_src)``).
"""
from __future__ import annotations

from types import ModuleType

import torch

from coursekit.probes import encoder, stacks

Mask = torch.Tensor | None


def decoder_layer_output(module: ModuleType, config: dict, weights: dict[str, torch.Tensor], x: torch.Tensor,
                         memory: torch.Tensor, tgt_mask: Mask = None, memory_mask: Mask = None) -> dict:
    """``DecoderLayer(**config)`` with ``weights``, in eval mode."""
    return stacks.output(module, "DecoderLayer", config, weights, [x, memory, tgt_mask, memory_mask])


def decoder_output(module: ModuleType, config: dict, weights: dict[str, torch.Tensor], x: torch.Tensor,
                   memory: torch.Tensor, tgt_mask: Mask = None, memory_mask: Mask = None) -> dict:
    """``Decoder(**config)`` with ``weights``, in eval mode."""
    return stacks.output(module, "Decoder", config, weights, [x, memory, tgt_mask, memory_mask])


def decoder_layer_structure(module: ModuleType, config: dict) -> dict:
    """See :func:`coursekit.probes.stacks.structure`."""
    return stacks.structure(module, "DecoderLayer", config)


def decoder_structure(module: ModuleType, config: dict) -> dict:
    """See :func:`coursekit.probes.stacks.structure`."""
    return stacks.structure(module, "Decoder", config)


def decoder_layer_gradients(module: ModuleType, config: dict, weights: dict[str, torch.Tensor], x: torch.Tensor,
                            memory: torch.Tensor, tgt_mask: Mask, memory_mask: Mask, upstream: torch.Tensor) -> dict:
    """Which parameters, and whether ``x`` and ``memory``, get a gradient."""
    return stacks.gradients(module, "DecoderLayer", config, weights, [x, memory, tgt_mask, memory_mask], upstream)


def decoder_layer_train_eval(module: ModuleType, config: dict, x: torch.Tensor, memory: torch.Tensor,
                             tgt_mask: Mask = None, memory_mask: Mask = None) -> dict:
    """Outputs in train and eval mode, two seeds each."""
    return stacks.train_eval(module, "DecoderLayer", config, [x, memory, tgt_mask, memory_mask])


def decoder_float64(module: ModuleType, config: dict, x: torch.Tensor, memory: torch.Tensor,
                    tgt_mask: Mask = None, memory_mask: Mask = None) -> dict:
    """``Decoder(**config).to(torch.float64)`` on float64 inputs."""
    return stacks.float64_output(module, "Decoder", config, [x, memory, tgt_mask, memory_mask])


# --- for the hidden checks (the generic work is in coursekit.probes.encoder) ---

def _cls(stack: bool) -> str:
    return "Decoder" if stack else "DecoderLayer"


def decoder_seeded_output(module: ModuleType, config: dict, weights: dict[str, torch.Tensor], x: torch.Tensor,
                          memory: torch.Tensor, tgt_mask: Mask = None, memory_mask: Mask = None,
                          train: bool = True, seed: int = 0, stack: bool = False) -> dict:
    """``DecoderLayer`` (or ``Decoder`` when ``stack``) with ``weights``, train
    mode by default, dropout masks from ``seed``."""
    return encoder.seeded_output(module, _cls(stack), config, weights, [x, memory, tgt_mask, memory_mask], train, seed)


def decoder_gradient_values(module: ModuleType, config: dict, weights: dict[str, torch.Tensor], x: torch.Tensor,
                            memory: torch.Tensor, tgt_mask: Mask, memory_mask: Mask, upstream: torch.Tensor,
                            train: bool = False, seed: int = 0, stack: bool = False) -> dict:
    """Gradients of ``x``, ``memory`` and every parameter."""
    return encoder.gradient_values(module, _cls(stack), config, weights, [x, memory, tgt_mask, memory_mask],
                                   upstream, train, seed)


def decoder_float64_values(module: ModuleType, config: dict, weights: dict[str, torch.Tensor], x: torch.Tensor,
                           memory: torch.Tensor, tgt_mask: Mask = None, memory_mask: Mask = None,
                           stack: bool = False) -> dict:
    """See :func:`coursekit.probes.encoder.float64_values`; tensors float64."""
    return encoder.float64_values(module, _cls(stack), config, weights, [x, memory, tgt_mask, memory_mask])


def decoder_behaviour(module: ModuleType, config: dict, x: torch.Tensor, memory: torch.Tensor,
                      src_padding: torch.Tensor, split: int, stack: bool = False) -> dict:
    """See :func:`coursekit.probes.encoder.behaviour`, with a causal
    ``tgt_mask`` and ``memory_mask = src_padding[:, None, :]``. Changes: noise
    at target positions ``>= split`` (earlier outputs must not move), noise
    at padded memory positions (no output may move)."""
    (batch, n_tgt, _), n_src = x.shape, memory.shape[1]
    future = (torch.arange(n_tgt) >= split).expand(batch, n_tgt)
    changes = [{"name": "future_ignored", "arg": 0, "where": future, "keep": ~future},
               {"name": "memory_padding_ignored", "arg": 1, "where": src_padding,
                "keep": torch.ones(batch, n_tgt, dtype=torch.bool)}]
    tgt_mask = torch.ones(n_tgt, n_tgt, dtype=torch.bool).triu(diagonal=1)
    return encoder.behaviour(module, _cls(stack), config, [x, memory, tgt_mask, src_padding[:, None, :]], changes)
