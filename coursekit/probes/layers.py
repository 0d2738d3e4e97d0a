"""Probes for exercise 08 (the Transformer's building blocks).

Each probe builds the student's module from plain arguments, copies the
given weights in by name (so results never depend on the order in which
layers draw their random initial weights), runs one thing and returns plain
data. The parameter-shape helpers describe the contract's names, so the same
weights can be loaded into the student's module, the reference and a PyTorch
oracle.
"""
from __future__ import annotations

from types import ModuleType

import torch

from coursekit.probes import modules
from coursekit.probes.dropout import FixedDropout
from coursekit.probes.positional_encoding import error_of

Weights = dict[str, torch.Tensor]


# --- the contract's parameters --------------------------------------------

def attention_parameter_shapes(d_model: int, bias: bool = True) -> dict[str, list[int]]:
    """Parameter names and shapes of ``MultiHeadedAttention(d_model, h, bias=bias)``."""
    shapes = {}
    for name in ("W_query", "W_key", "W_value", "out_proj"):
        shapes[f"{name}.weight"] = [d_model, d_model]
        if bias:
            shapes[f"{name}.bias"] = [d_model]
    return shapes


def feed_forward_parameter_shapes(d_model: int, d_ff: int) -> dict[str, list[int]]:
    """Parameter names and shapes of ``PositionwiseFeedForward(d_model, d_ff)``."""
    return {"linear1.weight": [d_ff, d_model], "linear1.bias": [d_ff],
            "linear2.weight": [d_model, d_ff], "linear2.bias": [d_model]}


def add_norm_parameter_shapes(d_model: int) -> dict[str, list[int]]:
    """Parameter names and shapes of ``AddNorm(d_model)``."""
    return {"norm.weight": [d_model], "norm.bias": [d_model]}


def random_weights(shapes: dict[str, list[int]], seed: int, scale: float = 0.5) -> Weights:
    """Reproducible weights for ``shapes``: uniform in [-scale, scale], except
    LayerNorm-style ``norm*.weight`` entries, which are drawn around 1."""
    gen = torch.Generator().manual_seed(seed)
    weights = {}
    for name in sorted(shapes):
        values = (torch.rand(shapes[name], generator=gen) * 2 - 1) * scale
        weights[name] = 1 + values if name.split(".")[-2].startswith("norm") and name.endswith("weight") else values
    return weights


# --- structure -------------------------------------------------------------

def structure(module: ModuleType, class_name: str, *args, **kwargs) -> dict:
    """What ``module.<class_name>(*args, **kwargs)`` registers, and
    sub-modules hidden in plain lists."""
    instance = getattr(module, class_name)(*args, **kwargs)
    found = modules.registered(instance)
    found["hidden_lists"] = modules.hidden_list_modules(instance)
    return found


def constructor_error(module: ModuleType, class_name: str, *args, **kwargs) -> dict | None:
    """The error (if any) of ``module.<class_name>(*args, **kwargs)``."""
    return error_of(lambda: getattr(module, class_name)(*args, **kwargs))


# --- MultiHeadedAttention ----------------------------------------------------

def _attention(module: ModuleType, d_model: int, num_heads: int, weights: Weights,
               dropout: float = 0.0, bias: bool = True):
    mha = module.MultiHeadedAttention(d_model, num_heads, dropout=dropout, bias=bias)
    return mha, modules.load_weights(mha, weights)


def attention_attributes(module: ModuleType, d_model: int, num_heads: int) -> dict[str, str]:
    """``MultiHeadedAttention(d_model, num_heads)`` right after the
    constructor: its ``attn`` must already exist and be None (see
    :func:`coursekit.probes.modules.attributes_before_forward`)."""
    return modules.attributes_before_forward(module.MultiHeadedAttention(d_model, num_heads), ["attn"])


def attention_output(module: ModuleType, d_model: int, num_heads: int, weights: Weights,
                     query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                     mask: torch.Tensor | None = None, bias: bool = True) -> dict:
    """``MultiHeadedAttention(d_model, num_heads, bias=bias)`` with ``weights``
    loaded, in eval mode: its output, its ``attn`` after the call, the names
    that did not load, and whether the inputs and the mask came back unchanged."""
    mha, load = _attention(module, d_model, num_heads, weights, bias=bias)
    mha.eval()
    inputs = [t for t in (query, key, value, mask) if t is not None]
    before = [t.clone() for t in inputs]
    with torch.no_grad():
        output = mha(query, key, value, mask)
    attn = getattr(mha, "attn", None)
    return {
        "output": output,
        "attn": attn.detach().clone() if isinstance(attn, torch.Tensor) else attn,
        "load": load,
        "inputs_unchanged": all(torch.equal(a, b) for a, b in zip(inputs, before)),
    }


def attention_gradients(module: ModuleType, d_model: int, num_heads: int, weights: Weights,
                        query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                        upstream: torch.Tensor, mask: torch.Tensor | None = None) -> dict:
    """Gradients of sum(output * upstream) with respect to query, key and
    value (passed as three separate tensors) and to every parameter."""
    mha, _ = _attention(module, d_model, num_heads, weights)
    q, k, v = (t.detach().clone().requires_grad_(True) for t in (query, key, value))
    (mha(q, k, v, mask) * upstream).sum().backward()
    return {
        "query": q.grad, "key": k.grad, "value": v.grad,
        "parameters": {name: p.grad for name, p in mha.named_parameters()},
    }


def attention_train_eval(module: ModuleType, d_model: int, num_heads: int, dropout: float,
                         weights: Weights, x: torch.Tensor, seeds: tuple[int, int] = (0, 1)) -> dict:
    """Self-attention output and ``attn`` of one module in train and eval
    mode, each under two seeds: ``{"train_0": {"output", "attn"}, ...}``.
    Dropout masks come from the seed by (query, key) position
    (:class:`coursekit.probes.dropout.FixedDropout`): all heads in one call
    or one call per head drop the same weights."""
    mha, _ = _attention(module, d_model, num_heads, weights, dropout=dropout)
    found = {}
    with torch.no_grad():
        for mode in ("train", "eval"):
            mha.train(mode == "train")
            for seed in seeds:
                torch.manual_seed(seed)
                with FixedDropout(seed):
                    output = mha(x, x, x)
                attn = getattr(mha, "attn", None)
                found[f"{mode}_{seed}"] = {"output": output,
                                           "attn": attn.clone() if isinstance(attn, torch.Tensor) else attn}
    return found


# --- PositionwiseFeedForward and AddNorm --------------------------------------

def feed_forward_output(module: ModuleType, d_model: int, d_ff: int, weights: Weights,
                        x: torch.Tensor) -> dict:
    """``PositionwiseFeedForward(d_model, d_ff)`` with ``weights``, eval mode."""
    ffn = module.PositionwiseFeedForward(d_model, d_ff)
    load = modules.load_weights(ffn, weights)
    ffn.eval()
    with torch.no_grad():
        return {"output": ffn(x), "load": load}


def _seeded_masks(call):
    """``call()`` with dropout masks drawn by position from the seed that
    :func:`coursekit.probes.modules.train_eval_outputs` has just set
    (:class:`coursekit.probes.dropout.FixedDropout`): the same entries are
    dropped whatever the memory layout of the tensor."""
    with FixedDropout(torch.initial_seed()):
        return call()


def feed_forward_train_eval(module: ModuleType, d_model: int, d_ff: int, dropout: float,
                            weights: Weights, x: torch.Tensor) -> dict:
    """Outputs in train and eval mode under two seeds each."""
    ffn = module.PositionwiseFeedForward(d_model, d_ff, dropout=dropout)
    modules.load_weights(ffn, weights)
    return modules.train_eval_outputs(ffn, lambda m: _seeded_masks(lambda: m(x)))


def add_norm_output(module: ModuleType, d_model: int, weights: Weights, x: torch.Tensor,
                    sublayer_out: torch.Tensor) -> dict:
    """``AddNorm(d_model)(x, sublayer_out)`` with ``weights``, eval mode."""
    add_norm = module.AddNorm(d_model)
    load = modules.load_weights(add_norm, weights)
    add_norm.eval()
    with torch.no_grad():
        return {"output": add_norm(x, sublayer_out), "load": load}


def add_norm_train_eval(module: ModuleType, d_model: int, dropout: float, weights: Weights,
                        x: torch.Tensor, sublayer_out: torch.Tensor) -> dict:
    """Outputs in train and eval mode under two seeds each."""
    add_norm = module.AddNorm(d_model, dropout=dropout)
    modules.load_weights(add_norm, weights)
    return modules.train_eval_outputs(add_norm, lambda m: _seeded_masks(lambda: m(x, sublayer_out)))


def encoder_layer_output(module: ModuleType, d_model: int, num_heads: int, d_ff: int,
                         weights: Weights, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """The three blocks composed into the paper's (post-norm) encoder layer:
    y = AddNorm1(x, MHA(x, x, x, mask)); out = AddNorm2(y, FFN(y)).
    ``weights`` keys are prefixed ``self_attn.``, ``feed_forward.``,
    ``add_norm1.`` and ``add_norm2.``."""
    blocks = {
        "self_attn": module.MultiHeadedAttention(d_model, num_heads),
        "feed_forward": module.PositionwiseFeedForward(d_model, d_ff),
        "add_norm1": module.AddNorm(d_model),
        "add_norm2": module.AddNorm(d_model),
    }
    for prefix, block in blocks.items():
        modules.load_weights(block, {k.split(".", 1)[1]: v for k, v in weights.items() if k.startswith(prefix + ".")})
        block.eval()
    with torch.no_grad():
        y = blocks["add_norm1"](x, blocks["self_attn"](x, x, x, mask))
        return blocks["add_norm2"](y, blocks["feed_forward"](y))


# --- used by the hidden checks (grader/checks/transformer_layers.py) ------------

def block_run(module: ModuleType, class_name: str, args: list, weights: Weights, inputs: list,
              kwargs: dict | None = None, upstream: torch.Tensor | None = None,
              dtype: torch.dtype | None = None, train: bool = False, seed: int = 0) -> dict:
    """One forward of ``module.<class_name>(*args, **kwargs)`` on ``inputs``
    (positional; None and bool masks pass through), with ``weights`` loaded
    by name, then ``.to(dtype)`` if given, in train or eval mode, the global
    RNG seeded with ``seed`` just before the call and dropout masks drawn
    from it by position (:class:`coursekit.probes.dropout.FixedDropout`),
    so every correct solution drops the same entries. With ``upstream``, also backpropagates
    ``sum(output * upstream)``.

    Returns the output, ``attn`` before (None or not) and after the call if
    the class has one, the names that did not load, whether the inputs came
    back unchanged, the gradients of the floating inputs (None elsewhere)
    and of every parameter, and every parameter's dtype."""
    block = getattr(module, class_name)(*args, **(kwargs or {}))
    load = modules.load_weights(block, weights)
    if dtype is not None:
        block.to(dtype)
    block.train(train)
    attn_before = getattr(block, "attn", None)
    want_grad = upstream is not None
    before = [t.clone() if isinstance(t, torch.Tensor) else t for t in inputs]
    leaves = [t.detach().clone().requires_grad_(True) if want_grad and isinstance(t, torch.Tensor)
              and t.is_floating_point() else t for t in inputs]
    # Non-leaf copies go in, so that an in-place edit by the block shows in
    # inputs_unchanged instead of failing with autograd's leaf error.
    fed = [t.clone() if isinstance(t, torch.Tensor) else t for t in leaves]
    torch.manual_seed(seed)
    with torch.set_grad_enabled(want_grad), FixedDropout(seed):
        output = block(*fed)
    if want_grad and isinstance(output, torch.Tensor):
        (output * upstream).sum().backward()
    attn = getattr(block, "attn", None)
    return {
        "output": output.detach() if isinstance(output, torch.Tensor) else output,
        "attn_before_is_none": attn_before is None,
        "attn": attn.detach().clone() if isinstance(attn, torch.Tensor) else attn,
        "load": load,
        "inputs_unchanged": all(
            torch.equal(a.detach(), b) if isinstance(b, torch.Tensor) else a is b for a, b in zip(fed, before)),
        "input_grads": [t.grad if isinstance(t, torch.Tensor) and t.requires_grad else None for t in leaves],
        "parameter_grads": {name: p.grad for name, p in block.named_parameters()},
        "parameter_dtypes": {name: str(p.dtype) for name, p in block.named_parameters()},
    }


def structure_of(module: ModuleType, class_name: str, args: list, kwargs: dict | None = None) -> dict:
    """:func:`structure` with positional arguments given as a list (probe
    calls carry keyword arguments only; the contract fixes the order of the
    constructor's arguments, not their names)."""
    return structure(module, class_name, *args, **(kwargs or {}))


def constructor_error_of(module: ModuleType, class_name: str, args: list) -> dict | None:
    """:func:`constructor_error` with positional arguments given as a list."""
    return constructor_error(module, class_name, *args)
