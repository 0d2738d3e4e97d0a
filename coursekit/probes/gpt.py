"""Probes for exercise 12 (a GPT: pre-norm blocks, tied embeddings).

Weights come from the *config*, never from the module under test:
:func:`gpt_weights` draws a state_dict in the contract's names from a seed,
and every probe loads it by name. A submission and the reference built from
the same config and seed then hold the same weights whatever order they
create their layers in, and tied weights get the same values under both
names (a model that copies instead of sharing computes the same logits: only
:func:`tying` tells them apart, by what an optimiser step does).

Nothing here computes a graded answer: the public tests compare with
stored values (coursekit/fixtures, generated from the reference), the
hidden checks with the reference's run; PyTorch's own pre-norm layer, which
computes the same, is an oracle on the trusted side only (grader/gpt_oracle.py).
"""
from __future__ import annotations

from types import ModuleType

import torch
from torch import nn

from coursekit.probes import warm
from coursekit.probes.dropout import FixedDropout
from coursekit.probes.modules import (hidden_list_modules, load_weights, own_named_parameters, train_eval_outputs,
                                      walk_modules)
from coursekit.probes.placement import forward_placement

Weights = dict[str, torch.Tensor]

DEFAULTS = {"dropout": 0.0, "qkv_bias": False, "tie_weights": True}


def _full(config: dict) -> dict:
    return {**DEFAULTS, **config}


def block_shapes(d_model: int, qkv_bias: bool, prefix: str = "") -> dict[str, tuple[int, ...]]:
    """Parameter names and shapes of one ``GPTBlock`` in the contract's names."""
    d = d_model
    shapes = {"norm1.weight": (d,), "norm1.bias": (d,), "norm2.weight": (d,), "norm2.bias": (d,),
              "attn.out_proj.weight": (d, d), "attn.out_proj.bias": (d,),
              "ff.0.weight": (4 * d, d), "ff.0.bias": (4 * d,), "ff.2.weight": (d, 4 * d), "ff.2.bias": (d,)}
    for role in ("W_query", "W_key", "W_value"):
        shapes[f"attn.{role}.weight"] = (d, d)
        if qkv_bias:
            shapes[f"attn.{role}.bias"] = (d,)
    return {prefix + name: shape for name, shape in shapes.items()}


def gpt_shapes(config: dict) -> dict[str, tuple[int, ...]]:
    """Parameter names and shapes of ``GPT(**config)`` (``head.weight``
    included, tied or not: ``state_dict()`` lists both names)."""
    c = _full(config)
    d = c["d_model"]
    shapes = {"tok_emb.weight": (c["vocab_size"], d), "pos_emb.weight": (c["context_length"], d),
              "final_norm.weight": (d,), "final_norm.bias": (d,), "head.weight": (c["vocab_size"], d)}
    for i in range(c["num_layers"]):
        shapes.update(block_shapes(d, c["qkv_bias"], f"blocks.{i}."))
    return shapes


def _draw(shapes: dict[str, tuple[int, ...]], seed: int, scale: float) -> Weights:
    """Seeded values in sorted name order: LayerNorm weights 1 + U(-0.1, 0.1),
    other vectors U(-0.1, 0.1), embeddings N(0, 1), matrices Xavier-uniform;
    everything but the LayerNorms times ``scale``."""
    gen = torch.Generator().manual_seed(seed)
    weights = {}
    for name, shape in sorted(shapes.items()):
        if "norm" in name.rsplit(".", 2)[-2] and name.endswith(".weight"):
            weights[name] = 1.0 + torch.empty(shape).uniform_(-0.1, 0.1, generator=gen)
            continue
        if len(shape) == 1:
            value = torch.empty(shape).uniform_(-0.1, 0.1, generator=gen)
        elif "emb" in name:
            value = torch.randn(shape, generator=gen)
        else:
            value = nn.init.xavier_uniform_(torch.empty(shape), generator=gen)
        weights[name] = value * (1.0 if "norm" in name else scale)
    return weights


def block_weights(config: dict, seed: int) -> Weights:
    """Seeded weights of ``GPTBlock(**config)`` by contract name."""
    c = _full(config)
    return _draw(block_shapes(c["d_model"], c["qkv_bias"]), seed, 1.0)


def gpt_weights(config: dict, seed: int, scale: float = 1.0) -> Weights:
    """Seeded weights of ``GPT(**config)`` by contract name; when tied,
    ``head.weight`` holds the values of ``tok_emb.weight``."""
    weights = _draw(gpt_shapes(config), seed, scale)
    if _full(config)["tie_weights"]:
        weights["head.weight"] = weights["tok_emb.weight"]
    return weights


# --- probes ------------------------------------------------------------------
# What a model registers is read from nn.Module's own tables (the
# ``own_*`` walkers), never from methods a submission could override.

def parameters_by_every_name(model: nn.Module) -> dict[str, nn.Parameter]:
    """Every parameter under every name ``state_dict()`` would give it: a
    tied matrix appears as ``tok_emb.weight`` and ``head.weight``."""
    found = {}
    for prefix, sub in walk_modules(model, dedupe=False):
        table = object.__getattribute__(sub, "__dict__").get("_parameters") or {}  # nn.Module's own table
        found |= {f"{prefix}{'.' if prefix else ''}{name}": p for name, p in table.items() if p is not None}
    return found


def build(module: ModuleType, cls: str, config: dict) -> nn.Module:
    return getattr(module, cls)(**config)


def _positions_hook(model: nn.Module, seen: dict):
    """Record what ``model.pos_emb`` is called with (if it is called as a module)."""
    pos_emb = getattr(model, "pos_emb", None)
    if not isinstance(pos_emb, nn.Module):
        return None

    def hook(_module, args):
        if args and isinstance(args[0], torch.Tensor) and args[0].dim() >= 1:
            # (n,) or one row per sequence, (b, n): report one row when they agree.
            rows = {tuple(row) for row in args[0].detach().reshape(-1, args[0].shape[-1]).tolist()}
            seen["positions"] = list(rows.pop()) if len(rows) == 1 else sorted(map(list, rows))
    return pos_emb.register_forward_pre_hook(hook)


def logits(module: ModuleType, config: dict, seed: int, idx: torch.Tensor, scale: float = 1.0) -> dict:
    """``GPT(**config)`` with :func:`gpt_weights` (times ``scale``), eval mode:
    the logits, the weight-loading report, whether a second call repeats
    them, whether ``idx`` came back unchanged, and the positions ``pos_emb``
    was called with (None if not called as a module)."""
    model = build(module, "GPT", config)
    load = load_weights(model, gpt_weights(config, seed, scale))
    model.eval()
    seen: dict = {}
    handle = _positions_hook(model, seen)
    before = idx.clone()
    try:
        with torch.no_grad():
            out = model(idx)
            again = model(idx)
    finally:
        if handle is not None:
            handle.remove()
    return {"logits": out, "load": load, "positions": seen.get("positions"),
            "repeatable": isinstance(out, torch.Tensor) and isinstance(again, torch.Tensor) and torch.equal(out, again),
            "inputs_unchanged": bool(torch.equal(idx, before))}


def positions_seen(module: ModuleType, config: dict, idx: torch.Tensor) -> list[int] | None:
    """The positions a fresh ``GPT(**config)`` looks up in ``pos_emb`` for
    ``idx``, even when the forward then fails (None if it never calls
    ``pos_emb`` as a module)."""
    model = build(module, "GPT", config).eval()
    seen: dict = {}
    handle = _positions_hook(model, seen)
    try:
        with torch.no_grad():
            model(idx)
    except NotImplementedError:
        raise
    except Exception:  # noqa: BLE001 - the failure itself is what the caller explains
        pass
    finally:
        if handle is not None:
            handle.remove()
    return seen.get("positions")


def block_output(module: ModuleType, config: dict, seed: int, x: torch.Tensor) -> dict:
    """``GPTBlock(**config)`` with :func:`block_weights`, eval mode, on ``x``."""
    block = build(module, "GPTBlock", config)
    load = load_weights(block, block_weights(config, seed))
    block.eval()
    before = x.clone()
    with torch.no_grad():
        out = block(x)
    return {"output": out, "load": load, "inputs_unchanged": bool(torch.equal(x, before))}


def too_long(module: ModuleType, config: dict, idx: torch.Tensor) -> dict:
    """``GPT(**config)(idx)`` with more tokens than ``context_length``: the
    type of the exception raised (None if none)."""
    model = build(module, "GPT", config).eval()
    try:
        with torch.no_grad():
            model(idx)
    except NotImplementedError:
        raise
    except Exception as exc:  # noqa: BLE001 - which exception is the result
        return {"type": type(exc).__name__}
    return {"type": None}


def causal(module: ModuleType, config: dict, seed: int, idx: torch.Tensor, other: torch.Tensor, t: int) -> dict:
    """Logits for ``idx`` and for ``other`` (which differs from ``idx`` at
    positions ``>= t`` only): whether the logits at positions ``< t`` are
    the same, and whether some logit at ``>= t`` moved."""
    model = build(module, "GPT", config)
    load_weights(model, gpt_weights(config, seed))
    model.eval()
    with torch.no_grad():
        first, second = model(idx), model(other)
    return {"earlier_unchanged": bool(torch.allclose(first[:, :t], second[:, :t], atol=1e-5)),
            "later_changed": not bool(torch.allclose(first[:, t:], second[:, t:], atol=1e-5))}


def tying(module: ModuleType, config: dict, seed: int, idx: torch.Tensor, upstream: torch.Tensor,
          lr: float = 0.5) -> dict:
    """One SGD step on ``sum(logits * upstream)`` in float64, then
    ``tok_emb.weight`` and ``head.weight`` as they are (when one Parameter
    is used twice, both names show the same values, moved by the sum of
    both uses' gradients), and the number of distinct parameter values the
    optimiser sees (``parameters()`` counts a shared Parameter once)."""
    model = build(module, "GPT", config).to(torch.float64)
    load_weights(model, {k: v.to(torch.float64) for k, v in gpt_weights(config, seed).items()})
    model.train()
    distinct = [p for _, p in own_named_parameters(model)]  # a shared Parameter once
    optimiser = torch.optim.SGD(distinct, lr=lr)
    optimiser.zero_grad()
    (model(idx) * upstream).sum().backward()
    optimiser.step()
    return {"tok_emb": model.tok_emb.weight.detach().clone(), "head": model.head.weight.detach().clone(),
            "n_parameters": sum(p.numel() for p in distinct),
            "expected_n_parameters": expected_parameter_count(config)}


def expected_parameter_count(config: dict) -> int:
    """What ``GPT(**config)`` must have: every tensor of :func:`gpt_shapes`,
    ``head.weight`` only when untied."""
    shapes = gpt_shapes(config)
    if _full(config)["tie_weights"]:
        shapes.pop("head.weight")
    return sum(torch.Size(s).numel() for s in shapes.values())


def gradients(module: ModuleType, config: dict, seed: int, idx: torch.Tensor, upstream: torch.Tensor) -> dict:
    """float64, train mode (give ``dropout=0``): the gradient of every
    parameter by name (None where none arrived) of ``sum(logits * upstream)``."""
    model = build(module, "GPT", config).to(torch.float64)
    load = load_weights(model, {k: v.to(torch.float64) for k, v in gpt_weights(config, seed).items()})
    model.train()
    (model(idx) * upstream).sum().backward()
    # Every name of a shared Parameter, whichever module registered it first.
    named = parameters_by_every_name(model).items()
    return {"grads": {name: None if p.grad is None else p.grad.clone() for name, p in named},
            "load": load}


def gradient_reach(module: ModuleType, config: dict, seed: int, idx: torch.Tensor, upstream: torch.Tensor) -> dict:
    """:func:`gradients` reduced to which parameters got a non-zero gradient."""
    found = gradients(module, config, seed, idx, upstream)
    return {name: g is not None and bool(g.abs().sum() > 0) for name, g in found["grads"].items()}


def dropout_modes(module: ModuleType, config: dict, seed: int, idx: torch.Tensor) -> dict:
    """With the config's dropout: whether two train-mode forwards under
    different RNG seeds differ, whether eval mode repeats itself, the
    eval-mode logits (compared by the caller with the reference's, which
    are those of the same model without dropout) and the train-mode logits
    under fixed dropout masks (:class:`coursekit.probes.dropout.FixedDropout`:
    every dropout of a given shape drops the same entries, however it is
    called), also compared with the reference's: dropout on the residual
    sum or on the logits drops other numbers than dropout on each
    sublayer's output."""
    model = build(module, "GPT", config)
    load_weights(model, gpt_weights(config, seed))
    model.train()
    with torch.no_grad(), FixedDropout(seed):
        fixed = model(idx)
    outs = train_eval_outputs(model, lambda m: m(idx))
    return {"train_fixed": fixed, "train_varies": not torch.equal(outs["train_0"], outs["train_1"]),
            "eval_repeatable": torch.equal(outs["eval_0"], outs["eval_1"]),
            "hidden_lists": hidden_list_modules(model),  # .eval() does not reach them
            "eval": outs["eval_0"]}


def structure(module: ModuleType, config: dict) -> dict:
    """The parameter names (``state_dict`` keys that are parameters) and
    shapes, the modules hidden in plain lists, the types of the contract's
    sub-modules, and the ``blocks`` stack: container type, length, how many
    distinct objects."""
    model = build(module, "GPT", config)
    blocks = getattr(model, "blocks", None)
    stack = None
    if isinstance(blocks, (list, tuple, nn.ModuleList, nn.Sequential)):
        items = list(blocks)
        stack = {"type": type(blocks).__name__, "length": len(items), "distinct": len({id(b) for b in items}),
                 "classes": sorted({type(b).__name__ for b in items})}
    elif blocks is not None:
        stack = {"type": type(blocks).__name__}
    names = ("tok_emb", "pos_emb", "drop", "blocks", "final_norm", "head")
    return {"parameters": {k: list(p.shape) for k, p in parameters_by_every_name(model).items()},
            "hidden_lists": hidden_list_modules(model),
            "children": {name: type(getattr(model, name, None)).__name__ for name in names},
            "head_bias": getattr(getattr(model, "head", None), "bias", None) is not None,
            "blocks": stack}


def placement(module: ModuleType, config: dict, idx: torch.Tensor) -> dict:
    """:func:`coursekit.probes.placement.forward_placement` of ``GPT(**config)``
    on ``idx``, plus the attributes that hide modules in plain lists: ``.to()``
    leaves those on the CPU too, another mistake than a tensor made on the
    CPU in ``forward``."""
    found = forward_placement(module, "GPT", config, [idx])
    return {**found, "hidden_lists": hidden_list_modules(build(module, "GPT", config))}


warm.optimizers()  # its calls step optimisers: paid in the server, before a child (see warm)
