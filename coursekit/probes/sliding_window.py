"""Probes for exercise 18 (sliding-window attention with a rolling cache).

The model is exercise 12's reference GPT, the ``gpt.py`` shipped in the
submission's folder, with weights drawn from the config and a seed
(:func:`coursekit.probes.gpt.gpt_weights`), in float64 and eval mode, and
WITHOUT positions: ``pos_emb`` is set to None after loading (NoPE), so
nothing in it depends on an absolute position and sequences may run far
past ``context_length``.

The student's functions only ever receive the model (or one of its
attention modules), token ids or hidden states, and a cache they made
themselves; what they return is all a probe reports. Nothing here computes
a graded answer: the public tests compare with stored values
(coursekit/fixtures/sliding_window_18.py) and with properties (a cached
step equals the submission's own recomputation), the hidden checks with
the reference's run.
"""
from __future__ import annotations

from types import ModuleType

import torch
from torch import nn

from coursekit.loader import load_shipped
from coursekit.probes import kept
from coursekit.probes.fed import fed_steps
from coursekit.probes.gpt import gpt_weights
from coursekit.probes.modules import load_weights
from coursekit.probes.threads import OneThread


def nope_model(module: ModuleType, config: dict, seed: int) -> nn.Module:
    """The shipped ``GPT(**config)`` with seeded weights, float64, eval
    mode, and no positions (``pos_emb`` None)."""
    gpt = load_shipped(module, "gpt").GPT(**config)
    load_weights(gpt, gpt_weights(config, seed))
    gpt = gpt.to(torch.float64).eval()
    gpt.pos_emb = None
    return gpt


def _error(call) -> str | None:
    """The type of the exception ``call()`` raises (None if none)."""
    try:
        call()
    except NotImplementedError:
        raise
    except Exception as exc:  # noqa: BLE001 - which exception is the result
        return type(exc).__name__
    return None


# --- the mask and the receptive field ----------------------------------------

def masks(module: ModuleType, cases: list[tuple[int, int, int, int]]) -> dict:
    """sliding_window_mask(n_query, n_key, window, offset) for each case."""
    return {"masks": [module.sliding_window_mask(nq, nk, window, offset) for nq, nk, window, offset in cases]}


def receptive_fields(module: ModuleType, cases: list[tuple[int, int]]) -> dict:
    """receptive_field(num_layers, window) for each case, as ints."""
    return {"fields": [int(module.receptive_field(layers, window)) for layers, window in cases]}


def domain_errors(module: ModuleType) -> dict:
    """The exceptions (type names) of a window of 0 given to the mask, the
    cache and receptive_field, and of num_layers -1."""
    return {"mask": _error(lambda: module.sliding_window_mask(3, 3, 0)),
            "cache": _error(lambda: module.RollingKVCache(2, 0)),
            "field_window": _error(lambda: module.receptive_field(2, 0)),
            "field_layers": _error(lambda: module.receptive_field(-1, 3))}


# --- windowed attention and the windowed model ---------------------------------

@torch.no_grad()
def attention(module: ModuleType, config: dict, seed: int, x: torch.Tensor, window: int,
              pad_mask: torch.Tensor | None = None) -> dict:
    """sliding_window_attention on block 0's attention of the seeded model:
    the output (b, n, d), and x after the call."""
    attn = nope_model(module, config, seed).blocks[0].attn
    before = x.clone()
    output = module.sliding_window_attention(attn, x, window, pad_mask)
    return {"output": output, "inputs_unchanged": bool(torch.equal(x, before)), "inputs_after": x.clone()}


@torch.no_grad()
def forward(module: ModuleType, config: dict, seed: int, idx: torch.Tensor, window: int,
            pad_mask: torch.Tensor | None = None) -> dict:
    """windowed_forward's logits on the seeded NoPE model, and idx after the call."""
    gpt = nope_model(module, config, seed)
    before = idx.clone()
    logits = module.windowed_forward(gpt, idx, window, pad_mask)
    return {"logits": logits, "inputs_unchanged": bool(torch.equal(idx, before)), "inputs_after": idx.clone()}


@torch.no_grad()
def pad_invariance(module: ModuleType, config: dict, seed: int, idx: torch.Tensor, window: int,
                   pad_mask: torch.Tensor, other_pads: torch.Tensor) -> dict:
    """windowed_forward of a padded batch, and again with other token ids
    at the padding (``other_pads``, one per column): the logits at the real
    positions of both runs (they must be equal), and whether all are finite."""
    gpt = nope_model(module, config, seed)
    other = torch.where(pad_mask, other_pads[: idx.size(1)].expand_as(idx), idx)
    runs = [module.windowed_forward(gpt, tokens, window, pad_mask) for tokens in (idx, other)]
    real = [run[~pad_mask] for run in runs]
    return {"real": real[0], "again": real[1], "finite": bool(all(torch.isfinite(r).all() for r in real))}


# --- pictures (feedback figures and the README's figure) ------------------------

def window_picture(module: ModuleType, n: int, window: int) -> dict:
    """sliding_window_mask(n, n, window) as what each query sees: 1 where
    it may attend, 0 where blocked (n, n), float64."""
    return {"visible": (~module.sliding_window_mask(n, n, window).bool()).to(torch.float64)}


def reach(module: ModuleType, config: dict, seed: int, n: int, window: int, depths: list[int]) -> dict:
    """Which positions can influence the last token's logits through
    windowed_forward, for models of each depth in ``depths``: (len(depths),
    n), 1 where the gradient of the last position's logits reaches that
    position's embedding, else 0. Measured on the submission's own model."""
    rows = []
    for depth in depths:
        gpt = nope_model(module, {**config, "num_layers": depth}, seed)
        found: list[torch.Tensor] = []

        def keep(_module, _args, output):
            output.retain_grad()
            found.append(output)

        handle = gpt.tok_emb.register_forward_hook(keep)
        try:
            with torch.enable_grad():
                logits = module.windowed_forward(gpt, torch.arange(n)[None] % config["vocab_size"], window)
                logits[0, -1].sum().backward()
        finally:
            handle.remove()
        grad = found[0].grad if found and found[0].grad is not None else torch.zeros(1, n, 1)
        rows.append((grad[0].abs().sum(-1) > 0).to(torch.float64))
    return {"reach": torch.stack(rows)}


# --- the rolling cache -----------------------------------------------------------

@torch.no_grad()
def steps(module: ModuleType, config: dict, seed: int, idx: torch.Tensor, window: int, chunks: list[int]) -> dict:
    """Feed ``idx`` to forward_cached in chunks of the given sizes through
    one RollingKVCache(num_layers, window): the logits of every step side
    by side (b, n, vocab); len(cache) and cache.seen after each step; the
    ring buffers (keys and values of every layer) after each step."""
    gpt = nope_model(module, config, seed)
    cache = module.RollingKVCache(config["num_layers"], window)
    before = idx.clone()
    outputs, held, seen, rings, start = [], [], [], [], 0
    for size in chunks:
        outputs.append(module.forward_cached(gpt, idx[:, start:start + size], cache))
        start += size
        held.append(int(len(cache)))
        seen.append(int(cache.seen))
        rings.append([[k.clone(), v.clone()] for k, v in zip(cache.keys, cache.values, strict=True)])
    return {"logits": torch.cat(outputs, dim=1), "held": held, "seen": seen, "rings": rings,
            "inputs_unchanged": bool(torch.equal(idx, before)), "inputs_after": idx.clone()}


@torch.no_grad()
def tagged_appends(module: ModuleType, window: int, sizes: list[int]) -> dict:
    """RollingKVCache(1, window) by itself: chunks of ``sizes`` positions
    appended to layer 0, each key and value holding its own position (and
    minus it). What each append returns (positions as ints, keys, values)
    and cache.keys[0], cache.values[0] and len(cache) after it."""
    cache = module.RollingKVCache(1, window)
    returned, rings, held, start = [], [], [], 0
    for size in sizes:
        tag = torch.arange(start, start + size, dtype=torch.float64).reshape(1, 1, size, 1).expand(2, 2, size, 3)
        keys, values, positions = cache.append(0, tag.clone(), -tag)
        returned.append({"positions": [int(p) for p in positions], "keys": keys, "values": values})
        rings.append([cache.keys[0].clone(), cache.values[0].clone()])
        held.append(int(len(cache)))
        start += size
    return {"returned": returned, "rings": rings, "held": held}


def ring_sizes(result: dict) -> list[int]:
    """The most positions any layer's keys or values held after each step of :func:`steps`."""
    return [max(t.size(-2) for pair in step for t in pair) for step in result["rings"]]


def placement(module: ModuleType, config: dict, idx: torch.Tensor, window: int, prefill: int,
              pad_mask: torch.Tensor | None = None) -> dict:
    """:func:`coursekit.probes.placement.placement` of windowed_forward
    over ``idx`` (with ``pad_mask`` when given), then forward_cached of a
    prefill of ``prefill`` tokens and the rest one by one through a new
    cache, on PyTorch's meta device: every mask, position and cache tensor
    must be made on the inputs' device."""
    from coursekit.probes.placement import placement as on_meta

    gpt_module = load_shipped(module, "gpt")

    def build() -> nn.Module:
        gpt = gpt_module.GPT(**config)
        gpt.pos_emb = None
        return gpt

    def run(gpt: nn.Module, tokens: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        full = module.windowed_forward(gpt, tokens, window, mask)
        cache = module.RollingKVCache(config["num_layers"], window)
        steps = [module.forward_cached(gpt, tokens[:, :prefill], cache)]
        steps += [module.forward_cached(gpt, tokens[:, t:t + 1], cache) for t in range(prefill, tokens.size(1))]
        return torch.cat([full, *steps], dim=1)

    return on_meta(build, (idx, pad_mask), call=run)


# --- the work a cache saves, measured by the grader from outside ------------
# As exercise 14's (coursekit/probes/kv_cache_cost.py): the grader reads the
# child's CPU time around each call, sent alone; one thread.
_KEPT: dict[str, object] = {}


@torch.no_grad()
def cost_prefill(module: ModuleType, config: dict, seed: int, idx: torch.Tensor, window: int) -> dict:
    """forward_cached of ``idx`` (b, P) into a new cache, kept with the
    model for :func:`cost_steps`: the last position's logits."""
    _KEPT["cache"] = NotImplementedError
    gpt = nope_model(module, config, seed)
    try:
        cache = module.RollingKVCache(config["num_layers"], window)
        with OneThread():
            logits = module.forward_cached(gpt, idx, cache)
    except NotImplementedError:
        raise
    except Exception:
        _KEPT["cache"] = RuntimeError
        raise
    _KEPT["cache"] = (gpt, cache)
    return {"logits": logits[:, -1]}


@torch.no_grad()
def cost_steps(module: ModuleType, first: torch.Tensor, count: int) -> dict:
    """After :func:`cost_prefill`: forward_cached of ``count`` tokens one at
    a time through the kept cache, fed from ``first`` (b, 1)
    (coursekit/probes/fed.py): the logits (b, count, vocab)."""
    found = _KEPT.pop("cache", RuntimeError)
    if not isinstance(found, tuple):
        raise found("the prefill before these steps did not complete")
    gpt, cache = found
    with OneThread():
        logits = fed_steps(lambda new: module.forward_cached(gpt, new, cache), first, count)
    return {"logits": logits}


def cost_model(module: ModuleType, config: dict, seed: int) -> dict:
    """Build the model for the timed calls that follow (:mod:`coursekit.probes.kept`)."""
    return kept.build_ahead(nope_model, module, config, seed)


@torch.no_grad()
def cost_full(module: ModuleType, config: dict, seed: int, idx: torch.Tensor, window: int,
              repeats: int = 1) -> dict:
    """``repeats`` windowed_forwards over ``idx``: what a step costs when it
    recomputes the whole sequence (the grader's yardstick, from the
    reference's run)."""
    gpt = kept.built(nope_model, module, config, seed)
    with OneThread():
        for _ in range(repeats):
            logits = module.windowed_forward(gpt, idx, window)
    return {"logits": logits[:, -1]}
