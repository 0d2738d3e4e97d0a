"""Hidden checks of exercise 09 (encoder).

Every run loads explicit weights by name (random, seeded, from PyTorch's own
``nn.TransformerEncoderLayer`` renamed by :mod:`coursekit.probes.torch_oracles`,
LayerNorms included), so a correct layer that creates its sub-modules in
another order still passes, and two LayerNorms are never interchangeable.

The helpers (sizes, masks, weights, ``trees_close``) are shared with
exercise 10's checks: :mod:`grader.checks.stacks`.
"""
from __future__ import annotations

import torch

from coursekit.probes import torch_oracles as oracles
from grader.checks import requiring
from grader.checks import Check, all_of, no_forbidden_calls, plain_equal, text
from grader.checks.stacks import (
    BEHAVIOUR_SAME,
    STACK_PITFALLS,
    Weights,
    behaviour_config,
    call_of,
    draw,
    float64_close,
    gradients_close,
    layer_config,
    loaded_and_close,
    oracle_layers,
    padded_lengths,
    padding,
    random_blocks,
)
from grader.checks.devices import device_check, placement_call
from grader.sandbox import ProbeCall

PROBES = "coursekit.probes.encoder"
LAYER_OUTPUT = f"{PROBES}:encoder_layer_output"
STACK_OUTPUT = f"{PROBES}:encoder_output"
SEEDED = f"{PROBES}:encoder_seeded_output"
GRADIENTS = f"{PROBES}:encoder_gradient_values"
FLOAT64 = f"{PROBES}:encoder_float64_values"
BEHAVIOUR = f"{PROBES}:encoder_behaviour"
LAYER_STRUCTURE = f"{PROBES}:encoder_layer_structure"
STACK_STRUCTURE = f"{PROBES}:encoder_structure"


# --- exercise 09 ------------------------------------------------------------------

NAMES = "self_attn, feed_forward, norm1, norm2"
LAYER_PITFALLS = ("shared-layernorm", "residual-missing", "pre-norm")
STACK_NAMES = "layers.0.self_attn, ..."


def _weights(config: dict, gen: torch.Generator, silenced: bool = False) -> Weights:
    layers = oracle_layers(oracles.torch_encoder_layer, config, config.get("num_layers", 1), gen)
    if "num_layers" in config:
        return oracles.stack_to_course(layers)
    if silenced:  # each sublayer outputs 0: only the residual path is left
        oracles.tie_norms_(oracles.silence_sublayers_(layers[0]))
    return oracles.encoder_layer_to_course(layers[0].state_dict())


def _mask(gen: torch.Generator, kind: str, batch: int, n: int) -> torch.Tensor | None:
    if kind == "padding":
        return padding(gen, batch, n)[:, None, :]  # (b, 1, n)
    if kind == "full":  # (b, n, n) or one (n, n) for the whole batch
        return random_blocks(gen, (batch, n, n) if draw(gen, 0, 1) else (n, n))
    return None


def _calls(gen: torch.Generator, count: int, kind: str, masks: tuple[str, ...], stack: bool = False,
           silenced: bool = False) -> list[ProbeCall]:
    """``count`` calls of one ``kind`` (output, float64, train, gradients),
    each on random sizes with its own seeded weights; the mask kinds take
    turns."""
    calls = []
    for i in range(count):
        train = kind == "train" or (kind == "gradients" and i % 2 == 1)  # gradients: every other call trains
        config = layer_config(gen, stack, train)
        weights = _weights(config, gen, silenced)
        batch, n = draw(gen, 1, 3), draw(gen, 1, 7)
        dtype = torch.float64 if kind == "float64" else torch.float32
        x = (1.5 * torch.randn(batch, n, config["d_model"], generator=gen)).to(dtype)
        kwargs = {"config": config, "weights": weights, "x": x, "mask": _mask(gen, masks[i % len(masks)], batch, n)}
        probe = {"output": STACK_OUTPUT if stack else LAYER_OUTPUT, "float64": FLOAT64, "train": SEEDED,
                 "gradients": GRADIENTS}[kind]
        calls.append(call_of(probe, kind, gen, kwargs, stack, train))
    return calls


def _behaviour(gen: torch.Generator, count: int, stack: bool) -> list[ProbeCall]:
    calls = []
    for _ in range(count):
        config = behaviour_config(gen, stack)
        batch, n = draw(gen, 2, 3), draw(gen, 3, 6)
        x = 3.0 * torch.randn(batch, n, config["d_model"], generator=gen) + 1.0
        calls.append(ProbeCall(BEHAVIOUR, {"config": config, "x": x, "padding": padded_lengths(gen, batch, n),
                                           "stack": stack}))
    return calls


def _structures(gen: torch.Generator, count: int, stack: bool) -> list[ProbeCall]:
    return [ProbeCall(STACK_STRUCTURE if stack else LAYER_STRUCTURE, {"config": layer_config(gen, stack)})
            for _ in range(count)]


def _placements(gen: torch.Generator) -> list[ProbeCall]:
    """Forward passes on the meta device: a layer and a stack, with and
    without a padding mask."""
    calls = []
    for cls, stack, kind in (("EncoderLayer", False, "padding"), ("Encoder", True, "padding"), ("Encoder", True, "none")):
        config = layer_config(gen, stack)
        batch, n = draw(gen, 1, 3), draw(gen, 2, 6)
        x = torch.randn(batch, n, config["d_model"], generator=gen)
        calls.append(placement_call(cls, config, x, _mask(gen, kind, batch, n)))
    return calls


CHECKS = [
    Check(
        id="09-layer-behaviour",
        weight=1.5,
        message=text("a fresh EncoderLayer (its own weights): output shape, every output vector normalised "
                     "(post-norm), padded positions do not change the others, dropout only in training mode",
                     "新建的 EncoderLayer（使用其自身权重）：输出形状、每个输出向量都已归一化（post-norm）、"
                     "填充位置不影响其他位置、dropout 只在训练模式下起作用"),
        calls=lambda gen: _behaviour(gen, 3, stack=False),
        compare=BEHAVIOUR_SAME,
        pitfalls=("pre-norm",),
        seed=909,
    ),
    Check(
        id="09-layer-no-mask",
        weight=2,
        message=text("EncoderLayer with given weights on random sizes (batch, length, heads, d_model, d_ff), "
                     "no mask, in eval mode with a dropout rate set", "EncoderLayer 载入给定权重，在随机尺寸（batch、"
                     "长度、头数、d_model、d_ff）上、无掩码、设置了 dropout 比例的 eval 模式下的输出"),
        calls=lambda gen: _calls(gen, 6, "output", ("none",)),
        compare=loaded_and_close(NAMES),
        pitfalls=LAYER_PITFALLS,
        seed=900,
    ),
    Check(
        id="09-layer-padding-mask",
        weight=2,
        message=text("EncoderLayer with a padding mask (batch, 1, n), including a sequence that is all padding",
                     "EncoderLayer 使用填充掩码 (batch, 1, n)，包括整条序列都是填充的情况"),
        calls=lambda gen: _calls(gen, 6, "output", ("padding",)),
        compare=loaded_and_close(NAMES),
        pitfalls=(*LAYER_PITFALLS, "mask-not-passed"),
        seed=901,
    ),
    Check(
        id="09-layer-full-masks",
        message=text("EncoderLayer with masks of shape (n, n) and (batch, n, n), including fully blocked rows",
                     "EncoderLayer 使用形状为 (n, n) 与 (batch, n, n) 的掩码，包括整行被遮蔽的情况"),
        calls=lambda gen: _calls(gen, 4, "output", ("full",)),
        compare=loaded_and_close(NAMES),
        pitfalls=(*LAYER_PITFALLS, "mask-not-passed"),
        seed=902,
    ),
    Check(
        id="09-layer-residual",
        weight=1.5,
        message=text("the residual connections: with sublayers that output zeros, what is left is norm2(norm1(x))",
                     "残差连接：当子层输出全为 0 时，剩下的应是 norm2(norm1(x))"),
        calls=lambda gen: _calls(gen, 3, "output", ("padding",), silenced=True),
        compare=loaded_and_close(NAMES),
        pitfalls=("residual-missing",),
        seed=903,
    ),
    Check(
        id="09-layer-parameters",
        message=text("EncoderLayer registers the contract's parameters: self_attn, feed_forward and two separate "
                     "LayerNorms norm1, norm2", "EncoderLayer 注册了约定的参数：self_attn、feed_forward 以及两个"
                     "独立的 LayerNorm（norm1、norm2）"),
        calls=lambda gen: _structures(gen, 2, stack=False),
        compare=plain_equal("parameters", reason="the registered parameters differ from the contract's "
                                                 "(names or shapes)"),
        pitfalls=("shared-layernorm",),
        seed=904,
    ),
    Check(
        id="09-layer-float64",
        message=text("EncoderLayer.to(torch.float64) on float64 inputs keeps float64 precision",
                     "EncoderLayer.to(torch.float64) 在 float64 输入上保持 float64 精度"),
        calls=lambda gen: _calls(gen, 3, "float64", ("padding",)),
        compare=float64_close(NAMES),
        seed=905,
    ),
    Check(
        id="09-layer-train-dropout",
        weight=1.5,
        message=text("EncoderLayer in training mode with dropout (the same random dropout masks as the reference): "
                     "dropout on each sublayer's output, before the residual add",
                     "训练模式下带 dropout 的 EncoderLayer（与参考实现使用相同的随机 dropout 掩码）："
                     "dropout 作用在每个子层的输出上、残差相加之前"),
        calls=lambda gen: _calls(gen, 3, "train", ("padding", "full")),
        compare=loaded_and_close(NAMES),
        seed=906,
    ),
    Check(
        id="09-layer-gradients",
        weight=1.5,
        message=text("gradients of the input and of every parameter of EncoderLayer, with a padding mask",
                     "带填充掩码时，EncoderLayer 对输入和每个参数的梯度"),
        calls=lambda gen: _calls(gen, 3, "gradients", ("padding",)),
        compare=gradients_close(NAMES),
        pitfalls=LAYER_PITFALLS,
        seed=907,
    ),
    Check(
        id="09-layer-inputs-unchanged",
        weight=0.5,
        message=text("EncoderLayer does not modify x or the mask", "EncoderLayer 不修改 x 和掩码"),
        calls=lambda gen: _calls(gen, 3, "output", ("padding", "full")),
        compare=all_of(plain_equal("inputs_unchanged", reason="modified an input in place"),
                       loaded_and_close(NAMES)),
        seed=908,
    ),
    Check(
        id="09-encoder-registered",
        message=text("Encoder keeps num_layers separate EncoderLayers in an nn.ModuleList, all their parameters "
                     "registered", "Encoder 用 nn.ModuleList 保存 num_layers 个独立的 EncoderLayer，"
                     "其参数全部已注册"),
        calls=lambda gen: _structures(gen, 3, stack=True),
        compare=all_of(plain_equal("hidden_lists", reason="layers kept in a plain Python list"),
                       plain_equal("layers", reason="layers is not an nn.ModuleList of separate EncoderLayers"),
                       plain_equal("parameters", reason="the registered parameters differ from the contract's")),
        pitfalls=STACK_PITFALLS,
        seed=910,
    ),
    Check(
        id="09-encoder-behaviour",
        message=text("a fresh Encoder: output shape, normalised outputs, padding ignored, dropout only in "
                     "training mode (.eval() must reach every layer)", "新建的 Encoder：输出形状、输出已归一化、"
                     "忽略填充位置、dropout 只在训练模式下起作用（.eval() 必须作用到每一层）"),
        calls=lambda gen: _behaviour(gen, 2, stack=True),
        compare=BEHAVIOUR_SAME,
        pitfalls=STACK_PITFALLS,
        seed=915,
    ),
    Check(
        id="09-encoder-stack",
        weight=2,
        message=text("Encoder of 1 to 4 layers with given weights, each layer in turn with the same mask",
                     "载入给定权重的 1 到 4 层 Encoder：逐层计算，每层使用同一个掩码"),
        calls=lambda gen: _calls(gen, 4, "output", ("padding", "full", "none"), stack=True),
        compare=loaded_and_close(STACK_NAMES, atol=2e-5),
        pitfalls=STACK_PITFALLS,
        seed=911,
    ),
    Check(
        id="09-encoder-float64",
        weight=0.5,
        message=text("Encoder.to(torch.float64) moves every layer and keeps float64 precision",
                     "Encoder.to(torch.float64) 转换每一层并保持 float64 精度"),
        calls=lambda gen: _calls(gen, 2, "float64", ("padding",), stack=True),
        compare=float64_close(STACK_NAMES),
        pitfalls=STACK_PITFALLS,
        seed=912,
    ),
    Check(
        id="09-encoder-train-dropout",
        message=text("Encoder in training mode with dropout (the same random dropout masks as the reference)",
                     "训练模式下带 dropout 的 Encoder（与参考实现使用相同的随机 dropout 掩码）"),
        calls=lambda gen: _calls(gen, 2, "train", ("padding",), stack=True),
        compare=loaded_and_close(STACK_NAMES, atol=2e-5),
        pitfalls=STACK_PITFALLS,
        seed=913,
    ),
    Check(
        id="09-encoder-gradients",
        message=text("gradients of the input and of every parameter of Encoder",
                     "Encoder 对输入和每个参数的梯度"),
        calls=lambda gen: _calls(gen, 2, "gradients", ("padding",), stack=True),
        compare=gradients_close(STACK_NAMES),
        pitfalls=STACK_PITFALLS,
        seed=914,
    ),
    device_check("09-device", _placements, owner="EncoderLayer and Encoder", pitfalls=("mask-cpu-loop", "plain-list-layers"),
                 seed=916),
    no_forbidden_calls("09", requires=("09-layer-behaviour",)),
]

# Behaviour facts and registered structure count only once the layer and the stack compute their outputs.
CHECKS = requiring(CHECKS, {
    "09-device": ("09-encoder-stack",),
    "09-layer-behaviour": ("09-layer-no-mask",),
    "09-layer-parameters": ("09-layer-no-mask",),
    "09-encoder-registered": ("09-encoder-stack",),
    "09-encoder-behaviour": ("09-encoder-stack",),
})
