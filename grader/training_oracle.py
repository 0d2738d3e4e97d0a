"""Exercise 13's contract written out: what a correct ``train_step``,
``estimate_loss`` and ``generate`` give on the probes' own models
(coursekit.probes.training.ProbeLM, coursekit.probes.sampling.ScriptedLM).

On the trusted side only (issue 36): the student kit ships no function that
computes a graded answer, and a ``generate`` could otherwise hand its logits
to the kit's ``oracle_probs``. The public tests compare with stored values
(coursekit/fixtures/training_13, made by grader/fixtures.py from the
reference, and from here for the mistakes they diagnose);
tests/test_checks_training.py shows these equal the reference.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from coursekit.probes.sampling import ScriptedLM
from coursekit.probes.training import probe_model
from coursekit.probes.modules import own_named_parameters


def _parameters(model: nn.Module) -> dict[str, torch.Tensor]:
    return {name: p.detach().clone() for name, p in own_named_parameters(model)}


def oracle_steps(config: dict, seed: int, batches: list, lr: float, grad_clip: float,
                 accumulate: bool = False) -> dict:
    """What :func:`coursekit.probes.training.steps` finds for a correct
    ``train_step``; with ``accumulate``, for one that never clears the
    gradients."""
    model = probe_model(config, seed).train()
    optimiser = torch.optim.SGD(model.parameters(), lr=lr)
    losses, after = [], []
    for x, y in batches:
        if not accumulate:
            optimiser.zero_grad()
        value = F.cross_entropy(model(x).flatten(0, 1), y.flatten())
        value.backward()
        nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
        optimiser.step()
        losses.append(value.item())
        after.append(_parameters(model))
    return {"losses": torch.tensor(losses, dtype=torch.float64), "parameters": after}


@torch.no_grad()
def oracle_estimate(config: dict, seed: int, batches: list) -> float:
    """What a correct ``estimate_loss`` returns in
    :func:`coursekit.probes.training.estimate`."""
    model = probe_model(config, seed).eval()
    return sum(F.cross_entropy(model(x).flatten(0, 1), y.flatten()).item() for x, y in batches) / len(batches)


def oracle_probs(logits: torch.Tensor, temperature: float, top_k: int | None) -> torch.Tensor:
    """The distribution of the next token from the last position's logits
    ``(b, vocab_size)``."""
    logits = logits.to(torch.float64) / temperature
    if top_k is not None:
        kth = torch.topk(logits, top_k, dim=-1).values[:, -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    return F.softmax(logits, dim=-1)


@torch.no_grad()
def oracle_sample(vocab_size: int, context_length: int, seed: int, idx: torch.Tensor, max_new_tokens: int,
                  temperature: float, top_k: int | None) -> dict:
    """What :func:`coursekit.probes.sampling.sample` finds for a correct ``generate``."""
    model = ScriptedLM(vocab_size, context_length, seed).eval()
    quantiles = torch.rand(97, generator=torch.Generator().manual_seed(seed + 1)).mul(0.9).add(0.05).tolist()
    probs_seen, lengths = [], []
    for step in range(max_new_tokens):
        window = idx[:, -context_length:]
        lengths.append(window.size(1))
        probs = oracle_probs(model(window)[:, -1, :], temperature, top_k)
        probs_seen.append(probs)
        u = quantiles[step % len(quantiles)]
        token = (probs.cumsum(-1) < u).sum(-1).clamp(max=vocab_size - 1)
        idx = torch.cat([idx, token[:, None]], dim=1)
    return {"out": idx, "probs": torch.cat(probs_seen), "lengths": lengths}
