"""Probes for exercise 14's checks of the work a cache saves, measured by
the grader from outside the child (grader/checks/kv_cache_cost.py).

The grader reads the child's CPU time around each of these calls (each is
sent alone: grader/sandbox/proc.py); the probes only make the calls and
return values that the grader compares with the reference's. One thread:
a second one's spinning would be counted as work. Models are built ahead,
by :func:`cost_model`, outside the timed calls (coursekit/probes/kept.py).
"""
from __future__ import annotations

from types import ModuleType

import torch

from coursekit.probes import kept
from coursekit.probes.fed import fed_steps
from coursekit.probes.kv_cache import full_logits, model, new_cache
from coursekit.probes.threads import OneThread

_KEPT: dict[str, tuple] = {}   # cost_prefill -> cost_steps: the model and the cache between two calls


def cost_model(module: ModuleType, config: dict, seed: int) -> dict:
    """Build the shipped model for the timed calls that follow (:mod:`coursekit.probes.kept`)."""
    return kept.build_ahead(model, module, config, seed)


@torch.no_grad()
def cost_prefill(module: ModuleType, config: dict, seed: int, idx: torch.Tensor,
                 pad_mask: torch.Tensor | None = None) -> dict:
    """forward_cached of the prompt ``idx`` (b, P) into a new cache (with
    ``pad_mask`` (b, P) when given), kept with the model for the next
    :func:`cost_steps`: the last position's logits."""
    _KEPT["cache"] = NotImplementedError   # until the prefill is done: a stub's steps are not implemented either
    gpt = model(module, config, seed)
    try:
        cache = new_cache(module, config)
        with OneThread():
            logits = module.forward_cached(gpt, idx, cache, pad_mask)
    except NotImplementedError:
        raise
    except Exception:
        _KEPT["cache"] = RuntimeError
        raise
    _KEPT["cache"] = (gpt, cache, pad_mask)
    return {"logits": logits[:, -1]}


def _continue(module: ModuleType, first: torch.Tensor, count: int) -> dict:
    """After :func:`cost_prefill` (or an earlier continuation): ``count``
    tokens through the kept cache with forward_cached, in chunks of
    ``first.size(1)`` fed from ``first`` (coursekit/probes/fed.py),
    with the padding mask, when the prefill had one, grown by the new real
    tokens: the logits (b, count, vocab). Each probe below is one timed call."""
    kept_cache = _KEPT.get("cache", RuntimeError)
    if not isinstance(kept_cache, tuple):
        raise kept_cache("the prefill before these steps did not complete")
    gpt, cache, pad_mask = _KEPT.pop("cache")
    grown = [pad_mask]

    def step(new: torch.Tensor) -> torch.Tensor:
        if grown[0] is not None:
            grown[0] = torch.cat([grown[0], torch.zeros_like(new, dtype=torch.bool)], dim=1)
        return module.forward_cached(gpt, new, cache, grown[0])

    with OneThread():
        logits = fed_steps(step, first, count)
    _KEPT["cache"] = (gpt, cache, grown[0])
    return {"logits": logits}


@torch.no_grad()
def cost_steps(module: ModuleType, first: torch.Tensor, count: int) -> dict:
    """One token at a time from ``first`` (b, 1) (:func:`_continue`)."""
    return _continue(module, first, count)


@torch.no_grad()
def cost_chunks(module: ModuleType, first: torch.Tensor, count: int) -> dict:
    """Chunks of ``first.size(1)`` tokens (:func:`_continue`)."""
    return _continue(module, first, count)


@torch.no_grad()
def cost_padded_steps(module: ModuleType, first: torch.Tensor, count: int) -> dict:
    """One token at a time after a left-padded prefill (:func:`_continue`)."""
    return _continue(module, first, count)


@torch.no_grad()
def cost_full(module: ModuleType, config: dict, seed: int, idx: torch.Tensor, repeats: int = 1) -> dict:
    """``repeats`` full forwards of the shipped model over ``idx``: what a
    step costs when it recomputes the whole prefix (the grader's yardstick)."""
    gpt = kept.built(model, module, config, seed)
    with OneThread():
        for _ in range(repeats):
            logits = full_logits(gpt, idx)
    return {"logits": logits[:, -1]}


@torch.no_grad()
def cost_generation(module: ModuleType, config: dict, seed: int, idx: torch.Tensor, max_new_tokens: int) -> dict:
    """generate_cached's tokens, one thread."""
    gpt = kept.built(model, module, config, seed)
    with OneThread():
        return {"tokens": module.generate_cached(gpt, idx, max_new_tokens)}


@torch.no_grad()
def cost_batch(module: ModuleType, config: dict, seed: int, prompts: list[torch.Tensor], max_new_tokens: int,
               pad_id: int) -> dict:
    """generate_batch's outputs, one thread."""
    gpt = kept.built(model, module, config, seed)
    with OneThread():
        out = module.generate_batch(gpt, prompts, max_new_tokens, pad_id)
    return {"tokens": [torch.as_tensor(t) for t in out]}
