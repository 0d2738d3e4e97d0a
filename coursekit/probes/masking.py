"""Probes for exercise 03 (masks and scaled dot-product attention).

Every argument is plain data (tensors, numbers, strings, lists, None), so
the grader can call the same probes in its sandbox. Dropout is described by
its probability and mode, and the probe builds the ``nn.Dropout`` itself.
"""
from __future__ import annotations

from types import ModuleType

import torch
from torch import nn


def causal_mask_output(module: ModuleType, seq_len: int, device: str | None = None) -> torch.Tensor:
    """``module.causal_mask(seq_len, device)``, or ``device`` left out when None."""
    if device is None:
        return module.causal_mask(seq_len)
    return module.causal_mask(seq_len, device=device)


def padding_mask_output(module: ModuleType, lengths: torch.Tensor | list[int], seq_len: int) -> dict:
    """``module.padding_mask(lengths, seq_len)``, and whether a tensor
    ``lengths`` came back unchanged."""
    is_tensor = isinstance(lengths, torch.Tensor)
    before = lengths.clone() if is_tensor else list(lengths)
    mask = module.padding_mask(lengths, seq_len)
    if is_tensor and lengths.device.type == "meta":
        unchanged = True  # meta tensors carry no values to compare
    else:
        unchanged = torch.equal(lengths, before) if is_tensor else lengths == before
    return {"mask": mask, "lengths_unchanged": bool(unchanged)}


def attention_output(
    module: ModuleType,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    mask: torch.Tensor | None = None,
    dropout_p: float | None = None,
    train: bool = True,
    seed: int = 0,
) -> dict:
    """``module.scaled_dot_product_attention(query, key, value, mask, dropout)``.

    ``dropout`` is ``nn.Dropout(dropout_p)`` in train or eval mode, or None
    when ``dropout_p`` is None. The global RNG is seeded with ``seed`` just
    before the call, so a caller can replay the same dropout pattern.
    Returns the output, the weights, and whether the inputs were left
    unchanged (query, key, value and mask)."""
    inputs = {"query": query, "key": key, "value": value, "mask": mask}
    before = {name: t.clone() for name, t in inputs.items() if t is not None}
    dropout = None
    if dropout_p is not None:
        dropout = nn.Dropout(dropout_p)
        dropout.train(train)
    torch.manual_seed(seed)
    result = module.scaled_dot_product_attention(query, key, value, mask=mask, dropout=dropout)
    output, weights = _pair(result)
    unchanged = all(torch.equal(inputs[name], t) for name, t in before.items())
    return {"output": output, "weights": weights, "inputs_unchanged": unchanged}


def attention_gradients(
    module: ModuleType,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    upstream: torch.Tensor,
    mask: torch.Tensor | None = None,
) -> dict:
    """Gradients of ``sum(output * upstream)`` with respect to query, key
    and value (no dropout)."""
    leaves = {name: t.detach().clone().requires_grad_(True) for name, t in
              {"query": query, "key": key, "value": value}.items()}
    output, _ = _pair(module.scaled_dot_product_attention(leaves["query"], leaves["key"], leaves["value"], mask=mask))
    (output * upstream).sum().backward()
    return {name: leaf.grad for name, leaf in leaves.items()}


class _Halve(nn.Module):
    """A deterministic stand-in for dropout: records what it is given and
    returns half of it."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[torch.Tensor] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.seen.append(x.detach().clone())
        return x * 0.5


def dropout_usage(
    module: ModuleType,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    mask: torch.Tensor | None = None,
) -> dict:
    """Call ``scaled_dot_product_attention`` with a dropout module that halves
    its input and records it: how often it was called, what it was given
    (should be the attention weights after the softmax), and the output and
    weights that came back."""
    recorder = _Halve()
    output, weights = _pair(module.scaled_dot_product_attention(query, key, value, mask=mask, dropout=recorder))
    return {
        "calls": len(recorder.seen),
        "seen": recorder.seen[0] if recorder.seen else None,
        "output": output,
        "weights": weights,
    }


def _pair(result: object) -> tuple[object, object]:
    """(output, weights) from what the student returned; a result that is
    not a pair comes back as (result, None) so that the comparison, not the
    probe, reports it."""
    if isinstance(result, (tuple, list)) and len(result) == 2:
        return result[0], result[1]
    return result, None


def built_masks_attention(
    module: ModuleType,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    lengths: torch.Tensor | list[int] | None = None,
    causal: bool = True,
) -> dict:
    """Attention with masks built by the student's own ``causal_mask`` and
    ``padding_mask``, the way later exercises combine them: the causal mask
    ``(n_q, n_k)`` (self-attention, so ``n_q == n_k``) or'ed with the padding
    mask of ``lengths`` reshaped to ``(batch, 1, ..., 1, n_k)`` so that it
    broadcasts over heads and queries. Returns the mask used, the output and
    the weights."""
    n_k = key.size(-2)
    mask = module.causal_mask(n_k) if causal else None
    if lengths is not None:
        padding = module.padding_mask(lengths, n_k)
        if isinstance(padding, torch.Tensor):
            padding = padding.reshape(padding.size(0), *([1] * (query.dim() - 2)), n_k)
        mask = padding if mask is None else mask | padding
    output, weights = _pair(module.scaled_dot_product_attention(query, key, value, mask=mask))
    return {"mask": mask, "output": output, "weights": weights}


# Errors that mean "this code reads the lengths' values", which a meta tensor
# cannot answer but a GPU tensor can: such code is not judged on its device.
_READS_VALUES = ("cannot be called on meta tensors", "Cannot copy out of meta tensor")


def mask_devices(module: ModuleType, seq_len: int, lengths: list[int]) -> dict:
    """Where the masks land when asked for another device. The ``meta``
    device stands in for a GPU: ``causal_mask(seq_len, device="meta")`` and
    ``padding_mask`` of a ``meta`` lengths tensor should both be on ``meta``.
    Returns the device types (a type name when no tensor came back);
    ``padding`` is ``"unknown"`` when the code needs the lengths' values,
    which a ``meta`` tensor does not have."""
    causal = module.causal_mask(seq_len, device="meta")
    try:
        padding = module.padding_mask(torch.tensor(lengths, device="meta"), seq_len)
    except (RuntimeError, NotImplementedError) as exc:
        if not any(text in str(exc) for text in _READS_VALUES):
            raise
        padding_device = "unknown"
    else:
        padding_device = _device_type(padding)
    return {"causal": _device_type(causal), "padding": padding_device}


def _device_type(value: object) -> str:
    return value.device.type if isinstance(value, torch.Tensor) else type(value).__name__
