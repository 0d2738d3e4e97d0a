"""Probes for exercise 09 (encoder). The generic work is in
:mod:`coursekit.probes.stacks`; these name the inputs of the encoder.

``config`` for ``EncoderLayer``: ``{d_model, num_heads, d_ff, dropout}``;
for ``Encoder`` add ``num_layers``. ``mask``: bool, True = blocked,
broadcasting to ``(batch, n, n)`` (a padding mask is ``(batch, 1, n)``).
"""
from __future__ import annotations

from types import ModuleType

import torch

from coursekit.probes.dropout import FixedDropout
from coursekit.probes import stacks
from coursekit.probes.modules import load_weights


def encoder_layer_output(module: ModuleType, config: dict, weights: dict[str, torch.Tensor],
                         x: torch.Tensor, mask: torch.Tensor | None = None) -> dict:
    """``EncoderLayer(**config)`` with ``weights``, in eval mode, on ``(x, mask)``."""
    return stacks.output(module, "EncoderLayer", config, weights, [x, mask])


def encoder_output(module: ModuleType, config: dict, weights: dict[str, torch.Tensor],
                   x: torch.Tensor, mask: torch.Tensor | None = None) -> dict:
    """``Encoder(**config)`` with ``weights``, in eval mode, on ``(x, mask)``."""
    return stacks.output(module, "Encoder", config, weights, [x, mask])


def encoder_layer_structure(module: ModuleType, config: dict) -> dict:
    """See :func:`coursekit.probes.stacks.structure`."""
    return stacks.structure(module, "EncoderLayer", config)


def encoder_structure(module: ModuleType, config: dict) -> dict:
    """See :func:`coursekit.probes.stacks.structure`."""
    return stacks.structure(module, "Encoder", config)


def encoder_layer_gradients(module: ModuleType, config: dict, weights: dict[str, torch.Tensor],
                            x: torch.Tensor, mask: torch.Tensor | None, upstream: torch.Tensor) -> dict:
    """Which parameters (and whether ``x``) get a gradient."""
    return stacks.gradients(module, "EncoderLayer", config, weights, [x, mask], upstream)


def encoder_layer_train_eval(module: ModuleType, config: dict, x: torch.Tensor,
                             mask: torch.Tensor | None = None) -> dict:
    """Outputs in train and eval mode, two seeds each."""
    return stacks.train_eval(module, "EncoderLayer", config, [x, mask])


def encoder_float64(module: ModuleType, config: dict, x: torch.Tensor, mask: torch.Tensor | None = None) -> dict:
    """``Encoder(**config).to(torch.float64)`` on float64 input."""
    return stacks.float64_output(module, "Encoder", config, [x, mask])


# --- for the hidden checks ----------------------------------------------------
# Generic over the class (the decoder's probes reuse them): each builds the
# class from ``config``, loads ``weights`` by name (so the order in which a
# student creates sub-modules does not matter) and reports plain data.

def seeded_output(module: ModuleType, cls: str, config: dict, weights: dict[str, torch.Tensor],
                  args: stacks.Args, train: bool, seed: int) -> dict:
    """``cls(**config)`` with ``weights``, in train or eval mode; every
    dropout draws its mask from ``seed`` at the dispatcher (see
    :class:`coursekit.probes.dropout.FixedDropout`), so two correct
    implementations drop exactly the same entries, however they call
    dropout and whatever the memory layout of their tensors."""
    obj = stacks.build(module, cls, config)
    load = load_weights(obj, weights)
    obj.train(train)
    torch.manual_seed(seed)
    with torch.no_grad(), FixedDropout(seed):
        out = obj(*args)
    return {"output": out, "load": load}


def gradient_values(module: ModuleType, cls: str, config: dict, weights: dict[str, torch.Tensor],
                    args: stacks.Args, upstream: torch.Tensor, train: bool = False, seed: int = 0) -> dict:
    """Backpropagate ``sum(forward(*args) * upstream)`` and return the
    gradients themselves: of every floating-point input (None for the others)
    and of every parameter, by name (None where no gradient arrived).
    Dropout masks come from ``seed`` as in :func:`seeded_output`."""
    obj = stacks.build(module, cls, config)
    load = load_weights(obj, weights)
    obj.train(train)
    leaves = [a.detach().clone().requires_grad_(True) if isinstance(a, torch.Tensor) and a.is_floating_point() else a
              for a in args]
    obj.zero_grad(set_to_none=True)
    torch.manual_seed(seed)
    with FixedDropout(seed):
        output = obj(*leaves)
    (output * upstream).sum().backward()
    inputs = [a.grad if isinstance(a, torch.Tensor) and a.requires_grad else None for a in leaves]
    parameters = {name: p.grad for name, p in obj.named_parameters()}
    return {"inputs": inputs, "parameters": parameters, "load": load}


def float64_values(module: ModuleType, cls: str, config: dict, weights: dict[str, torch.Tensor],
                   args: stacks.Args) -> dict:
    """``.to(torch.float64)`` first, then load float64 ``weights`` and run
    float64 inputs in eval mode: the output itself (its dtype and float64
    precision) and the dtypes of all parameters. A layer that ``.to()`` did
    not reach makes the forward fail."""
    obj = stacks.build(module, cls, config).to(torch.float64)
    load = load_weights(obj, weights)
    obj.eval()
    with torch.no_grad():
        out = obj(*args)
    return {"output": out, "load": load, "parameter_dtypes": sorted({str(p.dtype) for p in obj.parameters()})}


def _cls(stack: bool) -> str:
    return "Encoder" if stack else "EncoderLayer"


def encoder_seeded_output(module: ModuleType, config: dict, weights: dict[str, torch.Tensor], x: torch.Tensor,
                          mask: torch.Tensor | None = None, train: bool = True, seed: int = 0,
                          stack: bool = False) -> dict:
    """``EncoderLayer`` (or ``Encoder`` when ``stack``) with ``weights``, train
    mode by default, dropout masks from ``seed``."""
    return seeded_output(module, _cls(stack), config, weights, [x, mask], train, seed)


def encoder_gradient_values(module: ModuleType, config: dict, weights: dict[str, torch.Tensor], x: torch.Tensor,
                            mask: torch.Tensor | None, upstream: torch.Tensor, train: bool = False, seed: int = 0,
                            stack: bool = False) -> dict:
    """Gradients of ``x`` and of every parameter (see :func:`gradient_values`)."""
    return gradient_values(module, _cls(stack), config, weights, [x, mask], upstream, train, seed)


def encoder_float64_values(module: ModuleType, config: dict, weights: dict[str, torch.Tensor], x: torch.Tensor,
                           mask: torch.Tensor | None = None, stack: bool = False) -> dict:
    """See :func:`float64_values`; ``x`` and ``weights`` are float64."""
    return float64_values(module, _cls(stack), config, weights, [x, mask])


def behaviour(module: ModuleType, cls: str, config: dict, args: stacks.Args, changes: list[dict]) -> dict:
    """What a layer or stack does, whatever its weights and parameter names
    (a freshly built one, RNG seeded first): the output's shape; whether
    every output vector is normalised (a fresh post-norm layer ends with a
    LayerNorm of weight 1 and bias 0); for each change ``{"name", "arg",
    "where", "keep"}``, whether replacing ``args[arg]`` by noise at the
    positions ``where`` (batch, n) leaves the outputs at ``keep`` alone; and,
    with dropout, whether train mode is random and eval mode is not."""
    torch.manual_seed(0)
    obj = stacks.build(module, cls, config).eval()
    with torch.no_grad():
        out = obj(*args)
        result = {"shape": list(out.shape),
                  "normalised": bool((out.mean(-1).abs() < 1e-4).all() and
                                     ((out.var(-1, unbiased=False) - 1).abs() < 1e-3).all())}
        noise = torch.Generator().manual_seed(1)
        for change in changes:
            i, where = change["arg"], change["where"]
            changed = list(args)
            changed[i] = torch.where(where[..., None], torch.randn(args[i].shape, generator=noise), args[i])
            keep = change["keep"]
            result[change["name"]] = bool(torch.allclose(obj(*changed)[keep], out[keep], atol=1e-5))
        if config.get("dropout", 0.0) > 0:
            runs = {}
            for mode in ("train", "eval"):
                obj.train(mode == "train")
                for seed in (0, 1):
                    torch.manual_seed(seed)
                    runs[mode, seed] = obj(*args)
            result["train_random"] = not torch.equal(runs["train", 0], runs["train", 1])
            result["eval_deterministic"] = torch.equal(runs["eval", 0], runs["eval", 1])
    return result


def encoder_behaviour(module: ModuleType, config: dict, x: torch.Tensor, padding: torch.Tensor,
                      stack: bool = False) -> dict:
    """See :func:`behaviour`; ``padding`` (batch, n) is True at padding, the
    mask is ``padding[:, None, :]``, and the change is noise at the padded
    positions of ``x`` (the other positions' outputs must not move)."""
    changes = [{"name": "padding_ignored", "arg": 0, "where": padding, "keep": ~padding}]
    return behaviour(module, _cls(stack), config, [x, padding[:, None, :]], changes)
