"""Recording a model's attention weights where every attention ends, at the
dispatcher: each softmax over the last dimension of a 4-D tensor, (batch,
heads, queries, keys), computed during one forward pass.

Shared by :mod:`coursekit.probes.copy_task` (the hidden check's trained
model, drawn on the student's page) and :mod:`coursekit.probes.attention_maps`
(the READMEs' pictures), which imports copy_task: here, so that neither
imports the other for it. No attribute name is assumed (a student's model may
keep its weights anywhere, or nowhere), and no string the model produces is
returned. A model that computes its softmax by hand leaves nothing to record.
"""
from __future__ import annotations

from collections.abc import Callable

import torch
from torch.utils._python_dispatch import TorchDispatchMode

# Bound before any student module is imported, like dispatch.py's names.
_SOFTMAXES = (torch.ops.aten._softmax.default, torch.ops.aten._safe_softmax.default)
_MODE_BASE = TorchDispatchMode


class _SoftmaxRecorder(_MODE_BASE):
    """Keeps a detached copy of every 4-D softmax over the last dimension."""

    def __init__(self) -> None:
        super().__init__()
        self.maps: list[torch.Tensor] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func in _SOFTMAXES and isinstance(out, torch.Tensor) and out.dim() == 4:
            dim = args[1] if len(args) > 1 else (kwargs or {}).get("dim", -1)
            if dim in (-1, 3):
                self.maps.append(out.detach().clone())
        return out


def recorded_attention(forward: Callable[[], object]) -> list[torch.Tensor]:
    """Run ``forward()`` without gradients; the (b, h, n_q, n_k) softmax
    outputs it computed, in order."""
    recorder = _SoftmaxRecorder()
    with torch.no_grad(), recorder:
        forward()
    return recorder.maps


def head_mean(maps: list[torch.Tensor], n_query: int, n_key: int) -> torch.Tensor | None:
    """The last recorded map of this shape, first sequence, averaged over
    heads: (n_query, n_key) float64; None if there is none or it is not finite."""
    for found in reversed(maps):
        if tuple(found.shape[-2:]) == (n_query, n_key) and found.size(0) >= 1:
            mean = found[0].to(torch.float64).mean(dim=0)
            return mean if bool(torch.isfinite(mean).all()) else None
    return None
