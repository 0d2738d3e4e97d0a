"""Probes for exercise 17 (grouped-query attention).

The module-level probes build ``GroupedQueryAttention`` themselves from a
plain ``config`` (the constructor's keyword arguments) and seeded weights
by name (:func:`random_weights`), so the grader calls them with plain data.
The forward pass, the state, the errors, dropout and gradients are probed
with exercise 06's generic probes (:mod:`coursekit.probes.multihead`),
which take any class name; what is GQA's own is here: ``repeat_kv``, the
comparison with the shipped ``MultiHeadAttention``, the cache.

What the cache holds is judged from what is returned, never from what the
submission says about itself: :func:`cached_steps` builds a FRESH module
for every step (same weights) and hands it a CLONE of the keys and values
the previous step returned, alternating between two sequences. The returned
tensors are then the only state that can carry the past from step to step,
so when the cached outputs equal the recomputation, those tensors really
are the cache, and their size is what it costs.
"""
from __future__ import annotations

from types import ModuleType

import torch
from torch import nn

from coursekit.loader import load_shipped
from coursekit.probes import modules

GQA = "GroupedQueryAttention"


def random_weights(config: dict, seed: int, scale: float = 0.5,
                   dtype: torch.dtype = torch.float32) -> dict[str, torch.Tensor]:
    """A state dict for ``GroupedQueryAttention(**config)`` under the
    contract's names, drawn from ``seed``: W_query.weight (d_out, d_in),
    W_key.weight and W_value.weight (num_kv_heads * head_dim, d_in) (+ .bias
    if qkv_bias), out_proj.weight (d_out, d_out), out_proj.bias (d_out,)."""
    gen = torch.Generator().manual_seed(seed)
    d_in, d_out = config["d_in"], config["d_out"]
    kv_dim = config["num_kv_heads"] * (d_out // config["num_heads"])
    weights = {}
    for name, rows in (("W_query", d_out), ("W_key", kv_dim), ("W_value", kv_dim)):
        weights[f"{name}.weight"] = torch.randn(rows, d_in, generator=gen, dtype=dtype) * scale
        if config.get("qkv_bias", False):
            weights[f"{name}.bias"] = torch.randn(rows, generator=gen, dtype=dtype) * scale
    weights["out_proj.weight"] = torch.randn(d_out, d_out, generator=gen, dtype=dtype) * scale
    weights["out_proj.bias"] = torch.randn(d_out, generator=gen, dtype=dtype) * scale
    return weights


def expanded_weights(config: dict, weights: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The same weights for exercise 06's ``MultiHeadAttention``: key/value
    head j's rows copied for each of the query heads it serves (heads
    j * n_rep .. (j + 1) * n_rep - 1). Equal outputs are what grouping means."""
    n_rep = config["num_heads"] // config["num_kv_heads"]
    head_dim = config["d_out"] // config["num_heads"]
    found = dict(weights)
    for name in ("W_key", "W_value"):
        for part in ("weight", "bias"):
            if (t := weights.get(f"{name}.{part}")) is not None:
                found[f"{name}.{part}"] = t.unflatten(0, (-1, head_dim)).repeat_interleave(n_rep, 0).flatten(0, 1)
    return found


def model(module: ModuleType, config: dict, weights: dict[str, torch.Tensor],
          dtype: torch.dtype = torch.float64) -> nn.Module:
    """``GroupedQueryAttention(**config)`` in ``dtype`` with ``weights`` loaded, eval mode."""
    gqa = getattr(module, GQA)(**config).to(dtype)
    modules.load_weights(gqa, {k: v.to(dtype) for k, v in weights.items()})
    return gqa.eval()


def shipped_multihead(module: ModuleType) -> ModuleType:
    """The ``multihead`` module shipped beside the submission (exercise 06's reference)."""
    return load_shipped(module, "multihead")


# ---------------------------------------------------------------- repeat_kv and the bytes


def repeat_kv_output(module: ModuleType, x: torch.Tensor, n_rep: int) -> dict:
    """``module.repeat_kv(x, n_rep)``, and whether ``x`` came back unchanged."""
    before = x.clone()
    output = module.repeat_kv(x, n_rep)
    return {"output": output, "input_unchanged": bool(torch.equal(x, before)), "input_after": x.clone()}


def bytes_per_token(module: ModuleType, configs: list[dict]) -> dict:
    """``cache_bytes_per_token(**config)`` for each config (dtype by name)."""
    values = []
    for config in configs:
        kwargs = dict(config)
        if "dtype" in kwargs:
            kwargs["dtype"] = getattr(torch, kwargs["dtype"])
        values.append(int(module.cache_bytes_per_token(**kwargs)))
    return {"bytes": values}


# ---------------------------------------------------------------- against exercise 06


@torch.no_grad()
def against_multihead(module: ModuleType, config: dict, seed: int, x: torch.Tensor) -> dict:
    """GroupedQueryAttention (float64, eval) with seeded weights, and the
    shipped MultiHeadAttention with the same weights expanded (each
    key/value head's rows copied for its query heads; just copied when
    num_kv_heads == num_heads). Both outputs: they must be equal. The
    grader compares the submission's ``output`` with the reference run's
    ``multihead``, computed beside the reference only."""
    weights = random_weights(config, seed, dtype=torch.float64)
    before = x.clone()
    output = model(module, config, weights)(x)
    mha_config = {k: v for k, v in config.items() if k != "num_kv_heads"}
    mha = shipped_multihead(module).MultiHeadAttention(**mha_config).to(torch.float64)
    modules.load_weights(mha, expanded_weights(config, weights))
    return {"output": output, "multihead": mha.eval()(x), "input_unchanged": bool(torch.equal(x, before))}


# ---------------------------------------------------------------- the cache


def _clone(kv: object) -> object:
    """A fresh copy of what a step returned as its cache: plain tensors only
    (anything else is passed on as it is, and fails there)."""
    if isinstance(kv, (tuple, list)) and len(kv) == 2 and all(isinstance(t, torch.Tensor) for t in kv):
        return tuple(t.detach().clone().as_subclass(torch.Tensor) for t in kv)
    return kv


@torch.no_grad()
def cached_steps(module: ModuleType, config: dict, seed: int, xs: list[torch.Tensor], chunks: list[int]) -> dict:
    """Two (or more) sequences ``xs`` (b_i, N, d_in), each fed in chunks of
    ``chunks``' sizes through ``forward_cached``, the sequences' steps
    alternating; every step gets a fresh module (same weights, float64, eval)
    and a clone of the keys and values its sequence's previous step returned.

    Per sequence: the outputs of all steps concatenated (b_i, N, d_out); the
    recomputation, the submission's own ``forward`` of all N tokens; the
    cache (keys, values) after each step; and whether the inputs (x and the
    past keys/values handed in) came back unchanged.
    """
    weights = random_weights(config, seed, dtype=torch.float64)
    past: list[object] = [None] * len(xs)
    outputs: list[list[torch.Tensor]] = [[] for _ in xs]
    caches: list[list[object]] = [[] for _ in xs]
    unchanged = True
    start = 0
    for size in chunks:
        for i, x in enumerate(xs):
            new = x[:, start:start + size].clone()
            given = _clone(past[i])
            snapshot = (new.clone(), _clone(given))
            output, kv = model(module, config, weights).forward_cached(new, given)
            unchanged &= torch.equal(new, snapshot[0]) and (
                given is None or all(torch.equal(a, b) for a, b in zip(given, snapshot[1])))
            outputs[i].append(output)
            past[i] = _clone(kv)
            caches[i].append(past[i])
        start += size
    full = [model(module, config, weights)(x) for x in xs]
    return {"outputs": [torch.cat(o, dim=1) for o in outputs], "full": full,
            "caches": [[list(kv) if isinstance(kv, tuple) else kv for kv in c] for c in caches],
            "inputs_unchanged": bool(unchanged)}


@torch.no_grad()
def cached_too_long(module: ModuleType, config: dict, seed: int, x: torch.Tensor, prefill: int) -> dict:
    """A prefill of ``prefill`` tokens, then forward_cached of the rest of
    ``x``, which ends past context_length: the exception (type) raised."""
    weights = random_weights(config, seed, dtype=torch.float64)
    gqa = model(module, config, weights)
    _, kv = gqa.forward_cached(x[:, :prefill])
    try:
        gqa.forward_cached(x[:, prefill:], kv)
    except NotImplementedError:
        raise
    except Exception as exc:  # noqa: BLE001 - which exception is the result
        return {"type": type(exc).__name__}
    return {"type": None}


def measured_bytes_per_token(kv: object) -> float | None:
    """The bytes per token of one sequence that a cache (keys, values) of
    shape (b, heads, t, head_dim) holds, from its tensors alone; None when
    it is not a pair of 4-D tensors. The grader runs this on what came back."""
    if not (isinstance(kv, (tuple, list)) and len(kv) == 2
            and all(isinstance(t, torch.Tensor) and t.dim() == 4 for t in kv)):
        return None
    batch, tokens = kv[0].size(0), kv[0].size(2)
    if batch * tokens == 0:
        return None
    return sum(t.numel() * t.element_size() for t in kv) / (batch * tokens)


def cached_placement(module: ModuleType, config: dict, x: torch.Tensor, prefill: int) -> dict:
    """:func:`coursekit.probes.placement.placement` of a prefill of
    ``prefill`` tokens of ``x`` and the rest as one more cached step, on
    PyTorch's meta device: every mask and constant made on the inputs' device."""
    from coursekit.probes.placement import placement

    def run(gqa: nn.Module, tokens: torch.Tensor) -> torch.Tensor:
        first, kv = gqa.forward_cached(tokens[:, :prefill])
        step, _ = gqa.forward_cached(tokens[:, prefill:], kv)
        return torch.cat([first, step], dim=1)

    return placement(lambda: getattr(module, GQA)(**config).eval(), (x,), call=run)
