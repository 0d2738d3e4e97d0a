"""Hidden checks of exercise 10 (decoder).

As for the encoder (:mod:`grader.checks.encoder`; the helpers both share are
in :mod:`grader.checks.stacks`): explicit weights loaded by name, from PyTorch's own
``nn.TransformerDecoderLayer`` renamed by :mod:`coursekit.probes.torch_oracles`.
Target and source lengths differ unless a check says otherwise: a
cross-attention that takes its queries from ``memory`` then cannot even run.
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
    causal,
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

PROBES = "coursekit.probes.decoder"
LAYER_OUTPUT = f"{PROBES}:decoder_layer_output"
STACK_OUTPUT = f"{PROBES}:decoder_output"
SEEDED = f"{PROBES}:decoder_seeded_output"
GRADIENTS = f"{PROBES}:decoder_gradient_values"
FLOAT64 = f"{PROBES}:decoder_float64_values"
BEHAVIOUR = f"{PROBES}:decoder_behaviour"
LAYER_STRUCTURE = f"{PROBES}:decoder_layer_structure"
STACK_STRUCTURE = f"{PROBES}:decoder_structure"

NAMES = "self_attn, cross_attn, feed_forward, norm1, norm2, norm3"
STACK_NAMES = "layers.0.self_attn, ..."
LAYER_PITFALLS = ("shared-layernorm", "residual-missing", "cross-attn-swapped", "pre-norm")


def _weights(config: dict, gen: torch.Generator, silenced: bool = False) -> Weights:
    layers = oracle_layers(oracles.torch_decoder_layer, config, config.get("num_layers", 1), gen)
    if "num_layers" in config:
        return oracles.stack_to_course(layers)
    if silenced:  # each sublayer outputs 0: only the residual path is left
        oracles.tie_norms_(oracles.silence_sublayers_(layers[0]))
    return oracles.decoder_layer_to_course(layers[0].state_dict())


def _masks(gen: torch.Generator, kind: str, batch: int, n_tgt: int, n_src: int) -> dict:
    """``tgt_mask`` and ``memory_mask`` of one kind of case."""
    if kind == "causal":  # one (n_tgt, n_tgt) for the batch; padded sources, maybe a sequence of padding only
        return {"tgt_mask": causal(n_tgt), "memory_mask": padding(gen, batch, n_src)[:, None, :]}
    if kind == "target-padding":  # (b, n_tgt, n_tgt) = causal | padded targets; (b, n_tgt, n_src) blocks
        tgt = causal(n_tgt) | padding(gen, batch, n_tgt)[:, None, :]
        return {"tgt_mask": tgt, "memory_mask": random_blocks(gen, (batch, n_tgt, n_src))}
    return {"tgt_mask": None, "memory_mask": None}


def _calls(gen: torch.Generator, count: int, kind: str, masks: tuple[str, ...], stack: bool = False,
           silenced: bool = False, same_lengths: bool = False) -> list[ProbeCall]:
    """``count`` calls of one ``kind`` (output, float64, train, gradients),
    each on random sizes with its own seeded weights; the mask kinds take
    turns. n_src differs from n_tgt unless ``same_lengths``."""
    calls = []
    for i in range(count):
        train = kind == "train" or (kind == "gradients" and i % 2 == 1)  # gradients: every other call trains
        config = layer_config(gen, stack, train)
        weights = _weights(config, gen, silenced)
        batch, n_tgt, n_src = draw(gen, 1, 3), draw(gen, 1, 6), draw(gen, 1, 6)
        n_src = n_tgt if same_lengths else n_src + (n_src == n_tgt)
        dtype = torch.float64 if kind == "float64" else torch.float32
        d = config["d_model"]
        kwargs = {"config": config, "weights": weights,
                  "x": (1.5 * torch.randn(batch, n_tgt, d, generator=gen)).to(dtype),
                  "memory": (1.5 * torch.randn(batch, n_src, d, generator=gen)).to(dtype),
                  **_masks(gen, masks[i % len(masks)], batch, n_tgt, n_src)}
        probe = {"output": STACK_OUTPUT if stack else LAYER_OUTPUT, "float64": FLOAT64, "train": SEEDED,
                 "gradients": GRADIENTS}[kind]
        calls.append(call_of(probe, kind, gen, kwargs, stack, train))
    return calls


def _behaviour(gen: torch.Generator, count: int, stack: bool) -> list[ProbeCall]:
    calls = []
    for _ in range(count):
        config = behaviour_config(gen, stack)
        batch, n_tgt, n_src = draw(gen, 2, 3), draw(gen, 2, 6), draw(gen, 3, 7)
        n_src += n_src == n_tgt
        d = config["d_model"]
        calls.append(ProbeCall(BEHAVIOUR, {
            "config": config, "x": 3.0 * torch.randn(batch, n_tgt, d, generator=gen) + 1.0,
            "memory": torch.randn(batch, n_src, d, generator=gen),
            "src_padding": padded_lengths(gen, batch, n_src), "split": draw(gen, 1, n_tgt - 1), "stack": stack}))
    return calls


def _structures(gen: torch.Generator, count: int, stack: bool) -> list[ProbeCall]:
    return [ProbeCall(STACK_STRUCTURE if stack else LAYER_STRUCTURE, {"config": layer_config(gen, stack)})
            for _ in range(count)]


def _placements(gen: torch.Generator) -> list[ProbeCall]:
    """Forward passes on the meta device: a layer and a stack, with a causal
    mask and padded sources, and with padded targets."""
    calls = []
    for cls, stack, kind in (("DecoderLayer", False, "causal"), ("Decoder", True, "target-padding"),
                             ("Decoder", True, "none")):
        config = layer_config(gen, stack)
        batch, n_tgt, n_src = draw(gen, 1, 3), draw(gen, 2, 6), draw(gen, 2, 6)
        masks = _masks(gen, kind, batch, n_tgt, n_src)
        x = torch.randn(batch, n_tgt, config["d_model"], generator=gen)
        memory = torch.randn(batch, n_src, config["d_model"], generator=gen)
        calls.append(placement_call(cls, config, x, memory, masks["tgt_mask"], masks["memory_mask"]))
    return calls


CHECKS = [
    Check(
        id="10-layer-behaviour",
        weight=1.5,
        message=text("a fresh DecoderLayer (its own weights): one output per target position, every output vector "
                     "normalised (post-norm), later targets and padded memory positions change nothing they "
                     "should not, dropout only in training mode",
                     "新建的 DecoderLayer（使用其自身权重）：每个目标位置一个输出、每个输出向量都已归一化"
                     "（post-norm）、后面的目标位置与 memory 的填充位置不影响不该影响的输出、dropout 只在训练模式下起作用"),
        calls=lambda gen: _behaviour(gen, 2, stack=False),
        compare=BEHAVIOUR_SAME,
        pitfalls=("cross-attn-swapped", "pre-norm"),
        seed=1009,
    ),
    Check(
        id="10-layer-no-mask",
        weight=1.5,
        message=text("DecoderLayer with given weights on random sizes (batch, heads, d_model, d_ff, target and "
                     "source lengths that differ), no masks, in eval mode with a dropout rate set",
                     "DecoderLayer 载入给定权重，在随机尺寸（batch、头数、d_model、d_ff、互不相同的目标与源长度）上、"
                     "无掩码、设置了 dropout 比例的 eval 模式下的输出"),
        calls=lambda gen: _calls(gen, 4, "output", ("none",)),
        compare=loaded_and_close(NAMES),
        pitfalls=LAYER_PITFALLS,
        seed=1000,
    ),
    Check(
        id="10-layer-causal",
        weight=2,
        message=text("DecoderLayer with a causal target mask (n_tgt, n_tgt) and a memory padding mask "
                     "(batch, 1, n_src), including a source that is all padding",
                     "DecoderLayer 使用因果目标掩码 (n_tgt, n_tgt) 与 memory 填充掩码 (batch, 1, n_src)，"
                     "包括整条源序列都是填充的情况"),
        calls=lambda gen: _calls(gen, 4, "output", ("causal",)),
        compare=loaded_and_close(NAMES),
        pitfalls=(*LAYER_PITFALLS, "mask-not-passed"),
        seed=1001,
    ),
    Check(
        id="10-layer-target-padding",
        weight=1.5,
        message=text("DecoderLayer with a target mask (batch, n_tgt, n_tgt) that also blocks padded targets and a "
                     "memory mask (batch, n_tgt, n_src), including fully blocked rows",
                     "DecoderLayer 使用同时遮蔽目标填充位置的目标掩码 (batch, n_tgt, n_tgt) 与 memory 掩码 "
                     "(batch, n_tgt, n_src)，包括整行被遮蔽的情况"),
        calls=lambda gen: _calls(gen, 4, "output", ("target-padding",)),
        compare=loaded_and_close(NAMES),
        pitfalls=(*LAYER_PITFALLS, "mask-not-passed"),
        seed=1002,
    ),
    Check(
        id="10-layer-same-lengths",
        message=text("DecoderLayer when target and source have the same length: queries from x, keys and values "
                     "from memory", "目标与源长度相同时的 DecoderLayer：query 来自 x，key 和 value 来自 memory"),
        calls=lambda gen: _calls(gen, 3, "output", ("causal", "target-padding"), same_lengths=True),
        compare=loaded_and_close(NAMES),
        pitfalls=("cross-attn-swapped",),
        seed=1003,
    ),
    Check(
        id="10-layer-residual",
        weight=1.5,
        message=text("the residual connections: with sublayers that output zeros, what is left is "
                     "norm3(norm2(norm1(x)))", "残差连接：当子层输出全为 0 时，剩下的应是 norm3(norm2(norm1(x)))"),
        calls=lambda gen: _calls(gen, 3, "output", ("causal",), silenced=True),
        compare=loaded_and_close(NAMES),
        pitfalls=("residual-missing",),
        seed=1004,
    ),
    Check(
        id="10-layer-parameters",
        message=text("DecoderLayer registers the contract's parameters: self_attn and cross_attn (separate), "
                     "feed_forward and three separate LayerNorms norm1, norm2, norm3",
                     "DecoderLayer 注册了约定的参数：相互独立的 self_attn 与 cross_attn、feed_forward 以及三个"
                     "独立的 LayerNorm（norm1、norm2、norm3）"),
        calls=lambda gen: _structures(gen, 2, stack=False),
        compare=plain_equal("parameters", reason="the registered parameters differ from the contract's "
                                                 "(names or shapes)"),
        pitfalls=("shared-layernorm",),
        seed=1005,
    ),
    Check(
        id="10-layer-float64",
        message=text("DecoderLayer.to(torch.float64) on float64 inputs keeps float64 precision",
                     "DecoderLayer.to(torch.float64) 在 float64 输入上保持 float64 精度"),
        calls=lambda gen: _calls(gen, 2, "float64", ("target-padding",)),
        compare=float64_close(NAMES),
        pitfalls=LAYER_PITFALLS,
        seed=1006,
    ),
    Check(
        id="10-layer-train-dropout",
        weight=1.5,
        message=text("DecoderLayer in training mode with dropout (the same random dropout masks as the reference): "
                     "dropout on each sublayer's output, before the residual add",
                     "训练模式下带 dropout 的 DecoderLayer（与参考实现使用相同的随机 dropout 掩码）："
                     "dropout 作用在每个子层的输出上、残差相加之前"),
        calls=lambda gen: _calls(gen, 3, "train", ("causal", "target-padding")),
        compare=loaded_and_close(NAMES),
        pitfalls=LAYER_PITFALLS,
        seed=1007,
    ),
    Check(
        id="10-layer-gradients",
        weight=1.5,
        message=text("gradients of x, of memory and of every parameter of DecoderLayer, with masks",
                     "带掩码时，DecoderLayer 对 x、memory 和每个参数的梯度"),
        calls=lambda gen: _calls(gen, 3, "gradients", ("causal", "target-padding")),
        compare=gradients_close(NAMES),
        pitfalls=LAYER_PITFALLS,
        seed=1008,
    ),
    Check(
        id="10-layer-inputs-unchanged",
        weight=0.5,
        message=text("DecoderLayer does not modify x, memory or the masks", "DecoderLayer 不修改 x、memory 和掩码"),
        calls=lambda gen: _calls(gen, 3, "output", ("target-padding", "causal")),
        compare=all_of(plain_equal("inputs_unchanged", reason="modified an input in place"),
                       loaded_and_close(NAMES)),
        seed=1010,
    ),
    Check(
        id="10-decoder-registered",
        message=text("Decoder keeps num_layers separate DecoderLayers in an nn.ModuleList, all their parameters "
                     "registered", "Decoder 用 nn.ModuleList 保存 num_layers 个独立的 DecoderLayer，"
                     "其参数全部已注册"),
        calls=lambda gen: _structures(gen, 2, stack=True),
        compare=all_of(plain_equal("hidden_lists", reason="layers kept in a plain Python list"),
                       plain_equal("layers", reason="layers is not an nn.ModuleList of separate DecoderLayers"),
                       plain_equal("parameters", reason="the registered parameters differ from the contract's")),
        pitfalls=STACK_PITFALLS,
        seed=1011,
    ),
    Check(
        id="10-decoder-behaviour",
        message=text("a fresh Decoder: output shape, normalised outputs, no look at later targets or padded "
                     "memory, dropout only in training mode (.eval() must reach every layer)",
                     "新建的 Decoder：输出形状、输出已归一化、不看后面的目标位置和 memory 的填充位置、"
                     "dropout 只在训练模式下起作用（.eval() 必须作用到每一层）"),
        calls=lambda gen: _behaviour(gen, 1, stack=True),
        compare=BEHAVIOUR_SAME,
        pitfalls=STACK_PITFALLS,
        seed=1012,
    ),
    Check(
        id="10-decoder-stack",
        weight=2,
        message=text("Decoder of 1 to 4 layers with given weights, each layer in turn with the same memory and masks",
                     "载入给定权重的 1 到 4 层 Decoder：逐层计算，每层使用同一个 memory 和同样的掩码"),
        calls=lambda gen: _calls(gen, 4, "output", ("target-padding", "causal", "none"), stack=True),
        compare=loaded_and_close(STACK_NAMES, atol=2e-5),
        pitfalls=STACK_PITFALLS,
        seed=1013,
    ),
    Check(
        id="10-decoder-float64",
        weight=0.5,
        message=text("Decoder.to(torch.float64) moves every layer and keeps float64 precision",
                     "Decoder.to(torch.float64) 转换每一层并保持 float64 精度"),
        # n_src == n_tgt: a stack that .to() did not reach raises here, and a
        # swapped cross-attention must not raise the same error type, or the
        # judge would take one mistake for the other.
        calls=lambda gen: _calls(gen, 2, "float64", ("target-padding",), stack=True, same_lengths=True),
        compare=float64_close(STACK_NAMES),
        pitfalls=STACK_PITFALLS,
        seed=1014,
    ),
    Check(
        id="10-decoder-train-dropout",
        message=text("Decoder in training mode with dropout (the same random dropout masks as the reference)",
                     "训练模式下带 dropout 的 Decoder（与参考实现使用相同的随机 dropout 掩码）"),
        calls=lambda gen: _calls(gen, 2, "train", ("causal",), stack=True),
        compare=loaded_and_close(STACK_NAMES, atol=2e-5),
        pitfalls=STACK_PITFALLS,
        seed=1015,
    ),
    Check(
        id="10-decoder-gradients",
        message=text("gradients of x, of memory (used by every layer) and of every parameter of Decoder",
                     "Decoder 对 x、memory（每一层都使用）和每个参数的梯度"),
        calls=lambda gen: _calls(gen, 2, "gradients", ("causal",), stack=True),
        compare=gradients_close(STACK_NAMES),
        pitfalls=STACK_PITFALLS,
        seed=1016,
    ),
    device_check("10-device", _placements, owner="DecoderLayer and Decoder", pitfalls=("mask-cpu-loop", "plain-list-layers"),
                 seed=1017),
    no_forbidden_calls("10", requires=("10-layer-behaviour",)),
]

# Behaviour facts and registered structure count only once the layer and the stack compute their outputs.
CHECKS = requiring(CHECKS, {
    "10-device": ("10-decoder-stack",),
    "10-layer-behaviour": ("10-layer-no-mask",),
    "10-layer-parameters": ("10-layer-no-mask",),
    "10-decoder-registered": ("10-decoder-stack",),
    "10-decoder-behaviour": ("10-decoder-stack",),
})
