"""Probes for exercise 14 (a KV cache and batched generation).

The model is always exercise 12's reference GPT, the ``gpt.py`` shipped in
the submission's folder, with weights drawn from the config and a seed
(:func:`coursekit.probes.gpt.gpt_weights`), in float64 and eval mode: the
cache must give the logits of the full recomputation to float64's
precision, and greedy decoding then never meets a near tie that float32
could break differently.

The student's functions only ever receive the model, token ids, a cache
they made themselves (``KVCache``) and a padding mask; what they return is
all a probe reports. The oracles (:func:`full_logits`,
:func:`recomputed_generation`) use the shipped model alone.
"""
from __future__ import annotations

from types import ModuleType

import torch
from torch import nn

from coursekit.loader import load_shipped
from coursekit.probes.gpt import gpt_weights
from coursekit.probes.modules import load_weights


def shipped_gpt(module: ModuleType) -> ModuleType:
    """The ``gpt`` module shipped beside the submission (exercise 12's reference)."""
    return load_shipped(module, "gpt")


def model(module: ModuleType, config: dict, seed: int, scale: float = 1.0) -> nn.Module:
    """The shipped ``GPT(**config)`` with seeded weights (``scale`` times
    the usual), float64, eval mode."""
    gpt = shipped_gpt(module).GPT(**config)
    load_weights(gpt, gpt_weights(config, seed, scale))
    return gpt.to(torch.float64).eval()


def new_cache(module: ModuleType, config: dict):
    return module.KVCache(config["num_layers"], config["context_length"])


def _error(call) -> str | None:
    """The type of the exception ``call()`` raises (None if none)."""
    try:
        call()
    except NotImplementedError:
        raise
    except Exception as exc:  # noqa: BLE001 - which exception is the result
        return type(exc).__name__
    return None


# --- oracles: the shipped model, recomputed from scratch ----------------------

@torch.no_grad()
def full_logits(gpt: nn.Module, idx: torch.Tensor) -> torch.Tensor:
    """model(idx): what every cached step must reproduce."""
    return gpt(idx)


@torch.no_grad()
def recomputed_generation(gpt: nn.Module, idx: torch.Tensor, max_new_tokens: int) -> torch.Tensor:
    """Greedy decoding without a cache, cropping to the last context_length
    tokens (as exercise 13's generate): what generate_cached must return."""
    for _ in range(max_new_tokens):
        logits = gpt(idx[:, -gpt.context_length:])
        idx = torch.cat([idx, logits[:, -1].argmax(dim=-1, keepdim=True)], dim=1)
    return idx


def left_pad(prompts: list[torch.Tensor], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(idx, pad_mask) of the prompts left padded to the longest: pad_mask True at padding."""
    longest = max(len(p) for p in prompts)
    idx = torch.full((len(prompts), longest), pad_id, dtype=torch.long)
    pad_mask = torch.ones(len(prompts), longest, dtype=torch.bool)
    for row, prompt in enumerate(prompts):
        idx[row, longest - len(prompt):] = prompt
        pad_mask[row, longest - len(prompt):] = False
    return idx, pad_mask


# --- probes -------------------------------------------------------------------

@torch.no_grad()
def steps(module: ModuleType, config: dict, seed: int, idx: torch.Tensor, chunks: list[int]) -> dict:
    """Feed ``idx`` to forward_cached in chunks of the given sizes (the
    first is the prefill; 1 = one token at a time) through one cache: the
    logits of every step side by side (b, n, vocab), and len(cache) after
    each step."""
    gpt = model(module, config, seed)
    cache = new_cache(module, config)
    outputs, lengths, start = [], [], 0
    for size in chunks:
        outputs.append(module.forward_cached(gpt, idx[:, start:start + size], cache))
        start += size
        lengths.append(len(cache))
    return {"logits": torch.cat(outputs, dim=1), "lengths": lengths}


@torch.no_grad()
def generation(module: ModuleType, config: dict, seed: int, idx: torch.Tensor, max_new_tokens: int,
               scale: float = 1.0) -> dict:
    """generate_cached's tokens, and whether ``idx`` came back unchanged."""
    gpt = model(module, config, seed, scale)
    before = idx.clone()
    tokens = module.generate_cached(gpt, idx, max_new_tokens)
    return {"tokens": tokens, "inputs_unchanged": bool(torch.equal(idx, before)), "inputs_after": idx.clone()}


@torch.no_grad()
def context_limit(module: ModuleType, config: dict, seed: int, idx: torch.Tensor) -> dict:
    """``idx`` holds context_length + 1 tokens. The exception ({"type": name
    or None}) of: appending one position to a full cache; forward_cached of
    one token after a full prefill; and len() of each cache after its
    refused attempt (a refused call stores nothing)."""
    gpt = model(module, config, seed)
    context = config["context_length"]
    full = new_cache(module, config)
    module.forward_cached(gpt, idx[:, :context], full)
    layer_kv = torch.zeros(idx.size(0), config["num_heads"], 1, config["d_model"] // config["num_heads"],
                           dtype=torch.float64)
    append = _error(lambda: full.append(0, layer_kv, layer_kv))
    # A refused append stores nothing: the full cache still holds context_length positions.
    after_refusal = len(full)
    cache = new_cache(module, config)
    module.forward_cached(gpt, idx[:, :context], cache)
    forward = _error(lambda: module.forward_cached(gpt, idx[:, context:context + 1], cache))
    return {"append": {"type": append}, "forward": {"type": forward},
            "length": len(cache) if forward is not None else None,
            "after_refusal": after_refusal if append is not None else None}


def _pad_run(module: ModuleType, gpt: nn.Module, config: dict, idx: torch.Tensor, pad_mask: torch.Tensor,
             next_ids: torch.Tensor) -> list[torch.Tensor]:
    """Prefill the padded batch, then one more token per row: each row's
    logits at its real positions, (length + 1, vocab)."""
    cache = new_cache(module, config)
    prefill = module.forward_cached(gpt, idx, cache, pad_mask)
    step_mask = torch.cat([pad_mask, torch.zeros_like(pad_mask[:, :1])], dim=1)
    step = module.forward_cached(gpt, next_ids, cache, step_mask)
    logits = torch.cat([prefill, step], dim=1)
    real = ~step_mask
    return [logits[row][real[row]] for row in range(idx.size(0))]


@torch.no_grad()
def padded(module: ModuleType, config: dict, seed: int, prompts: list[torch.Tensor], pad_id: int,
           next_ids: torch.Tensor, other_pads: torch.Tensor) -> dict:
    """Prompts of different lengths, left padded with ``pad_id``, through
    forward_cached (prefill, then one token ``next_ids`` per row): each
    row's logits at its real positions, and whether they stay the same
    (1e-9) when the padding holds other token ids (``other_pads``, one per
    padded column) and when the pad token's embedding changes."""
    gpt = model(module, config, seed)
    idx, pad_mask = left_pad(prompts, pad_id)
    rows = _pad_run(module, gpt, config, idx, pad_mask, next_ids)
    other = torch.where(pad_mask, other_pads[: idx.size(1)].expand_as(idx), idx)
    again = [_pad_run(module, gpt, config, other, pad_mask, next_ids)]
    with torch.no_grad():  # a pad row of the embedding far from the others
        gpt.tok_emb.weight[pad_id] += 10.0
    again.append(_pad_run(module, gpt, config, idx, pad_mask, next_ids))
    vocab = torch.arange(config["vocab_size"]) != pad_id   # a tied head moves the pad token's own logit
    same = all(torch.allclose(a[:, vocab], r[:, vocab], atol=1e-9, rtol=0, equal_nan=True)
               for run in again for a, r in zip(run, rows, strict=True))
    # "again": the rows themselves, for the grader to judge the invariance in
    # its own process ("pad_invariant" is for the public tests).
    return {"rows": rows, "again": again, "pad_invariant": same}


@torch.no_grad()
def batch(module: ModuleType, config: dict, seed: int, prompts: list[torch.Tensor], max_new_tokens: int,
          pad_id: int) -> dict:
    """generate_batch's outputs (one 1-D tensor per prompt), and the
    prompts unchanged."""
    gpt = model(module, config, seed)
    before = [p.clone() for p in prompts]
    out = module.generate_batch(gpt, prompts, max_new_tokens, pad_id)
    return {"tokens": [torch.as_tensor(t) for t in out],
            "inputs_unchanged": all(torch.equal(p, b) for p, b in zip(prompts, before, strict=True)),
            "inputs_after": [p.clone() for p in prompts]}


@torch.no_grad()
def batch_too_long(module: ModuleType, config: dict, seed: int, prompts: list[torch.Tensor],
                   max_new_tokens: int, pad_id: int) -> dict:
    """The exception (type) generate_batch raises when the longest prompt
    plus max_new_tokens exceeds context_length."""
    gpt = model(module, config, seed)
    return {"type": _error(lambda: module.generate_batch(gpt, prompts, max_new_tokens, pad_id))}


@torch.no_grad()
def cache_api(module: ModuleType, config: dict, seed: int, sizes: list[int]) -> dict:
    """KVCache by itself: len() of a new cache, then after appending chunks
    of ``sizes`` positions to every layer; whether append returns all of
    that layer's keys and values so far (the concatenation, in order)."""
    cache = new_cache(module, config)
    gen = torch.Generator().manual_seed(seed)
    heads, head_dim = config["num_heads"], config["d_model"] // config["num_heads"]
    lengths, concatenated, returned = [len(cache)], True, []
    seen: list[list[torch.Tensor]] = [[] for _ in range(config["num_layers"])]
    for size in sizes:
        for layer in range(config["num_layers"]):
            k = torch.randn(2, heads, size, head_dim, generator=gen, dtype=torch.float64)
            v = torch.randn(2, heads, size, head_dim, generator=gen, dtype=torch.float64)
            seen[layer].append((k, v))
            k_all, v_all = cache.append(layer, k, v)
            returned.append([k_all, v_all])   # compared with the reference's by the grader
            concatenated &= torch.equal(k_all, torch.cat([s[0] for s in seen[layer]], dim=2)) and \
                torch.equal(v_all, torch.cat([s[1] for s in seen[layer]], dim=2))
        lengths.append(len(cache))
    return {"lengths": lengths, "concatenated": bool(concatenated), "returned": returned}


# --- what a wrong result is made of (public tests' diagnoses) -----------------

def _record_positions(gpt: nn.Module, seen: list) -> object:
    """Record every tensor ``gpt.pos_emb`` is called with, as (b, n) rows."""
    def hook(_module, args):
        if args and isinstance(args[0], torch.Tensor):
            seen.append(args[0].detach().reshape(-1, args[0].shape[-1]).clone())
    return gpt.pos_emb.register_forward_pre_hook(hook)


@torch.no_grad()
def positions_seen(module: ModuleType, config: dict, seed: int, idx: torch.Tensor, chunks: list[int],
                   pad_mask: torch.Tensor | None = None) -> list[list[list[int]]]:
    """The positions forward_cached looks up in pos_emb at each step (a
    prefill, then chunks of ``chunks``' sizes), one list per row; with
    ``pad_mask`` (b, idx's length) the steps get its columns so far."""
    gpt = model(module, config, seed)
    cache = new_cache(module, config)
    found: list[list[list[int]]] = []
    start = 0
    for size in chunks:
        seen: list[torch.Tensor] = []
        handle = _record_positions(gpt, seen)
        try:
            mask = None if pad_mask is None else pad_mask[:, :start + size]
            module.forward_cached(gpt, idx[:, start:start + size], cache, mask)
        finally:
            handle.remove()
        rows = seen[0].expand(idx.size(0), -1) if seen and seen[0].size(0) == 1 else (seen[0] if seen else None)
        found.append(None if rows is None else rows.tolist())
        start += size
    return found


@torch.no_grad()
def sees_the_cache(module: ModuleType, config: dict, seed: int, idx: torch.Tensor, prefill: int) -> bool:
    """Does the one-token step after a prefill of ``prefill`` tokens change
    when the cached tokens 1 .. prefill-1 change (it must: it attends to them)?"""
    gpt = model(module, config, seed)
    other = idx.clone()
    other[:, 1:prefill] = (idx[:, 1:prefill] + 1) % config["vocab_size"]
    steps = []
    for tokens in (idx, other):
        cache = new_cache(module, config)
        module.forward_cached(gpt, tokens[:, :prefill], cache)
        steps.append(module.forward_cached(gpt, tokens[:, prefill:prefill + 1], cache))
    return not torch.allclose(steps[0], steps[1], atol=1e-9, rtol=0)


@torch.no_grad()
def chunk_is_causal(module: ModuleType, config: dict, seed: int, idx: torch.Tensor, prefill: int) -> bool:
    """After a prefill, a chunk of the remaining tokens: do the chunk's first
    token's logits stay the same when the chunk's last token changes (they must)?"""
    gpt = model(module, config, seed)
    other = idx.clone()
    other[:, -1] = (idx[:, -1] + 1) % config["vocab_size"]
    firsts = []
    for tokens in (idx, other):
        cache = new_cache(module, config)
        module.forward_cached(gpt, tokens[:, :prefill], cache)
        firsts.append(module.forward_cached(gpt, tokens[:, prefill:], cache)[:, 0])
    return torch.allclose(firsts[0], firsts[1], atol=1e-9, rtol=0)


def cached_placement(module: ModuleType, config: dict, idx: torch.Tensor, prefill: int,
                     pad_mask: torch.Tensor | None = None) -> dict:
    """:func:`coursekit.probes.placement.placement` of a prefill of
    ``prefill`` tokens and one more step through forward_cached with a new
    cache (and ``pad_mask`` when given), on PyTorch's meta device: every mask,
    position and cache tensor must be made on the inputs' device."""
    from coursekit.probes.placement import placement

    gpt_module = shipped_gpt(module)

    def run(gpt: nn.Module, tokens: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        cache = new_cache(module, config)
        first = module.forward_cached(gpt, tokens[:, :prefill], cache, None if mask is None else mask[:, :prefill])
        step = module.forward_cached(gpt, tokens[:, prefill:prefill + 1], cache,
                                     None if mask is None else mask[:, :prefill + 1])
        return torch.cat([first, step], dim=1)

    return placement(lambda: gpt_module.GPT(**config), (idx, pad_mask), call=run)
