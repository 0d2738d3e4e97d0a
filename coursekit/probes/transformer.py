"""Probes for exercise 11 (the full Transformer).

Every probe builds its own model from ``module.Transformer(**config)`` and
gives it weights that depend only on ``seed`` and the parameter names of the
contract (see :func:`init_by_name`), so a submission and the reference built
with the same config and seed hold the same weights, whatever order they
create their layers in.
"""
from __future__ import annotations

import warnings
from types import ModuleType

import torch
from torch import nn

from coursekit.loader import load_shipped
from coursekit.probes.dropout import DropoutWatch
from coursekit.probes.modules import dtypes_after_to, hidden_list_modules, registered, train_eval_outputs

IMPLICIT_SOFTMAX = "Implicit dimension choice for softmax"


def init_by_name(model: nn.Module, seed: int) -> None:
    """Fill every parameter from a generator seeded with ``seed``, visiting
    them in sorted name order: matrices Xavier-uniform, LayerNorm weights
    1 + U(-0.1, 0.1), other vectors U(-0.1, 0.1)."""
    norms = {f"{name}.weight" for name, sub in model.named_modules() if isinstance(sub, nn.LayerNorm)}
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in sorted(model.named_parameters()):
            if p.dim() > 1:
                nn.init.xavier_uniform_(p, generator=gen)
            else:
                p.uniform_(-0.1, 0.1, generator=gen)
                if name in norms:
                    p.add_(1.0)


def build(module: ModuleType, config: dict, seed: int = 0) -> nn.Module:
    """``module.Transformer(**config)`` with seeded weights, in eval mode."""
    model = module.Transformer(**config)
    init_by_name(model, seed)
    return model.eval()


def implicit_softmax(caught: list) -> bool:
    return any(IMPLICIT_SOFTMAX in str(w.message) for w in caught)


def forward_logits(module: ModuleType, config: dict, seed: int, src: torch.Tensor, tgt: torch.Tensor,
                   pad_embedding: torch.Tensor | None = None) -> dict:
    """``model(src, tgt)`` in eval mode; with ``pad_embedding``, the rows of
    ``src_embed`` and ``tgt_embed`` for ``pad_idx`` are overwritten first.
    Also: whether a second call gives the same logits (eval mode must be
    deterministic), whether the inputs came back unchanged, whether a
    softmax without ``dim`` was called, and the attributes that hide
    modules in plain lists."""
    model = build(module, config, seed)
    if pad_embedding is not None:
        pad = config.get("pad_idx", 0)
        with torch.no_grad():
            model.src_embed.weight[pad] = pad_embedding
            model.tgt_embed.weight[pad] = pad_embedding
    src_before, tgt_before = src.clone(), tgt.clone()
    with torch.no_grad(), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        logits = model(src, tgt)
        again = model(src, tgt)
    return {
        "logits": logits,
        "repeatable": isinstance(logits, torch.Tensor) and isinstance(again, torch.Tensor) and torch.equal(logits, again),
        "inputs_unchanged": bool(torch.equal(src, src_before) and torch.equal(tgt, tgt_before)),
        "implicit_softmax": implicit_softmax(caught),
        "hidden_lists": hidden_list_modules(model),
    }


def encode_decode(module: ModuleType, config: dict, seed: int, src: torch.Tensor, tgt: torch.Tensor) -> dict:
    """``encode(src)``, ``decode(tgt, memory, src)``, ``generator`` on the
    decoder output, and ``forward(src, tgt)``, in eval mode."""
    model = build(module, config, seed)
    with torch.no_grad():
        memory = model.encode(src)
        decoded = model.decode(tgt, memory, src)
        return {
            "memory": memory,
            "decoded": decoded,
            "generated": model.generator(decoded),
            "logits": model(src, tgt),
            "generator_type": type(model.generator).__name__,
        }


def _kept_weights(model: nn.Module, stack: str, attention: str) -> torch.Tensor | None:
    """``model.<stack>.layers[0].<attention>.attn``, or None if any link is missing."""
    try:
        weights = getattr(getattr(model, stack).layers[0], attention).attn
    except (AttributeError, IndexError, TypeError):
        return None
    return weights.detach().clone() if isinstance(weights, torch.Tensor) else None


def attention_weights(module: ModuleType, config: dict, seed: int, src: torch.Tensor, tgt: torch.Tensor) -> dict:
    """The attention weights ``(b, h, n_q, n_k)`` that the first encoder
    layer and the first decoder layer keep in ``.attn`` after
    ``model(src, tgt)`` in eval mode (None where missing): they show which
    keys each query was allowed to see."""
    model = build(module, config, seed)
    with torch.no_grad():
        model(src, tgt)
    return {
        "encoder_self": _kept_weights(model, "encoder", "self_attn"),
        "decoder_self": _kept_weights(model, "decoder", "self_attn"),
        "decoder_cross": _kept_weights(model, "decoder", "cross_attn"),
    }


def _first_layer(stack: object) -> object:
    """``stack.layers[0]``, or None where the stack has no such layer."""
    try:
        return stack.layers[0]  # type: ignore[attr-defined, index]
    except (AttributeError, IndexError, TypeError, KeyError):
        return None


def _capture_first_input(subs: list[object], store: dict, key: str) -> None:
    """Record the first argument of whichever of ``subs`` runs first.

    The module's own ``forward`` is wrapped (an instance attribute), so the
    call is seen however it is made: ``stack(x)``, ``stack.forward(x)``, or a
    loop over ``stack.layers`` that calls the first layer itself."""
    for sub in subs:
        if not isinstance(sub, nn.Module):
            continue
        original = sub.forward

        def forward(*args, _original=original, **kwargs):
            first = args[0] if args else kwargs.get("x")
            if key not in store and isinstance(first, torch.Tensor):
                store[key] = first.detach().clone()
            return _original(*args, **kwargs)

        sub.forward = forward


def stack_inputs(module: ModuleType, config: dict, seed: int, src: torch.Tensor, tgt: torch.Tensor) -> dict:
    """What ``model(src, tgt)`` feeds into the encoder and the decoder stack
    (the first argument of ``model.encoder`` or, for code that loops over
    ``model.encoder.layers`` itself, of its first layer; the same for the
    decoder; None if neither ran), in eval mode, with the embedding tables
    and the positional table needed to check it."""
    model = build(module, config, seed)
    seen: dict = {}
    _capture_first_input([model.encoder, _first_layer(model.encoder)], seen, "encoder_input")
    _capture_first_input([model.decoder, _first_layer(model.decoder)], seen, "decoder_input")
    with torch.no_grad():
        model(src, tgt)
    return {
        "encoder_input": seen.get("encoder_input"),
        "decoder_input": seen.get("decoder_input"),
        "encoder_type": type(model.encoder).__name__,
        "decoder_type": type(model.decoder).__name__,
        "src_embed": model.src_embed.weight.detach().clone(),
        "tgt_embed": model.tgt_embed.weight.detach().clone(),
        "pe": model.pos_encoding.pe.detach().clone(),
    }


def greedy_output(module: ModuleType, config: dict, seed: int, src: torch.Tensor, max_len: int,
                  start_symbol: int, end_symbol: int) -> dict:
    """``greedy_decode`` in eval mode, and for each step t >= 1 the argmax of
    the model's own ``forward(src, tokens[:, :t])`` at its last position
    (what a greedy decoder must have picked at step t, given its own prefix)."""
    model = build(module, config, seed)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tokens = model.greedy_decode(src, max_len, start_symbol, end_symbol)
    step_argmax = None
    if isinstance(tokens, torch.Tensor) and tokens.dim() == 2 and tokens.size(0) == src.size(0):
        with torch.no_grad():
            step_argmax = torch.stack(
                [model(src, tokens[:, :t].long())[:, -1].argmax(dim=-1) for t in range(1, tokens.size(1))], dim=1
            ) if tokens.size(1) > 1 else tokens.new_zeros(src.size(0), 0)
    return {"tokens": tokens, "step_argmax": step_argmax, "implicit_softmax": implicit_softmax(caught)}


def _count(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def structure(module: ModuleType, config: dict) -> dict:
    """Registered parameters, buffers and children, the attributes that hide
    modules in plain lists, the number of parameters, and the number the
    contract implies (two embeddings, the shipped Encoder and Decoder of
    the exercise's folder, a Linear generator)."""
    model = module.Transformer(**config)
    encoder, decoder = load_shipped(module, "encoder"), load_shipped(module, "decoder")
    c = {"d_model": 512, "num_heads": 8, "num_encoder_layers": 6, "num_decoder_layers": 6,
         "d_ff": 2048, **config}
    d = c["d_model"]
    expected = (c["src_vocab"] * d + c["tgt_vocab"] * d + d * c["tgt_vocab"] + c["tgt_vocab"]
                + _count(encoder.Encoder(c["num_encoder_layers"], d, c["num_heads"], c["d_ff"]))
                + _count(decoder.Decoder(c["num_decoder_layers"], d, c["num_heads"], c["d_ff"])))
    return {**registered(model), "hidden_lists": hidden_list_modules(model),
            "n_parameters": _count(model), "expected_n_parameters": expected}


# --- plain-data views for the hidden checks --------------------------------------
# Outputs at padded *target* positions are left out: the target padding mask
# changes only them and the loss ignores them (README, "Masks"), so a model
# without it is not wrong. Which positions are real is read from the inputs.

def _real(values: object, ids: torch.Tensor, pad: int) -> object:
    """``values[ids != pad]`` ((n_real, ...)) when ``values`` starts with
    ``ids``' (b, n); anything else is returned as it is, so that a wrong
    shape still shows as a wrong shape."""
    if isinstance(values, torch.Tensor) and values.dim() >= 2 and tuple(values.shape[:2]) == tuple(ids.shape):
        return values[ids != pad]
    return values


def real_target_logits(module: ModuleType, config: dict, seed: int, src: torch.Tensor, tgt: torch.Tensor,
                       pad_embedding: torch.Tensor | None = None) -> dict:
    """:func:`forward_logits` with the logits kept at non-pad target positions only."""
    found = forward_logits(module, config, seed, src, tgt, pad_embedding)
    return {"logits": _real(found["logits"], tgt, config.get("pad_idx", 0)),
            "repeatable": found["repeatable"], "inputs_unchanged": found["inputs_unchanged"]}


def real_encode_decode(module: ModuleType, config: dict, seed: int, src: torch.Tensor, tgt: torch.Tensor) -> dict:
    """:func:`encode_decode` with the memory at non-pad source positions (what
    reaches the decoder) and the decoder outputs at non-pad target positions."""
    found = encode_decode(module, config, seed, src, tgt)
    pad = config.get("pad_idx", 0)
    return {"memory": _real(found["memory"], src, pad),
            **{key: _real(found[key], tgt, pad) for key in ("decoded", "generated", "logits")}}


def real_attention_weights(module: ModuleType, config: dict, seed: int, src: torch.Tensor, tgt: torch.Tensor) -> dict:
    """:func:`attention_weights`, with the rows of padded queries zeroed: only
    what real tokens see is part of the contract."""
    found = attention_weights(module, config, seed, src, tgt)
    for key, queries in (("encoder_self", src), ("decoder_self", tgt), ("decoder_cross", tgt)):
        weights = found[key]  # (b, h, n_q, n_k) or None
        if isinstance(weights, torch.Tensor) and weights.dim() == 4 and tuple(weights.shape[::2]) == tuple(queries.shape):
            found[key] = weights.masked_fill((queries == config.get("pad_idx", 0))[:, None, :, None], 0.0)
    return found


def float64_logits(module: ModuleType, config: dict, seed: int, src: torch.Tensor, tgt: torch.Tensor) -> dict:
    """``model.to(torch.float64)``: the floating tensors it left in another
    dtype, and the logits at non-pad target positions."""
    model = build(module, config, seed)
    not_moved = sorted(name for name, dtype in dtypes_after_to(model, torch.float64).items() if dtype == "torch.float32")
    with torch.no_grad():
        logits = model(src, tgt)
    return {"not_moved": not_moved, "dtype": str(getattr(logits, "dtype", None)),
            "logits": _real(logits, tgt, config.get("pad_idx", 0))}


def train_gradients(module: ModuleType, config: dict, seed: int, src: torch.Tensor, tgt: torch.Tensor,
                    upstream: torch.Tensor) -> dict:
    """In float64 and train mode: the logits at non-pad target positions and
    the gradient of every parameter (by name; None where none arrived) of
    ``(logits * upstream)`` summed over the non-pad target positions. Give
    it ``dropout=0``: the order in which a correct model draws its dropout
    masks is its own business (see :func:`dropout_modes`)."""
    model = build(module, config, seed).to(torch.float64).train()
    real = (tgt != config.get("pad_idx", 0)).unsqueeze(-1)
    logits = model(src, tgt)
    (logits * upstream * real).sum().backward()
    return {"logits": _real(logits.detach(), tgt, config.get("pad_idx", 0)),
            "grads": {name: None if p.grad is None else p.grad.clone() for name, p in model.named_parameters()}}


def _count_calls(sub: object, depth: list[int]) -> None:
    """While ``sub``'s forward runs, ``depth[0]`` is above 0 (its own
    ``forward`` wrapped, so a direct ``sub.forward(x)`` counts too)."""
    if not isinstance(sub, nn.Module):
        return
    original = sub.forward

    def forward(*args, **kwargs):
        depth[0] += 1
        try:
            return original(*args, **kwargs)
        finally:
            depth[0] -= 1

    sub.forward = forward


def dropout_modes(module: ModuleType, config: dict, seed: int, src: torch.Tensor, tgt: torch.Tensor) -> dict:
    """With the config's dropout: whether two train-mode forwards under
    different seeds differ, and two eval-mode forwards are identical, at the
    non-pad target positions; and whether train-mode forwards still differ
    when every dropout outside ``model.pos_encoding``'s forward is switched
    off at the dispatcher (the positional encoding's own dropout is used)."""
    pad = config.get("pad_idx", 0)
    model = build(module, config, seed)
    outs = {key: _real(value, tgt, pad) for key, value in train_eval_outputs(model, lambda m: m(src, tgt)).items()}
    # Every dropout outside the positional encoding's forward is switched off
    # at the dispatcher, however it is called (nn.Dropout, F.dropout, ...).
    depth = [0]
    _count_calls(model.pos_encoding, depth)
    with DropoutWatch(only_when=lambda: depth[0] > 0):
        only_pe = {key: _real(value, tgt, pad)
                   for key, value in train_eval_outputs(model, lambda m: m(src, tgt)).items()}
    return {"train_varies": not torch.equal(outs["train_0"], outs["train_1"]),
            "eval_repeatable": torch.equal(outs["eval_0"], outs["eval_1"]),
            "pe_dropout_used": not torch.equal(only_pe["train_0"], only_pe["train_1"])}


def greedy_rule(module: ModuleType, config: dict, seed: int, src: torch.Tensor, max_len: int,
                start_symbol: int, end_symbol: int) -> dict:
    """:func:`greedy_output` turned into what the contract promises: shape,
    dtype, the start column, and whether every later token is the argmax of
    the model's own ``forward`` on its prefix, or ``pad_idx`` once its row
    has produced ``end_symbol``. Judged against the model itself, so a
    near-tie between two logits cannot set two correct models apart."""
    found = greedy_output(module, config, seed, src, max_len, start_symbol, end_symbol)
    tokens, argmax = found["tokens"], found["step_argmax"]
    if not isinstance(tokens, torch.Tensor) or tuple(tokens.shape) != (src.size(0), max_len) or argmax is None:
        return {"shape": list(getattr(tokens, "shape", [])), "dtype": str(getattr(tokens, "dtype", None)),
                "starts": False, "follows_argmax": False}
    tokens = tokens.long()
    ended = torch.zeros(src.size(0), dtype=torch.bool)
    follows = True
    for t in range(1, max_len):
        expected = argmax[:, t - 1].masked_fill(ended, config.get("pad_idx", 0))
        follows = follows and torch.equal(tokens[:, t], expected)
        ended |= tokens[:, t] == end_symbol
    return {"shape": list(tokens.shape), "dtype": str(found["tokens"].dtype),
            "starts": bool((tokens[:, 0] == start_symbol).all()), "follows_argmax": follows}


def structure_summary(module: ModuleType, config: dict) -> dict:
    """:func:`structure` reduced to the contract: the six named sub-modules'
    types, every parameter's name and shape, the modules hidden in plain
    lists, and whether the number of parameters is the one the config implies."""
    found = structure(module, config)
    names = ("src_embed", "tgt_embed", "pos_encoding", "encoder", "decoder", "generator")
    return {"children": {name: found["children"].get(name) for name in names}, "parameters": found["parameters"],
            "hidden_lists": found["hidden_lists"],
            "n_parameters_ok": found["n_parameters"] == found["expected_n_parameters"]}
