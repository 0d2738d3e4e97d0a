"""Probes for exercise 16 (rotary position embeddings).

The functions ``rope_angles`` and ``apply_rope`` are called on inputs the
caller chose; the modules (``RoPEMultiHeadAttention``, ``RoPEGPT``) are the
submission's own, with weights drawn from the config and a seed and loaded
by name, in float64 and eval mode, so that the submission and the
reference hold the same numbers whatever order they create their layers in.

A probe returns tensors, never a verdict on them that counts: the grader
compares what comes back with the reference's results, and judges the
properties (scores that depend on i - j only, norms kept, an output that
does not move when every position shifts) from the returned tensors in its
own process. The booleans some probes add are for the public tests.
Nothing here computes RoPE: the public tests compare with stored values
(coursekit/fixtures/rope.pt, made by grader/fixtures_rope.py).
"""
from __future__ import annotations

from contextlib import contextmanager
from types import ModuleType

import torch
from torch import nn

from coursekit.probes import kept
from coursekit.probes.fed import fed_steps
from coursekit.probes.gpt import gpt_shapes, gpt_weights
from coursekit.probes.modules import load_weights, own_named_parameters
from coursekit.probes.multihead import random_weights
from coursekit.probes.threads import OneThread

F64 = torch.float64


def _error(call) -> dict:
    """{"type": the exception ``call()`` raises, or None}."""
    try:
        call()
    except NotImplementedError:
        raise
    except Exception as exc:  # noqa: BLE001 - which exception is the result
        return {"type": type(exc).__name__}
    return {"type": None}


# --- weights and models ---------------------------------------------------------

def rope_gpt_shapes(config: dict) -> dict[str, tuple[int, ...]]:
    """Parameter names and shapes of ``RoPEGPT(**config)``: 12's GPT without ``pos_emb``."""
    return {name: shape for name, shape in gpt_shapes(config).items() if not name.startswith("pos_emb.")}


def rope_gpt_weights(config: dict, seed: int) -> dict[str, torch.Tensor]:
    """Seeded weights of ``RoPEGPT(**config)`` by contract name (12's, without ``pos_emb``)."""
    return {name: w for name, w in gpt_weights(config, seed).items() if not name.startswith("pos_emb.")}


def model(module: ModuleType, config: dict, seed: int) -> nn.Module:
    """The submission's ``RoPEGPT(**config)`` with seeded weights, float64, eval mode."""
    gpt = module.RoPEGPT(**config)
    load_weights(gpt, rope_gpt_weights(config, seed))
    return gpt.to(F64).eval()


def attention_module(module: ModuleType, config: dict, seed: int) -> tuple[nn.Module, dict]:
    """The submission's ``RoPEMultiHeadAttention(**config)`` with seeded
    weights (06's names), float64, eval mode, and the load report."""
    attn = module.RoPEMultiHeadAttention(**config)
    load = load_weights(attn, {k: v.to(F64) for k, v in random_weights("MultiHeadAttention", config, seed).items()})
    return attn.to(F64).eval(), load


# --- the functions ----------------------------------------------------------------

def angles(module: ModuleType, context_length: int, head_dim: int, base: float | None = None) -> dict:
    """``rope_angles(context_length, head_dim[, base], dtype=float64)``: cos and sin."""
    extra = {} if base is None else {"base": base}
    cos, sin = module.rope_angles(context_length, head_dim, dtype=F64, **extra)
    return {"cos": cos, "sin": sin}


def rotate(module: ModuleType, x: torch.Tensor, positions: torch.Tensor, base: float | None = None) -> dict:
    """``apply_rope(x, positions[, base])``, and the inputs as they are after the call."""
    before = x.clone()
    extra = {} if base is None else {"base": base}
    rotated = module.apply_rope(x, positions, **extra)
    return {"rotated": rotated, "inputs_after": [x.clone(), positions.clone()],
            "inputs_unchanged": bool(torch.equal(x, before))}


def shifted(module: ModuleType, q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor, shift: int) -> dict:
    """q and k (b, h, n, hd) rotated by ``positions`` and by ``positions + shift``.
    The grader computes the scores from these in its own process; for the
    public tests, ``relative``: whether the scores q_i·k_j stay the same
    (1e-9), and ``norms_kept``: whether every rotated vector keeps its norm."""
    q_at, k_at = module.apply_rope(q, positions), module.apply_rope(k, positions)
    q_moved, k_moved = module.apply_rope(q, positions + shift), module.apply_rope(k, positions + shift)
    scores, moved = q_at @ k_at.transpose(-2, -1), q_moved @ k_moved.transpose(-2, -1)
    norms = all(torch.allclose(r.norm(dim=-1), v.norm(dim=-1), atol=1e-9, rtol=1e-9)
                for r, v in ((q_at, q), (k_at, k), (q_moved, q), (k_moved, k)))
    return {"q": q_at, "k": k_at, "q_shifted": q_moved, "k_shifted": k_moved, "inputs": [q.clone(), k.clone()],
            "relative": bool(torch.allclose(scores, moved, atol=1e-9, rtol=1e-9)), "norms_kept": norms}


@torch.no_grad()
def score_map(module: ModuleType, q: torch.Tensor, k: torch.Tensor, n: int) -> dict:
    """The same query q and key k (head_dim,) rotated at positions 0 .. n-1:
    ``scores[i, j] = (R_i q) · (R_j k)``, (n, n), for the feedback page's
    figure: constant along every diagonal when the scores depend on i - j only."""
    positions = torch.arange(n)
    rotated_q = module.apply_rope(q.expand(1, 1, n, -1), positions)[0, 0]
    rotated_k = module.apply_rope(k.expand(1, 1, n, -1), positions)[0, 0]
    return {"scores": rotated_q @ rotated_k.T}


def odd_head_dim(module: ModuleType, head_dim: int, num_heads: int) -> dict:
    """The exceptions (types) of ``rope_angles``, ``apply_rope`` and
    ``RoPEMultiHeadAttention`` for an odd ``head_dim``."""
    x = torch.ones(1, num_heads, 3, head_dim, dtype=F64)
    d = head_dim * num_heads
    return {"angles": _error(lambda: module.rope_angles(4, head_dim)),
            "apply": _error(lambda: module.apply_rope(x, torch.arange(3))),
            "attention": _error(lambda: module.RoPEMultiHeadAttention(d, d, 4, 0.0, num_heads))}


# --- the modules ------------------------------------------------------------------

@torch.no_grad()
def attention(module: ModuleType, config: dict, seed: int, x: torch.Tensor,
              positions: torch.Tensor | None, shift: int) -> dict:
    """``RoPEMultiHeadAttention`` on ``x`` (b, n, d_in): without positions,
    with ``positions`` ((n,) or (b, n)) and with ``positions + shift``. The
    grader judges the shifted output (equal to the other: only i - j
    counts) from the tensors."""
    attn, load = attention_module(module, config, seed)
    n = x.size(1)
    given = torch.arange(n) if positions is None else positions
    return {"default": attn(x), "output": attn(x, given), "shifted": attn(x, given + shift), "load": load}


@torch.no_grad()
def gpt_logits(module: ModuleType, config: dict, seed: int, idx: torch.Tensor) -> dict:
    """``RoPEGPT(**config)`` with seeded weights, float64, eval mode: the
    logits, the weight names that did not load (a ``pos_emb`` left in is
    one), the parameter names it registers, and whether ``idx`` came back
    unchanged."""
    gpt = module.RoPEGPT(**config)
    load = load_weights(gpt, rope_gpt_weights(config, seed))
    gpt = gpt.to(F64).eval()
    before = idx.clone()
    logits = gpt(idx)
    return {"logits": logits, "load": load, "parameters": sorted(name for name, _ in own_named_parameters(gpt)),
            "inputs_unchanged": bool(torch.equal(idx, before))}


def new_cache(module: ModuleType, config: dict):
    """14's ``KVCache``, as the submission imports it."""
    return module.KVCache(config["num_layers"], config["context_length"])


@torch.no_grad()
def steps(module: ModuleType, config: dict, seed: int, idx: torch.Tensor, chunks: list[int]) -> dict:
    """``forward_cached`` of ``idx`` in chunks of the given sizes through one
    cache (the first is the prefill): the logits of every step side by side
    (b, n, vocab), len(cache) after each step, and, for the public tests,
    the submission's own full forward ``model(idx)``."""
    gpt = model(module, config, seed)
    cache = new_cache(module, config)
    outputs, lengths, start = [], [], 0
    for size in chunks:
        outputs.append(module.forward_cached(gpt, idx[:, start:start + size], cache))
        start += size
        lengths.append(len(cache))
    return {"logits": torch.cat(outputs, dim=1), "lengths": lengths, "full": gpt(idx)}


def left_pad(prompts: list[torch.Tensor], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(idx, pad_mask) of the prompts left padded to the longest: pad_mask True at padding."""
    longest = max(len(p) for p in prompts)
    idx = torch.full((len(prompts), longest), pad_id, dtype=torch.long)
    pad_mask = torch.ones(len(prompts), longest, dtype=torch.bool)
    for row, prompt in enumerate(prompts):
        idx[row, longest - len(prompt):] = prompt
        pad_mask[row, longest - len(prompt):] = False
    return idx, pad_mask


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
           next_ids: torch.Tensor) -> dict:
    """Prompts of different lengths, left padded with ``pad_id``, through
    ``forward_cached`` (prefill, then one token ``next_ids`` per row): each
    row's logits at its real positions; ``alone``, for the public tests:
    each prompt and its next token through the submission's own
    ``model(...)``, unpadded."""
    gpt = model(module, config, seed)
    idx, pad_mask = left_pad(prompts, pad_id)
    rows = _pad_run(module, gpt, config, idx, pad_mask, next_ids)
    alone = [gpt(torch.cat([p, next_ids[row]])[None])[0] for row, p in enumerate(prompts)]
    return {"rows": rows, "alone": alone}


@contextmanager
def _recording(module: ModuleType, seen: list):
    """Record the positions every call of the module's ``apply_rope`` gets
    (as (rows, n) lists), for the public tests' diagnoses; calls that do
    not go through the module's global name are not seen."""
    original = module.apply_rope

    def recorder(x, positions, *args, **kwargs):
        seen.append(torch.as_tensor(positions).reshape(-1, torch.as_tensor(positions).shape[-1]).tolist())
        return original(x, positions, *args, **kwargs)

    module.apply_rope = recorder
    try:
        yield
    finally:
        module.apply_rope = original


@torch.no_grad()
def positions_seen(module: ModuleType, config: dict, seed: int, idx: torch.Tensor, chunks: list[int],
                   pad_mask: torch.Tensor | None = None) -> list:
    """The positions ``forward_cached`` rotates with at each step (the first
    call of apply_rope in the step), one list per row; None for a step
    that never called the module's apply_rope."""
    gpt = model(module, config, seed)
    cache = new_cache(module, config)
    found, start = [], 0
    for size in chunks:
        seen: list = []
        with _recording(module, seen):
            mask = None if pad_mask is None else pad_mask[:, :start + size]
            module.forward_cached(gpt, idx[:, start:start + size], cache, mask)
        rows = seen[0] if seen else None
        found.append(None if rows is None else (rows * idx.size(0) if len(rows) == 1 else rows))
        start += size
    return found


def cached_placement(module: ModuleType, config: dict, idx: torch.Tensor, prefill: int,
                     pad_mask: torch.Tensor | None = None) -> dict:
    """:func:`coursekit.probes.placement.placement` of a prefill of
    ``prefill`` tokens and one more step through forward_cached with a new
    cache (and ``pad_mask`` when given), on PyTorch's meta device: every
    position, angle and mask tensor must be made on the inputs' device."""
    from coursekit.probes.placement import placement

    def run(gpt: nn.Module, tokens: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        cache = new_cache(module, config)
        first = module.forward_cached(gpt, tokens[:, :prefill], cache, None if mask is None else mask[:, :prefill])
        step = module.forward_cached(gpt, tokens[:, prefill:prefill + 1], cache,
                                     None if mask is None else mask[:, :prefill + 1])
        return torch.cat([first, step], dim=1)

    return placement(lambda: module.RoPEGPT(**config), (idx, pad_mask), call=run)


# --- the work a cache saves, measured by the grader from outside ------------
# As exercise 14's (coursekit/probes/kv_cache_cost.py): the grader reads the
# child's CPU time around each call, sent alone; one thread.
_KEPT: dict[str, object] = {}


@torch.no_grad()
def cost_prefill(module: ModuleType, config: dict, seed: int, idx: torch.Tensor) -> dict:
    """forward_cached of the prompt ``idx`` into a new cache, kept with the
    model for :func:`cost_steps`: the last position's logits."""
    _KEPT["cache"] = NotImplementedError
    gpt = model(module, config, seed)
    try:
        cache = new_cache(module, config)
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
    a time, fed from ``first`` (b, 1) (coursekit/probes/fed.py)."""
    found = _KEPT.get("cache", RuntimeError)
    if not isinstance(found, tuple):
        raise found("the prefill before these steps did not complete")
    gpt, cache = _KEPT.pop("cache")
    with OneThread():
        logits = fed_steps(lambda new: module.forward_cached(gpt, new, cache), first, count)
    return {"logits": logits}


def cost_model(module: ModuleType, config: dict, seed: int) -> dict:
    """Build the model for the timed calls that follow (:mod:`coursekit.probes.kept`)."""
    return kept.build_ahead(model, module, config, seed)


@torch.no_grad()
def cost_full(module: ModuleType, config: dict, seed: int, idx: torch.Tensor, repeats: int = 1) -> dict:
    """``repeats`` full forwards of ``RoPEGPT`` over ``idx``: the grader's
    yardstick of a recomputation (timed in the reference's run)."""
    gpt = kept.built(model, module, config, seed)
    with OneThread():
        for _ in range(repeats):
            logits = gpt(idx)
    return {"logits": logits[:, -1]}
