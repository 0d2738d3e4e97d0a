"""Probes that return a model's attention weights on a fixed input, as
plain tensors, for the pictures of students' pages and the READMEs.

The weights are taken where every attention ends, at the dispatcher
(:mod:`coursekit.probes.attention_record`): each softmax over the last
dimension of a 4-D tensor, (batch, heads, queries, keys), is recorded during
one forward pass. No attribute name is assumed
(a student's model may keep its weights anywhere, or nowhere), and no
string the model produces is returned. A model that computes its softmax by
hand leaves nothing to record: the probe returns None for it, and the page
shows the reference alone.

Never scored: the pictures teach (a trained copy model's cross-attention is
a diagonal, a GPT's attention is lower-triangular); the checks judge.
"""
from __future__ import annotations

from types import ModuleType, SimpleNamespace

import torch
from torch import nn

# recorded_attention is re-exported: docs/figures/make_figures.py takes it from here.
from coursekit.probes.attention_record import head_mean, recorded_attention  # noqa: F401
from coursekit.probes.copy_task import END, START, copy_task, teacher_forced_cross_attention
from coursekit.probes.gpt import gpt_weights
from coursekit.probes.modules import load_weights

# The copy model's picture: the symbols 3..8 (tokens 3..10 are symbols),
# teacher-forced as [START, symbols]: row t is the query that predicts
# target token t + 1, so a model that copies looks at source position t.
COPY_SOURCE = [3, 4, 5, 6, 7, 8, 9, 10]
MAX_SIDE = 64  # the judge draws no figure over 64 x 64 (grader/judge.py)


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
    """Train exercise 11's copy model (:func:`copy_task`, by default the
    hidden check's settings), then one teacher-forced forward pass on
    ``source`` (default: the first ``length`` of :data:`COPY_SOURCE`). For
    the READMEs' pictures; the student's page takes the same map from the
    hidden check's own training (``copy_outcome``'s ``figure_source``).

    Returns the decoder's last cross-attention, averaged over heads,
    ((len + 2) - 1 target positions, len source positions) or None, the
    exact-match rate of greedy decoding on new sequences, and the tokens on
    each axis (ints)."""
    symbols = list(source if source is not None else COPY_SOURCE[:length])
    trained = copy_task(module, seed=seed, steps=steps, length=len(symbols))
    return {"cross_attention": teacher_forced_cross_attention(trained["model"], symbols),
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
    return {"self_attention": head_mean(recorded_attention(lambda: model(idx)), n, n)}
