"""Generic probes for the Transformer's layers and stacks (exercises 09-11):
build one of the student's classes from plain arguments, load given
weights, run it, and report what happened as plain data.

``module`` is the student's Python module, ``cls`` the class name in it
(``"EncoderLayer"``, ``"Decoder"``, ...), ``config`` its constructor's
keyword arguments, ``weights`` a state_dict in the course's names (see
the public tests' stored weights), ``args`` the positional arguments
of ``forward`` (tensors or None).
"""
from __future__ import annotations

from types import ModuleType

import torch
from torch import nn

from coursekit.probes.modules import gradient_reach, hidden_list_modules, load_weights, registered, train_eval_outputs

Args = list[torch.Tensor | None]


def build(module: ModuleType, cls: str, config: dict) -> nn.Module:
    """``module.<cls>(**config)``."""
    return getattr(module, cls)(**config)


def _clones(args: Args) -> Args:
    return [a.clone() if isinstance(a, torch.Tensor) else a for a in args]


def output(module: ModuleType, cls: str, config: dict, weights: dict[str, torch.Tensor],
           args: Args, train: bool = False) -> dict:
    """Build, load ``weights``, run ``forward(*args)`` (eval mode unless
    ``train``). Returns the output, the weight-loading report (names that did
    not match) and whether every input came back unchanged."""
    obj = build(module, cls, config)
    load = load_weights(obj, weights)
    obj.train(train)
    before = _clones(args)
    with torch.no_grad():
        out = obj(*args)
    unchanged = all(a is None or torch.equal(a, b) for a, b in zip(args, before))
    return {"output": out, "load": load, "inputs_unchanged": unchanged}


def structure(module: ModuleType, cls: str, config: dict) -> dict:
    """What an instance registers, plus: its direct sub-module attributes
    (``attributes``: name -> class name), groups of attribute names that hold
    the *same* module object (``aliases``), attributes hiding modules in plain
    lists (``hidden_lists``), the parameter count, and for a stack its
    ``layers`` (container type, length, how many distinct objects, classes)."""
    obj = build(module, cls, config)
    info = registered(obj)
    # _modules, not named_children(): the latter skips a module registered
    # twice under two names, which is exactly what ``aliases`` looks for.
    by_object: dict[int, list[str]] = {}
    attributes = {}
    for name, sub in obj._modules.items():
        if sub is not None:
            attributes[name] = type(sub).__name__
            by_object.setdefault(id(sub), []).append(name)
    info["attributes"] = attributes
    info["aliases"] = [names for names in by_object.values() if len(names) > 1]
    info["hidden_lists"] = hidden_list_modules(obj)
    info["parameter_count"] = sum(p.numel() for p in obj.parameters())
    layers = getattr(obj, "layers", None)
    if isinstance(layers, (list, tuple, nn.ModuleList, nn.Sequential)):
        items = list(layers)
        info["layers"] = {
            "type": type(layers).__name__,
            "length": len(items),
            "distinct": len({id(m) for m in items}),
            "classes": sorted({type(m).__name__ for m in items}),
        }
    else:
        info["layers"] = None if layers is None else {"type": type(layers).__name__}
    return info


def gradients(module: ModuleType, cls: str, config: dict, weights: dict[str, torch.Tensor],
              args: Args, upstream: torch.Tensor) -> dict:
    """Backpropagate ``sum(forward(*args) * upstream)``: which parameters got
    a non-zero gradient, and which floating-point inputs did.

    ``upstream`` is a random tensor of the output's shape: the plain sum of
    a LayerNorm's output hardly depends on its input, so it would hide
    missing gradients.
    """
    obj = build(module, cls, config)
    load = load_weights(obj, weights)
    leaves = [a.detach().clone().requires_grad_(True) if isinstance(a, torch.Tensor) and a.is_floating_point() else a
              for a in args]
    reach = gradient_reach(obj, lambda m: m(*leaves) * upstream)
    inputs = [None if not (isinstance(a, torch.Tensor) and a.requires_grad)
              else bool(a.grad is not None and a.grad.abs().sum() > 0) for a in leaves]
    return {"parameters": reach, "inputs": inputs, "load": load}


def train_eval(module: ModuleType, cls: str, config: dict, args: Args, seeds: tuple[int, int] = (0, 1)) -> dict:
    """Outputs in train and eval mode under two seeds each (see
    :func:`coursekit.probes.modules.train_eval_outputs`)."""
    obj = build(module, cls, config)
    return train_eval_outputs(obj, lambda m: m(*args), seeds)


def float64_output(module: ModuleType, cls: str, config: dict, args: Args) -> dict:
    """``.to(torch.float64)``, then forward float64 inputs: the output's
    dtype and the dtypes of every parameter. A layer that ``.to()`` did not
    reach (kept in a plain list) makes the forward fail."""
    obj = build(module, cls, config).to(torch.float64).eval()
    args64 = [a.to(torch.float64) if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in args]
    with torch.no_grad():
        out = obj(*args64)
    return {"output_dtype": str(out.dtype),
            "parameter_dtypes": sorted({str(p.dtype) for p in obj.parameters()})}
