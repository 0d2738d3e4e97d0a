"""Probes that return a model's attention weights on a fixed input, as
plain tensors, for the pictures of students' pages and the READMEs.

The weights are taken where every attention ends, at the dispatcher: each
softmax over the last dimension of a 4-D tensor, (batch, heads, queries,
keys), is recorded during one forward pass. No attribute name is assumed
(a student's model may keep its weights anywhere, or nowhere), and no
string the model produces is returned. A model that computes its softmax by
hand leaves nothing to record: the probe returns None for it, and the page
shows the reference alone.

Never scored: the pictures teach (a trained copy model's cross-attention is
a diagonal, a GPT's attention is lower-triangular); the checks judge.
"""
from __future__ import annotations

from collections.abc import Callable
from types import ModuleType, SimpleNamespace

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

from coursekit.probes.copy_task import END, START, copy_task
from coursekit.probes.gpt import gpt_weights
from coursekit.probes.modules import load_weights

# Bound before any student module is imported, like dispatch.py's names.
_SOFTMAXES = (torch.ops.aten._softmax.default, torch.ops.aten._safe_softmax.default)
_MODE_BASE = TorchDispatchMode

# The copy model's picture: the symbols 3..8 (tokens 3..10 are symbols),
# teacher-forced as [START, symbols]: row t is the query that predicts
# target token t + 1, so a model that copies looks at source position t.
COPY_SOURCE = [3, 4, 5, 6, 7, 8, 9, 10]
MAX_SIDE = 64  # the judge draws no figure over 64 x 64 (grader/judge.py)


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


def _head_mean(maps: list[torch.Tensor], n_query: int, n_key: int) -> torch.Tensor | None:
    """The last recorded map of this shape, first sequence, averaged over
    heads: (n_query, n_key) float64; None if there is none or it is not finite."""
    for found in reversed(maps):
        if tuple(found.shape[-2:]) == (n_query, n_key) and found.size(0) >= 1:
            mean = found[0].to(torch.float64).mean(dim=0)
            return mean if bool(torch.isfinite(mean).all()) else None
    return None


def without_positional_encoding(module: ModuleType) -> SimpleNamespace:
    """Exercise 11's Transformer with its positional encoding replaced by
    the identity: the ablation that shows what the encoding is for."""

    class NoPositions(module.Transformer):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.pos_encoding = nn.Identity()

    return SimpleNamespace(Transformer=NoPositions)


def copy_cross_attention(module: ModuleType, seed: int = 7, steps: int = 150, length: int = 6,
                         source: list[int] | None = None) -> dict:
    """Train exercise 11's copy model (:func:`copy_task`, the hidden check's
    settings), then one teacher-forced forward pass on ``source`` (default:
    the first ``length`` of :data:`COPY_SOURCE`).

    Returns the decoder's last cross-attention, averaged over heads,
    ((len + 2) - 1 target positions, len source positions) or None, the
    exact-match rate of greedy decoding on new sequences, and the tokens on
    each axis (ints)."""
    symbols = list(source if source is not None else COPY_SOURCE[:length])
    trained = copy_task(module, seed=seed, steps=steps, length=len(symbols))
    model = trained["model"]
    model.eval()
    src = torch.tensor([symbols])
    tgt_in = torch.tensor([[START, *symbols]])  # the decoder's input: END is what the last row predicts
    maps = recorded_attention(lambda: model(src, tgt_in))
    return {"cross_attention": _head_mean(maps, tgt_in.size(1), src.size(1)),
            "exact_match": float(trained["exact_match"]),
            "queries": [START, *symbols], "keys": symbols, "predicts": [*symbols, END]}


def gpt_attention(module: ModuleType, config: dict, seed: int, idx: torch.Tensor,
                  state: dict[str, torch.Tensor] | None = None) -> dict:
    """``GPT(**config)`` with :func:`gpt_weights` (or ``state``, a trained
    model's weights by contract name), eval mode, one forward pass of
    ``idx`` (1, n): the last block's self-attention averaged over heads,
    (n, n) float64, or None."""
    model = module.GPT(**config)
    load_weights(model, state if state is not None else gpt_weights(config, seed))
    model.eval()
    n = idx.size(1)
    if n > MAX_SIDE:
        raise ValueError(f"{n} tokens: a figure shows at most {MAX_SIDE}")
    return {"self_attention": _head_mean(recorded_attention(lambda: model(idx)), n, n)}
