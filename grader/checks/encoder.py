"""Hidden checks of exercise 09 (encoder).

Every run loads explicit weights by name (random, seeded, from PyTorch's own
``nn.TransformerEncoderLayer`` renamed by :mod:`grader.torch_oracles`,
LayerNorms included), so a correct layer that creates its sub-modules in
another order still passes, and two LayerNorms are never interchangeable.

What 09 shares with 10 (sizes, weights, the kinds of check) is declared once
in :mod:`grader.checks.stacks`; here are the encoder's inputs and its table.
"""
from __future__ import annotations

import torch

from grader import torch_oracles as oracles
from grader.checks import text
from grader.checks.stacks import STACK_PITFALLS, Case, StackKind, draw, padded_lengths, padding, random_blocks, stack_checks

LAYER_PITFALLS = ("shared-layernorm", "residual-missing", "pre-norm")


def _mask(gen: torch.Generator, kind: str, batch: int, n: int) -> torch.Tensor | None:
    if kind == "padding":
        return padding(gen, batch, n)[:, None, :]  # (b, 1, n)
    if kind == "full":  # (b, n, n) or one (n, n) for the whole batch
        return random_blocks(gen, (batch, n, n) if draw(gen, 0, 1) else (n, n))
    return None


def _inputs(gen: torch.Generator, d_model: int, mask: str, dtype: torch.dtype, options: dict) -> dict:
    """x (batch, n, d_model) and one mask of the ``mask`` kind."""
    batch, n = draw(gen, 1, 3), draw(gen, 1, 7)
    x = (1.5 * torch.randn(batch, n, d_model, generator=gen)).to(dtype)
    return {"x": x, "mask": _mask(gen, mask, batch, n)}


def _behaviour_inputs(gen: torch.Generator, d_model: int) -> dict:
    batch, n = draw(gen, 2, 3), draw(gen, 3, 6)
    x = 3.0 * torch.randn(batch, n, d_model, generator=gen) + 1.0
    return {"x": x, "padding": padded_lengths(gen, batch, n)}


def _placement_args(gen: torch.Generator, d_model: int, mask: str) -> tuple:
    batch, n = draw(gen, 1, 3), draw(gen, 2, 6)
    x = torch.randn(batch, n, d_model, generator=gen)
    return x, _mask(gen, mask, batch, n)


ENCODER = StackKind(
    exercise="09", word="encoder", layer="EncoderLayer", stack="Encoder", names="self_attn, feed_forward, norm1, norm2",
    oracle=oracles.torch_encoder_layer, to_course=oracles.encoder_layer_to_course, inputs=_inputs,
    behaviour_inputs=_behaviour_inputs, placement_args=_placement_args,
    # A layer and a stack, with and without a padding mask.
    placements=(("EncoderLayer", False, "padding"), ("Encoder", True, "padding"), ("Encoder", True, "none")),
)

CHECKS = stack_checks(ENCODER, [
    Case("09-layer-behaviour", "behaviour", count=3, weight=1.5, pitfalls=("pre-norm",), seed=909, message=text(
        "a fresh EncoderLayer (its own weights): output shape, every output vector normalised (post-norm), padded "
        "positions do not change the others, dropout only in training mode",
        "新建的 EncoderLayer（使用其自身权重）：输出形状、每个输出向量都已归一化（post-norm）、"
        "填充位置不影响其他位置、dropout 只在训练模式下起作用")),
    Case("09-layer-no-mask", "output", count=6, masks=("none",), weight=2, pitfalls=LAYER_PITFALLS, seed=900,
         message=text("EncoderLayer with given weights on random sizes (batch, length, heads, d_model, d_ff), "
                      "no mask, in eval mode with a dropout rate set", "EncoderLayer 载入给定权重，在随机尺寸（batch、"
                      "长度、头数、d_model、d_ff）上、无掩码、设置了 dropout 比例的 eval 模式下的输出")),
    Case("09-layer-padding-mask", "output", count=6, masks=("padding",), weight=2, seed=901,
         pitfalls=(*LAYER_PITFALLS, "mask-not-passed"),
         message=text("EncoderLayer with a padding mask (batch, 1, n), including a sequence that is all padding",
                      "EncoderLayer 使用填充掩码 (batch, 1, n)，包括整条序列都是填充的情况")),
    Case("09-layer-full-masks", "output", count=4, masks=("full",), pitfalls=(*LAYER_PITFALLS, "mask-not-passed"),
         seed=902, message=text("EncoderLayer with masks of shape (n, n) and (batch, n, n), including fully blocked "
                                "rows", "EncoderLayer 使用形状为 (n, n) 与 (batch, n, n) 的掩码，包括整行被遮蔽的情况")),
    Case("09-layer-residual", "output", count=3, masks=("padding",), options={"silenced": True}, weight=1.5,
         pitfalls=("residual-missing",), seed=903,
         message=text("the residual connections: with sublayers that output zeros, what is left is norm2(norm1(x))",
                      "残差连接：当子层输出全为 0 时，剩下的应是 norm2(norm1(x))")),
    Case("09-layer-parameters", "structure", count=2, pitfalls=("shared-layernorm",), seed=904, message=text(
        "EncoderLayer registers the contract's parameters: self_attn, feed_forward and two separate LayerNorms norm1, "
        "norm2", "EncoderLayer 注册了约定的参数：self_attn、feed_forward 以及两个独立的 LayerNorm（norm1、norm2）")),
    Case("09-layer-float64", "float64", count=3, masks=("padding",), seed=905,
         message=text("EncoderLayer.to(torch.float64) on float64 inputs keeps float64 precision",
                      "EncoderLayer.to(torch.float64) 在 float64 输入上保持 float64 精度")),
    Case("09-layer-train-dropout", "train", count=3, masks=("padding", "full"), weight=1.5, seed=906, message=text(
        "EncoderLayer in training mode with dropout (the same random dropout masks as the reference): dropout on "
        "each sublayer's output, before the residual add", "训练模式下带 dropout 的 EncoderLayer（与参考实现使用相同的"
        "随机 dropout 掩码）：dropout 作用在每个子层的输出上、残差相加之前")),
    Case("09-layer-gradients", "gradients", count=3, masks=("padding",), weight=1.5, pitfalls=LAYER_PITFALLS, seed=907,
         message=text("gradients of the input and of every parameter of EncoderLayer, with a padding mask",
                      "带填充掩码时，EncoderLayer 对输入和每个参数的梯度")),
    Case("09-layer-inputs-unchanged", "unchanged", count=3, masks=("padding", "full"), weight=0.5, seed=908,
         message=text("EncoderLayer does not modify x or the mask", "EncoderLayer 不修改 x 和掩码")),
    Case("09-encoder-registered", "structure", stack=True, count=3, pitfalls=STACK_PITFALLS, seed=910, message=text(
        "Encoder keeps num_layers separate EncoderLayers in an nn.ModuleList, all their parameters registered",
        "Encoder 用 nn.ModuleList 保存 num_layers 个独立的 EncoderLayer，其参数全部已注册")),
    Case("09-encoder-behaviour", "behaviour", stack=True, count=2, pitfalls=STACK_PITFALLS, seed=915, message=text(
        "a fresh Encoder: output shape, normalised outputs, padding ignored, dropout only in training mode (.eval() "
        "must reach every layer)", "新建的 Encoder：输出形状、输出已归一化、忽略填充位置、dropout 只在训练模式下"
        "起作用（.eval() 必须作用到每一层）")),
    Case("09-encoder-stack", "output", stack=True, count=4, masks=("padding", "full", "none"), weight=2,
         pitfalls=STACK_PITFALLS, seed=911,
         message=text("Encoder of 1 to 4 layers with given weights, each layer in turn with the same mask",
                      "载入给定权重的 1 到 4 层 Encoder：逐层计算，每层使用同一个掩码")),
    Case("09-encoder-float64", "float64", stack=True, count=2, masks=("padding",), weight=0.5, pitfalls=STACK_PITFALLS,
         seed=912, message=text("Encoder.to(torch.float64) moves every layer and keeps float64 precision",
                                "Encoder.to(torch.float64) 转换每一层并保持 float64 精度")),
    Case("09-encoder-train-dropout", "train", stack=True, count=2, masks=("padding",), pitfalls=STACK_PITFALLS,
         seed=913, message=text("Encoder in training mode with dropout (the same random dropout masks as the "
                                "reference)", "训练模式下带 dropout 的 Encoder（与参考实现使用相同的随机 dropout 掩码）")),
    Case("09-encoder-gradients", "gradients", stack=True, count=2, masks=("padding",), pitfalls=STACK_PITFALLS,
         seed=914, message=text("gradients of the input and of every parameter of Encoder",
                                "Encoder 对输入和每个参数的梯度")),
    Case("09-device", "device", pitfalls=("mask-cpu-loop", "plain-list-layers"), seed=916),
])
