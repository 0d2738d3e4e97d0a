"""PyTorch's own Transformer layers as oracles for the course's modules.

``nn.MultiheadAttention``, ``nn.TransformerEncoderLayer`` and
``nn.TransformerDecoderLayer`` (``batch_first=True, norm_first=False``, ReLU)
compute exactly what the course's post-norm layers compute; only the
parameter names differ. The functions here

- build such an oracle with seeded random parameters (LayerNorm weights
  included, so that a shared or missing LayerNorm shows in the outputs), and
- map the oracle's ``state_dict`` onto the course's names, so the *same*
  weights can be loaded into a student's module with
  :func:`coursekit.probes.modules.load_weights`.

Name mapping (torch -> course)::

    MultiheadAttention  in_proj_weight[0:d]      -> W_query.weight
                        in_proj_weight[d:2d]     -> W_key.weight
                        in_proj_weight[2d:3d]    -> W_value.weight
                        in_proj_bias (same split) -> W_query/W_key/W_value.bias
                        out_proj.*               -> out_proj.*
    Encoder/DecoderLayer self_attn.*              -> self_attn.*  (as above)
                        multihead_attn.*         -> cross_attn.* (decoder only)
                        linear1.*, linear2.*     -> feed_forward.linear1.*, feed_forward.linear2.*
                        norm1.*, norm2.*, norm3.* -> the same names

Used by the hidden checks of exercises 09 and 10, and by grader/fixtures_layers.py
for the public tests' stored values. On the trusted side only: the student kit
ships no function that computes a graded answer (issue 36).
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

import torch
from torch import nn

State = Mapping[str, torch.Tensor]

_PROJECTIONS = ("W_query", "W_key", "W_value")


def _copy(t: torch.Tensor) -> torch.Tensor:
    return t.detach().clone()


def mha_to_course(state: State, prefix: str = "") -> dict[str, torch.Tensor]:
    """An ``nn.MultiheadAttention`` state_dict in course names
    (``W_query``, ``W_key``, ``W_value``, ``out_proj``), each under ``prefix``.

    Handles both layouts torch uses: one packed ``in_proj_weight`` (when
    query, key and value have the same size) or separate ``q/k/v_proj_weight``.
    """
    out: dict[str, torch.Tensor] = {}
    if "in_proj_weight" in state and state["in_proj_weight"] is not None:
        for name, w in zip(_PROJECTIONS, state["in_proj_weight"].chunk(3, dim=0)):
            out[f"{prefix}{name}.weight"] = _copy(w)
    else:
        for name, short in zip(_PROJECTIONS, "qkv"):
            out[f"{prefix}{name}.weight"] = _copy(state[f"{short}_proj_weight"])
    if state.get("in_proj_bias") is not None:
        for name, b in zip(_PROJECTIONS, state["in_proj_bias"].chunk(3, dim=0)):
            out[f"{prefix}{name}.bias"] = _copy(b)
    for key in ("out_proj.weight", "out_proj.bias"):
        if state.get(key) is not None:
            out[f"{prefix}{key}"] = _copy(state[key])
    return out


def _sub_state(state: State, prefix: str) -> dict[str, torch.Tensor]:
    return {key[len(prefix):]: value for key, value in state.items() if key.startswith(prefix)}


def _layer_to_course(state: State, prefix: str, attentions: dict[str, str], norms: int) -> dict[str, torch.Tensor]:
    out: dict[str, torch.Tensor] = {}
    for torch_name, course_name in attentions.items():
        out.update(mha_to_course(_sub_state(state, f"{torch_name}."), f"{prefix}{course_name}."))
    for linear in ("linear1", "linear2"):
        for kind in ("weight", "bias"):
            out[f"{prefix}feed_forward.{linear}.{kind}"] = _copy(state[f"{linear}.{kind}"])
    for i in range(1, norms + 1):
        for kind in ("weight", "bias"):
            out[f"{prefix}norm{i}.{kind}"] = _copy(state[f"norm{i}.{kind}"])
    return out


def encoder_layer_to_course(state: State, prefix: str = "") -> dict[str, torch.Tensor]:
    """An ``nn.TransformerEncoderLayer`` state_dict in the names of the
    course's ``EncoderLayer`` (self_attn, feed_forward, norm1, norm2)."""
    return _layer_to_course(state, prefix, {"self_attn": "self_attn"}, norms=2)


def decoder_layer_to_course(state: State, prefix: str = "") -> dict[str, torch.Tensor]:
    """An ``nn.TransformerDecoderLayer`` state_dict in the names of the
    course's ``DecoderLayer`` (self_attn, cross_attn, feed_forward, norm1-3)."""
    return _layer_to_course(state, prefix, {"self_attn": "self_attn", "multihead_attn": "cross_attn"}, norms=3)


def stack_to_course(layers: Iterable[nn.Module], prefix: str = "layers.") -> dict[str, torch.Tensor]:
    """Torch encoder or decoder layers, in order, as the course's
    ``Encoder``/``Decoder`` (``layers.0.``, ``layers.1.``, ...) sees them."""
    out: dict[str, torch.Tensor] = {}
    for i, layer in enumerate(layers):
        convert = decoder_layer_to_course if isinstance(layer, nn.TransformerDecoderLayer) else encoder_layer_to_course
        out.update(convert(layer.state_dict(), f"{prefix}{i}."))
    return out


# --- building oracles -------------------------------------------------------

def randomize_(module: nn.Module, seed: int) -> nn.Module:
    """Overwrite every parameter with seeded random values, in place.

    Linear weights and biases: uniform in +-1/sqrt(fan_in) (the usual scale);
    LayerNorm weights around 1 and biases around 0, but different per
    feature and per LayerNorm, so two LayerNorms are never interchangeable.
    """
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for sub in module.modules():
            for name, p in sub.named_parameters(recurse=False):
                if isinstance(sub, nn.LayerNorm):
                    base = 1.0 if name == "weight" else 0.0
                    p.copy_(base + 0.5 * torch.randn(p.shape, generator=gen, dtype=p.dtype))
                else:
                    fan_in = p.shape[-1] if p.dim() > 1 else p.shape[0]
                    bound = 1.0 / math.sqrt(fan_in)
                    p.copy_((torch.rand(p.shape, generator=gen, dtype=p.dtype) * 2 - 1) * bound)
    return module


def torch_encoder_layer(d_model: int, num_heads: int, d_ff: int, seed: int = 0) -> nn.TransformerEncoderLayer:
    """An ``nn.TransformerEncoderLayer`` with the course's conventions
    (post-norm, batch-first, ReLU, no dropout), random parameters, in eval mode."""
    layer = nn.TransformerEncoderLayer(d_model, num_heads, d_ff, dropout=0.0, activation="relu",
                                       batch_first=True, norm_first=False)
    return randomize_(layer, seed).eval()


def torch_decoder_layer(d_model: int, num_heads: int, d_ff: int, seed: int = 0) -> nn.TransformerDecoderLayer:
    """An ``nn.TransformerDecoderLayer`` like :func:`torch_encoder_layer`;
    its ``multihead_attn`` is the course's ``cross_attn``."""
    layer = nn.TransformerDecoderLayer(d_model, num_heads, d_ff, dropout=0.0, activation="relu",
                                       batch_first=True, norm_first=False)
    return randomize_(layer, seed).eval()


def silence_sublayers_(layer: nn.Module) -> nn.Module:
    """Zero the last linear map of every sublayer (attention out_proj,
    feed-forward linear2), in place: each sublayer then outputs exactly 0
    and the layer reduces to its residual path, the LayerNorms of x."""
    targets = [layer.self_attn.out_proj, layer.linear2]
    if hasattr(layer, "multihead_attn"):  # a decoder layer: its cross-attention too
        targets.append(layer.multihead_attn.out_proj)
    with torch.no_grad():
        for linear in targets:
            linear.weight.zero_()
            linear.bias.zero_()
    return layer


def tie_norms_(layer: nn.Module) -> nn.Module:
    """Give norm2 (and norm3) the values of norm1, in place: a test that
    should not depend on which LayerNorm is used where."""
    with torch.no_grad():
        for name in ("norm2", "norm3"):
            norm = getattr(layer, name, None)
            if norm is not None:
                norm.weight.copy_(layer.norm1.weight)
                norm.bias.copy_(layer.norm1.bias)
    return layer


# --- running oracles ----------------------------------------------------------
# The course's masks are passed to torch as ``attn_mask`` of shape
# (batch * heads, n_query, n_key): torch reads a bool attn_mask in the same
# sense (True = blocked). Not as ``key_padding_mask``, which would give the
# same numbers but whose shape check imports torch.fx's symbolic shapes
# (about a second, once per process).
# Gradients stay enabled on purpose: in eval mode under no_grad, torch takes a
# "fast path" for these layers, which is a different implementation.

def to_torch_attn_mask(mask: torch.Tensor | None, batch: int, num_heads: int, n_query: int, n_key: int) -> torch.Tensor | None:
    """A course mask (bool, True = blocked, broadcasting to
    ``(batch, heads, n_query, n_key)``; a 3-D mask is per batch, the same for
    every head) as torch's 3-D ``attn_mask`` ``(batch * heads, n_query, n_key)``."""
    if mask is None:
        return None
    if mask.dim() == 3:
        mask = mask.unsqueeze(1)  # (b, 1, n_q, n_k): the same for every head
    return mask.broadcast_to(batch, num_heads, n_query, n_key).reshape(batch * num_heads, n_query, n_key)


def run_encoder_layers(layers: Iterable[nn.TransformerEncoderLayer], x: torch.Tensor,
                       mask: torch.Tensor | None = None) -> torch.Tensor:
    """Apply torch encoder layers in order to ``x`` ``(batch, n, d_model)``.
    ``mask``: the course's mask (bool, True = blocked), e.g. padding ``(batch, 1, n)``."""
    for layer in layers:
        b, n, _ = x.shape
        x = layer(x, src_mask=to_torch_attn_mask(mask, b, layer.self_attn.num_heads, n, n))
    return x.detach()


def run_decoder_layers(layers: Iterable[nn.TransformerDecoderLayer], x: torch.Tensor, memory: torch.Tensor,
                       tgt_mask: torch.Tensor | None = None, memory_mask: torch.Tensor | None = None) -> torch.Tensor:
    """Apply torch decoder layers in order to ``x`` ``(batch, n_tgt, d_model)``
    with ``memory`` ``(batch, n_src, d_model)``. Masks as in the course (bool,
    True = blocked): ``tgt_mask`` broadcasting to ``(batch, n_tgt, n_tgt)``,
    ``memory_mask`` to ``(batch, n_tgt, n_src)``."""
    for layer in layers:
        (b, n_tgt, _), n_src, h = x.shape, memory.shape[1], layer.self_attn.num_heads
        x = layer(x, memory, tgt_mask=to_torch_attn_mask(tgt_mask, b, h, n_tgt, n_tgt),
                  memory_mask=to_torch_attn_mask(memory_mask, b, h, n_tgt, n_src))
    return x.detach()
