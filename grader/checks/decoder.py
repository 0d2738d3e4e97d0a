"""Hidden checks of exercise 10 (decoder).

As for the encoder (:mod:`grader.checks.encoder`; the checks both declare
are built once, in :mod:`grader.checks.stacks`): explicit weights loaded by
name, from PyTorch's own ``nn.TransformerDecoderLayer`` renamed by
:mod:`grader.torch_oracles`. Target and source lengths differ
unless a check says otherwise: a cross-attention that takes its queries from
``memory`` then cannot even run.
"""
from __future__ import annotations

import torch

from grader import torch_oracles as oracles
from grader.checks import text
from grader.checks.stacks import (
    STACK_PITFALLS, Case, StackKind, causal, draw, padded_lengths, padding, random_blocks, stack_checks,
)

LAYER_PITFALLS = ("shared-layernorm", "residual-missing", "cross-attn-swapped", "pre-norm")


def _masks(gen: torch.Generator, kind: str, batch: int, n_tgt: int, n_src: int) -> dict:
    """``tgt_mask`` and ``memory_mask`` of one kind of case."""
    if kind == "causal":  # one (n_tgt, n_tgt) for the batch; padded sources, maybe a sequence of padding only
        return {"tgt_mask": causal(n_tgt), "memory_mask": padding(gen, batch, n_src)[:, None, :]}
    if kind == "target-padding":  # (b, n_tgt, n_tgt) = causal | padded targets; (b, n_tgt, n_src) blocks
        tgt = causal(n_tgt) | padding(gen, batch, n_tgt)[:, None, :]
        return {"tgt_mask": tgt, "memory_mask": random_blocks(gen, (batch, n_tgt, n_src))}
    return {"tgt_mask": None, "memory_mask": None}


def _inputs(gen: torch.Generator, d_model: int, masks: str, dtype: torch.dtype, options: dict) -> dict:
    """x (batch, n_tgt, d_model), memory (batch, n_src, d_model) and the masks
    of one kind. n_src differs from n_tgt unless ``options["same_lengths"]``."""
    batch, n_tgt, n_src = draw(gen, 1, 3), draw(gen, 1, 6), draw(gen, 1, 6)
    n_src = n_tgt if options.get("same_lengths") else n_src + (n_src == n_tgt)
    return {"x": (1.5 * torch.randn(batch, n_tgt, d_model, generator=gen)).to(dtype),
            "memory": (1.5 * torch.randn(batch, n_src, d_model, generator=gen)).to(dtype),
            **_masks(gen, masks, batch, n_tgt, n_src)}


def _behaviour_inputs(gen: torch.Generator, d_model: int) -> dict:
    batch, n_tgt, n_src = draw(gen, 2, 3), draw(gen, 2, 6), draw(gen, 3, 7)
    n_src += n_src == n_tgt
    return {"x": 3.0 * torch.randn(batch, n_tgt, d_model, generator=gen) + 1.0,
            "memory": torch.randn(batch, n_src, d_model, generator=gen),
            "src_padding": padded_lengths(gen, batch, n_src), "split": draw(gen, 1, n_tgt - 1)}


def _placement_args(gen: torch.Generator, d_model: int, kind: str) -> tuple:
    batch, n_tgt, n_src = draw(gen, 1, 3), draw(gen, 2, 6), draw(gen, 2, 6)
    masks = _masks(gen, kind, batch, n_tgt, n_src)
    x, memory = torch.randn(batch, n_tgt, d_model, generator=gen), torch.randn(batch, n_src, d_model, generator=gen)
    return x, memory, masks["tgt_mask"], masks["memory_mask"]


DECODER = StackKind(
    exercise="10", word="decoder", layer="DecoderLayer", stack="Decoder",
    names="self_attn, cross_attn, feed_forward, norm1, norm2, norm3",
    oracle=oracles.torch_decoder_layer, to_course=oracles.decoder_layer_to_course, inputs=_inputs,
    behaviour_inputs=_behaviour_inputs, placement_args=_placement_args,
    # A layer and a stack, with a causal mask and padded sources, and with padded targets.
    placements=(("DecoderLayer", False, "causal"), ("Decoder", True, "target-padding"), ("Decoder", True, "none")),
)

CHECKS = stack_checks(DECODER, [
    Case("10-layer-behaviour", "behaviour", count=2, weight=1.5, pitfalls=("cross-attn-swapped", "pre-norm"),
         seed=1009, message=text(
             "a fresh DecoderLayer (its own weights): one output per target position, every output vector normalised "
             "(post-norm), later targets and padded memory positions change nothing they should not, dropout only "
             "in training mode", "新建的 DecoderLayer（使用其自身权重）：每个目标位置一个输出、每个输出向量都已归一化"
             "（post-norm）、后面的目标位置与 memory 的填充位置不影响不该影响的输出、dropout 只在训练模式下起作用")),
    Case("10-layer-no-mask", "output", count=4, masks=("none",), weight=1.5, pitfalls=LAYER_PITFALLS, seed=1000,
         message=text("DecoderLayer with given weights on random sizes (batch, heads, d_model, d_ff, target and "
                      "source lengths that differ), no masks, in eval mode with a dropout rate set",
                      "DecoderLayer 载入给定权重，在随机尺寸（batch、头数、d_model、d_ff、互不相同的目标与源长度）上、"
                      "无掩码、设置了 dropout 比例的 eval 模式下的输出")),
    Case("10-layer-causal", "output", count=4, masks=("causal",), weight=2, seed=1001,
         pitfalls=(*LAYER_PITFALLS, "mask-not-passed"), message=text(
             "DecoderLayer with a causal target mask (n_tgt, n_tgt) and a memory padding mask (batch, 1, n_src), "
             "including a source that is all padding", "DecoderLayer 使用因果目标掩码 (n_tgt, n_tgt) 与 memory 填充"
             "掩码 (batch, 1, n_src)，包括整条源序列都是填充的情况")),
    Case("10-layer-target-padding", "output", count=4, masks=("target-padding",), weight=1.5, seed=1002,
         pitfalls=(*LAYER_PITFALLS, "mask-not-passed"), message=text(
             "DecoderLayer with a target mask (batch, n_tgt, n_tgt) that also blocks padded targets and a memory "
             "mask (batch, n_tgt, n_src), including fully blocked rows", "DecoderLayer 使用同时遮蔽目标填充位置的"
             "目标掩码 (batch, n_tgt, n_tgt) 与 memory 掩码 (batch, n_tgt, n_src)，包括整行被遮蔽的情况")),
    Case("10-layer-same-lengths", "output", count=3, masks=("causal", "target-padding"), seed=1003,
         options={"same_lengths": True}, pitfalls=("cross-attn-swapped",), message=text(
             "DecoderLayer when target and source have the same length: queries from x, keys and values from "
             "memory", "目标与源长度相同时的 DecoderLayer：query 来自 x，key 和 value 来自 memory")),
    Case("10-layer-residual", "output", count=3, masks=("causal",), options={"silenced": True}, weight=1.5,
         pitfalls=("residual-missing",), seed=1004, message=text(
             "the residual connections: with sublayers that output zeros, what is left is norm3(norm2(norm1(x)))",
             "残差连接：当子层输出全为 0 时，剩下的应是 norm3(norm2(norm1(x)))")),
    Case("10-layer-parameters", "structure", count=2, pitfalls=("shared-layernorm",), seed=1005, message=text(
        "DecoderLayer registers the contract's parameters: self_attn and cross_attn (separate), feed_forward and "
        "three separate LayerNorms norm1, norm2, norm3", "DecoderLayer 注册了约定的参数：相互独立的 self_attn 与 "
        "cross_attn、feed_forward 以及三个独立的 LayerNorm（norm1、norm2、norm3）")),
    Case("10-layer-float64", "float64", count=2, masks=("target-padding",), pitfalls=LAYER_PITFALLS, seed=1006,
         message=text("DecoderLayer.to(torch.float64) on float64 inputs keeps float64 precision",
                      "DecoderLayer.to(torch.float64) 在 float64 输入上保持 float64 精度")),
    Case("10-layer-train-dropout", "train", count=3, masks=("causal", "target-padding"), weight=1.5,
         pitfalls=LAYER_PITFALLS, seed=1007, message=text(
             "DecoderLayer in training mode with dropout (the same random dropout masks as the reference): dropout "
             "on each sublayer's output, before the residual add", "训练模式下带 dropout 的 DecoderLayer（与参考实现"
             "使用相同的随机 dropout 掩码）：dropout 作用在每个子层的输出上、残差相加之前")),
    Case("10-layer-gradients", "gradients", count=3, masks=("causal", "target-padding"), weight=1.5,
         pitfalls=LAYER_PITFALLS, seed=1008,
         message=text("gradients of x, of memory and of every parameter of DecoderLayer, with masks",
                      "带掩码时，DecoderLayer 对 x、memory 和每个参数的梯度")),
    Case("10-layer-inputs-unchanged", "unchanged", count=3, masks=("target-padding", "causal"), weight=0.5,
         seed=1010, message=text("DecoderLayer does not modify x, memory or the masks",
                                 "DecoderLayer 不修改 x、memory 和掩码")),
    Case("10-decoder-registered", "structure", stack=True, count=2, pitfalls=STACK_PITFALLS, seed=1011, message=text(
        "Decoder keeps num_layers separate DecoderLayers in an nn.ModuleList, all their parameters registered",
        "Decoder 用 nn.ModuleList 保存 num_layers 个独立的 DecoderLayer，其参数全部已注册")),
    Case("10-decoder-behaviour", "behaviour", stack=True, count=1, pitfalls=STACK_PITFALLS, seed=1012, message=text(
        "a fresh Decoder: output shape, normalised outputs, no look at later targets or padded memory, dropout only "
        "in training mode (.eval() must reach every layer)", "新建的 Decoder：输出形状、输出已归一化、不看后面的目标"
        "位置和 memory 的填充位置、dropout 只在训练模式下起作用（.eval() 必须作用到每一层）")),
    Case("10-decoder-stack", "output", stack=True, count=4, masks=("target-padding", "causal", "none"), weight=2,
         pitfalls=STACK_PITFALLS, seed=1013, message=text(
             "Decoder of 1 to 4 layers with given weights, each layer in turn with the same memory and masks",
             "载入给定权重的 1 到 4 层 Decoder：逐层计算，每层使用同一个 memory 和同样的掩码")),
    # n_src == n_tgt: a stack that .to() did not reach raises here, and a
    # swapped cross-attention must not raise the same error type, or the
    # judge would take one mistake for the other.
    Case("10-decoder-float64", "float64", stack=True, count=2, masks=("target-padding",), weight=0.5,
         options={"same_lengths": True}, pitfalls=STACK_PITFALLS, seed=1014, message=text(
             "Decoder.to(torch.float64) moves every layer and keeps float64 precision",
             "Decoder.to(torch.float64) 转换每一层并保持 float64 精度")),
    Case("10-decoder-train-dropout", "train", stack=True, count=2, masks=("causal",), pitfalls=STACK_PITFALLS,
         seed=1015, message=text("Decoder in training mode with dropout (the same random dropout masks as the "
                                 "reference)", "训练模式下带 dropout 的 Decoder（与参考实现使用相同的随机 dropout 掩码）")),
    Case("10-decoder-gradients", "gradients", stack=True, count=2, masks=("causal",), pitfalls=STACK_PITFALLS,
         seed=1016, message=text("gradients of x, of memory (used by every layer) and of every parameter of Decoder",
                                 "Decoder 对 x、memory（每一层都使用）和每个参数的梯度")),
    Case("10-device", "device", pitfalls=("mask-cpu-loop", "plain-list-layers"), seed=1017),
])
