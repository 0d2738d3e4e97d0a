"""Probes for exercise 06 (multi-head attention).

Module-level probes build the class themselves from a plain ``config``
(the constructor's keyword arguments), so the grader can call them with
nothing but plain data::

    forward(student, "MultiHeadAttention",
            {"d_in": 6, "d_out": 6, "context_length": 5, "dropout": 0.0, "num_heads": 3},
            x, weights=random_weights("MultiHeadAttention", config, seed=0))

``random_weights`` is not a probe: it makes inputs (a state dict under the
contract's parameter names) from a seed.
"""
from __future__ import annotations

from types import ModuleType

import torch
from torch import nn

from coursekit.probes import modules
from coursekit.probes.dropout import FixedDropout

PROJECTIONS = ("W_query", "W_key", "W_value")


# ---------------------------------------------------------------- inputs


def random_weights(class_name: str, config: dict, seed: int, scale: float = 0.5) -> dict[str, torch.Tensor]:
    """A state dict for ``class_name(**config)`` under the contract's names,
    drawn from ``seed`` (independent of how the module creates its layers).

    MultiHeadAttention: W_query/W_key/W_value.weight (d_out, d_in) (+ .bias
    if qkv_bias), out_proj.weight (d_out, d_out), out_proj.bias (d_out,).
    MultiHeadAttentionWrapper: heads.{i}.W_query.weight (d_out, d_in), ...
    """
    gen = torch.Generator().manual_seed(seed)
    d_in, d_out, bias = config["d_in"], config["d_out"], config.get("qkv_bias", False)

    def projections(prefix: str) -> dict[str, torch.Tensor]:
        found = {}
        for name in PROJECTIONS:
            found[f"{prefix}{name}.weight"] = torch.randn(d_out, d_in, generator=gen) * scale
            if bias:
                found[f"{prefix}{name}.bias"] = torch.randn(d_out, generator=gen) * scale
        return found

    if class_name == "MultiHeadAttentionWrapper":
        weights = {}
        for i in range(config["num_heads"]):
            weights.update(projections(f"heads.{i}."))
        return weights
    weights = projections("")
    weights["out_proj.weight"] = torch.randn(d_out, d_out, generator=gen) * scale
    weights["out_proj.bias"] = torch.randn(d_out, generator=gen) * scale
    return weights


def _build(module: ModuleType, class_name: str, config: dict,
           weights: dict[str, torch.Tensor] | None = None) -> tuple[nn.Module, dict]:
    model = getattr(module, class_name)(**config)
    if weights is None:
        return model, {"missing": [], "unexpected": []}
    loaded = modules.load_weights(model, weights)
    # Buffers (the mask) are the module's own business, not weights.
    buffers = {name for name, _ in model.named_buffers()}
    loaded["missing"] = [name for name in loaded["missing"] if name not in buffers]
    return model, loaded


def _snapshot(model: nn.Module) -> dict[str, torch.Tensor]:
    return {name: b.detach().clone() for name, b in model.named_buffers()}


def _same_buffers(before: dict[str, torch.Tensor], model: nn.Module) -> bool:
    after = dict(model.named_buffers())
    return before.keys() == after.keys() and all(
        before[name].shape == after[name].shape and torch.equal(before[name], after[name]) for name in before
    )


def _call(model: nn.Module, x: torch.Tensor) -> tuple[torch.Tensor | None, str | None]:
    try:
        with torch.no_grad():
            return model(x), None
    except NotImplementedError:
        raise
    except Exception as exc:  # student code: report any exception as data
        return None, f"{type(exc).__name__}: {str(exc)[:300]}"


# ---------------------------------------------------------------- functions


def split_heads_output(module: ModuleType, x: torch.Tensor, num_heads: int) -> dict:
    """``module.split_heads(x, num_heads)``, and whether ``x`` came back unchanged."""
    before = x.clone()
    output = module.split_heads(x, num_heads)
    return {"output": output, "input_unchanged": bool(torch.equal(x, before))}


def merge_heads_output(module: ModuleType, x: torch.Tensor) -> dict:
    """``module.merge_heads(x)``, and whether ``x`` came back unchanged."""
    before = x.clone()
    output = module.merge_heads(x)
    return {"output": output, "input_unchanged": bool(torch.equal(x, before))}


def round_trips(module: ModuleType, x: torch.Tensor, y: torch.Tensor) -> dict:
    """``merge_heads(split_heads(x, h))`` for a (b, n, d) ``x`` and
    ``split_heads(merge_heads(y), h)`` for a (b, h, n, hd) ``y``, with h = y.shape[1]."""
    num_heads = y.size(1)
    return {"merge_of_split": module.merge_heads(module.split_heads(x, num_heads)),
            "split_of_merge": module.split_heads(module.merge_heads(y), num_heads)}


def exception_from(module: ModuleType, name: str, args: list, kwargs: dict | None = None) -> dict:
    """Call ``module.<name>(*args, **kwargs)`` (a function or a class):
    the exception it raised, if any. NotImplementedError is not caught."""
    try:
        getattr(module, name)(*args, **(kwargs or {}))
    except NotImplementedError:
        raise
    except Exception as exc:  # student code: report any exception as data
        return {"raised": type(exc).__name__, "message": str(exc)[:300]}
    return {"raised": None, "message": ""}


def forward_exception(module: ModuleType, class_name: str, config: dict, x: torch.Tensor) -> dict:
    """Build ``class_name(**config)`` and call it on ``x``: the exception
    raised by the forward pass, if any. NotImplementedError is not caught."""
    model, _ = _build(module, class_name, config)
    _, error = _call(model, x)
    return {"raised": error.split(":", 1)[0] if error else None, "message": error or ""}


# ---------------------------------------------------------------- modules


def structure(module: ModuleType, class_name: str, config: dict) -> dict:
    """What ``class_name(**config)`` registers (see
    :func:`coursekit.probes.modules.registered`), plus plain tensor
    attributes, sub-modules hidden in lists, the type of every sub-module
    by name, the number of parameters and the buffers' values."""
    model, _ = _build(module, class_name, config)
    found = modules.registered(model)
    found["tensor_attributes"] = modules.tensor_attributes(model)
    found["hidden_lists"] = modules.hidden_list_modules(model)
    found["module_types"] = {name: type(sub).__name__ for name, sub in model.named_modules() if name}
    found["n_parameters"] = sum(p.numel() for p in model.parameters())
    found["buffer_values"] = {name: b.detach().clone() for name, b in model.named_buffers()}
    return found


def forward(module: ModuleType, class_name: str, config: dict, x: torch.Tensor,
            weights: dict[str, torch.Tensor] | None = None, *, train: bool = False, seed: int = 0) -> dict:
    """Build ``class_name(**config)``, copy ``weights`` in, and run it once
    on ``x`` in train or eval mode (``torch.manual_seed(seed)`` first).

    Returns the output, which weight names did not load, and whether the
    input and the module's buffers came back unchanged.
    """
    model, loaded = _build(module, class_name, config, weights)
    model.train(train)
    buffers, before = _snapshot(model), x.clone()
    torch.manual_seed(seed)
    with torch.no_grad():
        output = model(x)
    return {"output": output, "load": loaded, "input_unchanged": bool(torch.equal(x, before)),
            "buffers_unchanged": _same_buffers(buffers, model)}


def calls_in_sequence(module: ModuleType, class_name: str, config: dict, inputs: list[torch.Tensor],
                      weights: dict[str, torch.Tensor] | None = None) -> dict:
    """One module (eval mode) called on each input in turn, and a fresh
    module (same weights) per input: a module that changes its own state
    (a mask modified in place) gives different outputs, or fails later.

    ``calls``: per input, the output (None if it raised), the error text,
    and whether the buffers were still unchanged after that call.
    ``fresh``: per input, a fresh module's output (None if it raised).
    """
    model, _ = _build(module, class_name, config, weights)
    model.eval()
    buffers = _snapshot(model)
    calls = []
    for x in inputs:
        output, error = _call(model, x)
        calls.append({"output": output, "error": error, "buffers_unchanged": _same_buffers(buffers, model)})
    fresh = []
    for x in inputs:
        fresh_model, _ = _build(module, class_name, config, weights)
        fresh.append(_call(fresh_model.eval(), x)[0])
    return {"calls": calls, "fresh": fresh}


def gradients(module: ModuleType, class_name: str, config: dict, x: torch.Tensor,
              weights: dict[str, torch.Tensor] | None = None, upstream: torch.Tensor | None = None) -> dict:
    """Backpropagate ``sum(output * upstream)`` (eval mode): the gradient
    of the input, of every parameter, and which parameters got a non-zero one."""
    model, _ = _build(module, class_name, config, weights)
    model.eval()
    x = x.detach().clone().requires_grad_(True)
    output = model(x)
    (output * (upstream if upstream is not None else torch.ones_like(output))).sum().backward()
    params = dict(model.named_parameters())
    return {
        "input_grad": x.grad,
        "parameter_grads": {name: p.grad for name, p in params.items()},
        "reach": {name: p.grad is not None and bool(p.grad.abs().sum() > 0) for name, p in params.items()},
    }


def train_eval(module: ModuleType, class_name: str, config: dict, x: torch.Tensor,
               weights: dict[str, torch.Tensor] | None = None, seeds: tuple[int, int] = (0, 1)) -> dict:
    """Outputs in train mode and in eval mode, each under two seeds (see
    :func:`coursekit.probes.modules.train_eval_outputs`)."""
    model, _ = _build(module, class_name, config, weights)
    return modules.train_eval_outputs(model, lambda m: m(x), seeds)


def after_to_float64(module: ModuleType, class_name: str, config: dict, x: torch.Tensor) -> dict:
    """``.to(torch.float64)``: the dtype of every parameter, buffer and
    tensor attribute, and the output's dtype on a float64 input."""
    model, _ = _build(module, class_name, config)
    dtypes = modules.dtypes_after_to(model, torch.float64)
    model.eval()
    with torch.no_grad():
        output = model(x.to(torch.float64))
    return {"dtypes": dtypes, "output_dtype": str(output.dtype)}


# ---------------------------------------------------------------- for the grader's hidden checks


def forward_in(module: ModuleType, class_name: str, config: dict, x: torch.Tensor,
               weights: dict[str, torch.Tensor] | None = None, dtype: torch.dtype = torch.float64, *,
               train: bool = False, seed: int = 0) -> dict:
    """:func:`forward` in another dtype: ``class_name(**config).to(dtype)``
    first, then ``weights`` (already in ``dtype``) copied in, so that no
    value passes through float32 on the way.

    Returns the output, which weight names did not load, whether the input
    and the buffers came back unchanged, and the dtype of every buffer.
    """
    model = getattr(module, class_name)(**config)
    model.to(dtype)
    loaded = {"missing": [], "unexpected": []} if weights is None else modules.load_weights(model, weights)
    model.train(train)
    buffers, before = _snapshot(model), x.clone()
    torch.manual_seed(seed)
    with torch.no_grad():
        output = model(x)
    return {"output": output, "load": loaded, "input_unchanged": bool(torch.equal(x, before)),
            "buffers_unchanged": _same_buffers(buffers, model),
            "buffer_dtypes": {name: str(b.dtype) for name, b in model.named_buffers()}}


def state(module: ModuleType, class_name: str, config: dict) -> dict:
    """What ``class_name(**config)`` saves and trains, as plain data: the
    parameters' names and shapes, the buffers (shape, dtype, persistent) and
    their values, the ``state_dict`` keys and the number of parameters.

    Unlike :func:`structure`, nothing here depends on helper attributes or
    extra sub-modules (an ``nn.Softmax`` child, say) that a correct solution
    may add, so the result can be compared with the reference's exactly.
    """
    model = getattr(module, class_name)(**config)
    found = modules.registered(model)
    return {"parameters": found["parameters"], "buffers": found["buffers"],
            "state_dict_keys": found["state_dict_keys"],
            "n_parameters": sum(p.numel() for p in model.parameters()),
            "buffer_values": {name: b.detach().clone() for name, b in model.named_buffers()}}


def forward_fixed_dropout(module: ModuleType, class_name: str, config: dict, x: torch.Tensor,
                          weights: dict[str, torch.Tensor] | None = None, seed: int = 0) -> dict:
    """:func:`forward` in training mode, with every dropout of the forward
    pass drawing its mask from ``seed`` in the tensor's *logical* order
    (see :class:`coursekit.probes.dropout.FixedDropout`: seen at the
    dispatcher, so ``nn.Dropout``, ``F.dropout`` under any name and
    ``torch.dropout`` all draw the same masks). A dropout result that is
    thrown away, or dropout in the wrong place, still shows.
    """
    model, loaded = _build(module, class_name, config, weights)
    model.train()
    buffers, before = _snapshot(model), x.clone()
    torch.manual_seed(seed)
    with torch.no_grad(), FixedDropout(seed):
        output = model(x)
    return {"output": output, "load": loaded, "input_unchanged": bool(torch.equal(x, before)),
            "buffers_unchanged": _same_buffers(buffers, model)}
