"""Hidden checks of exercise 12 (a GPT).

Every probe gives the model weights drawn from the config and a seed, in
the contract's names (:func:`coursekit.probes.gpt.gpt_weights`), so the
submission and the reference hold the same weights whatever order they
create their layers in; tied weights hold the same values under both names.
Shapes are random and small: 1-4 heads, odd widths, 1-3 blocks, batch 1
first, inputs as long as the context and shorter.
"""
from __future__ import annotations

from dataclasses import replace

import torch

from grader.checks import (FUSED_ATTENTION, Check, Figure, all_of, error_type_equal, no_forbidden_calls, observing,
                           plain_equal, requiring, tensor_dicts_close, tensors_close, text)
from grader.checks.devices import device_check, placement_agrees
from grader.sandbox import ProbeCall

PROBES = "coursekit.probes.gpt"
F32 = {"atol": 1e-4, "rtol": 1e-4}   # float32 through a few blocks, submission vs reference
F64 = {"atol": 1e-9, "rtol": 1e-7}

# Mistakes that change every logit. The main check declares them all; the
# others declare only what they are about (the judge confirms a variant that
# reproduces a submission's results on any check, declared there or not, so
# a longer list would only add guesses to the feedback).
WHOLE_MODEL = ("final-norm-missing", "residual-after-norm", "post-norm-block", "gelu-tanh", "repeated-layer",
               "plain-list-layers")


def _int(gen: torch.Generator, low: int, high: int) -> int:
    """A random int in [low, high]."""
    return int(torch.randint(low, high + 1, (1,), generator=gen))


def block_config(gen: torch.Generator) -> dict:
    num_heads = _int(gen, 1, 4)
    return {"d_model": num_heads * _int(gen, 2, 4), "num_heads": num_heads, "context_length": _int(gen, 3, 9),
            "dropout": (0.0, 0.1, 0.3)[_int(gen, 0, 2)], "qkv_bias": bool(_int(gen, 0, 1))}


def model_config(gen: torch.Generator, dropout: float | None = None) -> dict:
    """A small random GPT: vocabulary 5-16, 1-3 blocks, tied or not, with or
    without q/k/v biases, a dropout rate that eval mode must ignore."""
    config = {"vocab_size": _int(gen, 5, 16), **block_config(gen), "num_layers": _int(gen, 1, 3),
              "tie_weights": bool(_int(gen, 0, 3))}  # tied three times out of four: the usual case
    if dropout is not None:
        config["dropout"] = dropout
    return config


def _length(gen: torch.Generator, config: dict, short: bool) -> int:
    """The whole context, or 1 .. context_length - 1 tokens."""
    return _int(gen, 1, config["context_length"] - 1) if short else config["context_length"]


def _idx(gen: torch.Generator, config: dict, b: int, n: int) -> torch.Tensor:
    return torch.randint(0, config["vocab_size"], (b, n), generator=gen)


def _upstream(gen: torch.Generator, config: dict, idx: torch.Tensor) -> torch.Tensor:
    return torch.randn(*idx.shape, config["vocab_size"], generator=gen, dtype=torch.float64)


def _logit_calls(gen: torch.Generator, count: int, *, short: bool, scale: float = 1.0) -> list[ProbeCall]:
    calls = []
    for index in range(count):
        config = model_config(gen)
        # The first case has batch 1: a reduction over the wrong dim shows most there.
        idx = _idx(gen, config, 1 if index == 0 else _int(gen, 2, 4), _length(gen, config, short))
        kwargs = {"config": config, "seed": _int(gen, 0, 10_000), "idx": idx}
        calls.append(ProbeCall(f"{PROBES}:logits", kwargs | ({"scale": scale} if scale != 1.0 else {})))
    return calls


def _block_calls(gen: torch.Generator) -> list[ProbeCall]:
    calls = []
    for index in range(6):
        config = block_config(gen)
        n = config["context_length"] if index % 2 == 0 else _int(gen, 1, config["context_length"] - 1)
        x = torch.randn(1 if index == 0 else _int(gen, 2, 3), n, config["d_model"], generator=gen) * 2
        calls.append(ProbeCall(f"{PROBES}:block_output", {"config": config, "seed": _int(gen, 0, 10_000), "x": x}))
    return calls


def _causal_calls(gen: torch.Generator) -> list[ProbeCall]:
    calls = []
    for _ in range(3):
        config = model_config(gen)
        n = config["context_length"]
        idx = _idx(gen, config, _int(gen, 1, 3), n)
        t = _int(gen, 1, n - 1)
        other = idx.clone()
        other[:, t:] = (idx[:, t:] + torch.randint(1, config["vocab_size"], (idx.size(0), n - t), generator=gen)) \
            % config["vocab_size"]
        calls.append(ProbeCall(f"{PROBES}:causal", {"config": config, "seed": _int(gen, 0, 10_000), "idx": idx,
                                                   "other": other, "t": t}))
    return calls


def _too_long_calls(gen: torch.Generator) -> list[ProbeCall]:
    calls = []
    for _ in range(2):
        config = model_config(gen)
        idx = _idx(gen, config, 2, config["context_length"] + _int(gen, 1, 3))
        calls.append(ProbeCall(f"{PROBES}:too_long", {"config": config, "idx": idx}))
    return calls


def _tying_calls(gen: torch.Generator) -> list[ProbeCall]:
    calls = []
    for tie in (True, True, False):
        config = {**model_config(gen, dropout=0.0), "tie_weights": tie}
        idx = _idx(gen, config, _int(gen, 1, 3), _length(gen, config, short=False))
        calls.append(ProbeCall(f"{PROBES}:tying", {"config": config, "seed": _int(gen, 0, 10_000), "idx": idx,
                                                  "upstream": _upstream(gen, config, idx)}))
    return calls


def _gradient_calls(gen: torch.Generator) -> list[ProbeCall]:
    calls = []
    for index in range(3):  # full length: shorter inputs are 12-short-inputs' business
        config = model_config(gen, dropout=0.0)
        idx = _idx(gen, config, 1 if index == 0 else _int(gen, 2, 3), config["context_length"])
        calls.append(ProbeCall(f"{PROBES}:gradients", {"config": config, "seed": _int(gen, 0, 10_000), "idx": idx,
                                                      "upstream": _upstream(gen, config, idx)}))
    return calls


def _seeded_calls(probe: str, gen: torch.Generator, count: int, dropout: float) -> list[ProbeCall]:
    calls = []
    for _ in range(count):
        config = model_config(gen, dropout=dropout)
        idx = _idx(gen, config, _int(gen, 1, 3), config["context_length"])
        calls.append(ProbeCall(f"{PROBES}:{probe}", {"config": config, "seed": _int(gen, 0, 10_000), "idx": idx}))
    return calls


def _device_calls(gen: torch.Generator) -> list[ProbeCall]:
    calls = []
    for short in (False, True):
        config = model_config(gen)
        calls.append(ProbeCall(f"{PROBES}:placement",
                               {"config": config, "idx": _idx(gen, config, 2, _length(gen, config, short))}))
    return calls


def _saying(compare, reason: str):
    """``compare`` with the check's own words for what its failure means."""
    return lambda submitted, expected: None if compare(submitted, expected) is None else reason


def _logits_ok() -> object:
    return all_of(tensors_close("logits", **F32), plain_equal("repeatable", reason="eval mode is not deterministic"),
                  plain_equal("inputs_unchanged", reason="modified its input"))


CHECKS = [
    Check(
        id="12-logits",
        weight=3,
        message=text("GPT(idx) returns the right logits for random configs, inputs as long as the context "
                     "(tied and untied head, with and without q/k/v biases, batch 1 included)",
                     "在随机配置下、输入长度等于上下文长度时，GPT(idx) 返回正确的 logits"
                     "（共享与不共享输出层权重、有无 q/k/v 偏置，含 batch 为 1）"),
        calls=lambda gen: _logit_calls(gen, 8, short=False),
        compare=_logits_ok(),
        pitfalls=(*WHOLE_MODEL, "dropout-in-eval"),
    ),
    Check(
        id="12-block",
        weight=2,
        message=text("GPTBlock(x): pre-norm, x + drop(attn(norm1(x))) then x + drop(ff(norm2(x))), for inputs as "
                     "long as the context and shorter",
                     "GPTBlock(x)：pre-norm，先 x + drop(attn(norm1(x)))，再 x + drop(ff(norm2(x)))；"
                     "输入长度等于或短于上下文长度"),
        calls=_block_calls,
        compare=all_of(tensors_close("output", **F32), plain_equal("inputs_unchanged", reason="modified its input")),
        pitfalls=("residual-after-norm", "post-norm-block", "gelu-tanh", "mask-no-slice"),
        seed=1,
    ),
    Check(
        id="12-short-inputs",
        weight=2.5,
        message=text("inputs shorter than context_length: positions 0 .. n-1, and the attention fits the input's "
                     "length",
                     "比 context_length 短的输入：位置为 0 .. n-1，注意力与输入长度相符"),
        calls=lambda gen: _logit_calls(gen, 6, short=True),
        compare=_logits_ok(),
        pitfalls=("pos-emb-positions", "mask-no-slice"),
        seed=2,
    ),
    Check(
        id="12-causal",
        weight=1.5,
        message=text("changing later tokens never changes the logits of earlier positions (and does change the "
                     "later ones)",
                     "改变后面的 token 不会改变前面位置的 logits（但会改变后面位置的 logits）"),
        calls=_causal_calls,
        compare=all_of(plain_equal("earlier_unchanged", reason="a token sees tokens after it"),
                       plain_equal("later_changed", reason="the logits do not depend on the tokens")),
        requires=("12-logits",),
        seed=3,
    ),
    Check(
        id="12-too-long",
        weight=1,
        message=text("more tokens than context_length raise ValueError",
                     "token 数超过 context_length 时抛出 ValueError"),
        calls=_too_long_calls,
        compare=error_type_equal(),
        requires=("12-logits",),
        seed=4,
    ),
    Check(
        id="12-tying",
        weight=2.5,
        message=text("weight tying: with tie_weights=True head and embedding are one Parameter (an optimiser step "
                     "moves both by the sum of their gradients; the model has the parameter count of one matrix), "
                     "with tie_weights=False two",
                     "权重共享：tie_weights=True 时输出层与词嵌入是同一个 Parameter（优化器一步按两处梯度之和同时更新它们；"
                     "参数量只算一份矩阵），tie_weights=False 时是两个"),
        calls=_tying_calls,
        compare=all_of(tensors_close("tok_emb", **F64), tensors_close("head", **F64),
                       plain_equal("n_parameters", reason="wrong number of parameters"),
                       plain_equal("expected_n_parameters", reason="wrong number of parameters")),
        pitfalls=("tie-by-copy",),
        seed=5,
    ),
    Check(
        id="12-gradients",
        weight=1.5,
        message=text("train mode, float64: the gradient of every parameter, by name",
                     "训练模式、float64：每个参数（按名称）的梯度"),
        calls=_gradient_calls,
        compare=tensor_dicts_close("grads", **F64),
        pitfalls=("final-norm-missing", "plain-list-layers", "tie-by-copy"),
        seed=6,
    ),
    Check(
        id="12-finite",
        weight=1,
        message=text("large weights (big embeddings, big attention scores): the logits stay finite and right",
                     "权重很大时（嵌入和注意力分数都很大）：logits 仍为有限值且正确"),
        calls=lambda gen: _logit_calls(gen, 3, short=False, scale=40.0),
        compare=all_of(tensors_close("logits", atol=1e-2, rtol=1e-3)),
        pitfalls=("final-norm-missing",),
        seed=7,
    ),
    Check(
        id="12-dropout-modes",
        weight=1,
        message=text("dropout acts in train mode only, where it is: train-mode logits vary from one random seed "
                     "to the next and, under the same dropout masks, equal the reference's (dropout on each "
                     "sublayer's output before the residual add, never on the sum or the logits); eval-mode "
                     "logits do not vary and equal those without dropout",
                     "dropout 只在训练模式下起作用，且位置正确：训练模式的 logits 随随机种子变化，并且在相同的 dropout "
                     "掩码下等于参考实现的结果（dropout 作用在每个子层的输出上、残差相加之前，不作用在和或 logits 上）；"
                     "评估模式的 logits 不变，且等于没有 dropout 时的结果"),
        calls=lambda gen: _seeded_calls("dropout_modes", gen, 3, 0.5),
        compare=all_of(plain_equal("train_varies", reason="dropout is not applied in train mode"),
                       plain_equal("eval_repeatable", reason="dropout is applied in eval mode"),
                       tensors_close("eval", **F32),  # the reference's eval logits: those without dropout
                       _saying(tensors_close("train_fixed", **F32),
                               "under the same dropout masks the train-mode logits differ: dropout acts somewhere "
                               "else than on each sublayer's output and the embeddings")),
        pitfalls=("dropout-in-eval", "plain-list-layers", "dropout-on-residual-sum"),
        requires=("12-logits",),
        seed=8,
    ),
    Check(
        id="12-structure",
        weight=1.5,
        message=text("the named sub-modules with their types, blocks in an nn.ModuleList of separate GPTBlocks, "
                     "every parameter registered under the contract's names, a head without bias",
                     "指定名称的子模块及其类型；blocks 是由各自独立的 GPTBlock 组成的 nn.ModuleList；"
                     "所有参数都按约定的名称注册；head 没有偏置"),
        calls=lambda gen: [ProbeCall(f"{PROBES}:structure", {"config": model_config(gen)}) for _ in range(2)],
        compare=all_of(plain_equal("hidden_lists", reason="sub-modules kept in a plain Python list"),
                       plain_equal("children", reason="missing sub-modules, or of the wrong type"),
                       plain_equal("blocks", reason="blocks is not an nn.ModuleList of separate GPTBlocks"),
                       plain_equal("parameters", reason="parameters missing, extra, or of the wrong shape"),
                       plain_equal("head_bias", reason="head has a bias")),
        pitfalls=("plain-list-layers", "repeated-layer"),
        seed=9,
    ),
    # A position tensor made without device= is this exercise's way to fail
    # here; blocks in a plain list fail too, and are told apart by name.
    replace(device_check("12-device", _device_calls, owner="GPT", pitfalls=("pos-emb-positions",), seed=10),
            compare=all_of(placement_agrees, plain_equal("hidden_lists", reason="sub-modules kept in a plain Python list"))),
    no_forbidden_calls("12", requires=("12-logits",), kernels=(FUSED_ATTENTION,)),
]
# Structure and devices can be right in a model whose forward is someone
# else's (PyTorch's layers, holding its weights): they pay once the logits do.
CHECKS = requiring(CHECKS, {"12-structure": ("12-logits",), "12-device": ("12-logits",)})
# Every call recorded (grader/checks/forbidden.py): PyTorch's fused or
# whole-layer attention (scaled_dot_product_attention, nn.MultiheadAttention,
# F.multi_head_attention_forward, nn.TransformerEncoderLayer) in any of them
# costs 12-no-forbidden-calls, however the code reached it (issue 36).
CHECKS = observing(CHECKS, (FUSED_ATTENTION,))

# The last block's self-attention of the student's GPT, with the course's
# seeded weights (untrained), next to the reference's: lower-triangular,
# each row summing to 1. Never scored.
_FIGURE_CONFIG = {"vocab_size": 16, "context_length": 12, "d_model": 16, "num_heads": 2, "num_layers": 2}
_FIGURE_TOKENS = [3, 1, 4, 1, 5, 9, 2, 6, 5, 3]
FIGURES = [
    Figure(
        name="gpt-self-attention",
        title=text("the last block's self-attention, mean of the heads, with the course's seeded weights on the "
                   "tokens 3 1 4 1 5 9 2 6 5 3 (rows: queries, columns: keys); nothing above the diagonal",
                   "最后一块的自注意力，各头平均，使用课程固定种子的权重，输入词元 3 1 4 1 5 9 2 6 5 3"
                   "（行：query，列：key）；对角线以上全为零"),
        call=ProbeCall("coursekit.probes.attention_maps:gpt_attention",
                       {"config": _FIGURE_CONFIG, "seed": 11, "idx": torch.tensor([_FIGURE_TOKENS])}),
        path=("self_attention",),
        axes=(tuple(map(str, _FIGURE_TOKENS)), tuple(map(str, _FIGURE_TOKENS))),
    ),
]
