"""Hidden checks of exercise 06 (multi-head attention).

Every module is built from a plain config and gets explicit, seeded weights
by name (``random_weights``), so a correct solution that creates its layers
in another order still passes. In training mode, every dropout draws its
mask from a seed by the (query, key) position of each entry
(``forward_fixed_dropout``), so submission and reference drop the same
entries whatever the memory layout of their attention weights and whether
they drop all heads in one call or one head at a time; eval-mode probes
seed torch too, so a dropout that should not run at all gives the same
draws on every machine. The inputs are built in
grader/checks/multihead_inputs.py; this module says what is compared.
"""
from __future__ import annotations

import torch

from grader.checks import FUSED_ATTENTION, observing, requiring
from grader.checks import (CallBuilder, Check, Compare, pick, all_of, no_forbidden_calls, plain_equal,
                           tensors_close, text)
from grader.checks.devices import device_check
from grader.checks.multihead_inputs import (
    MERGE, MHA, SPLIT, WRAPPER, constructor_calls, forward_calls, gradient_calls, large_scores, longer_calls,
    mha_config, placements, round_trip_calls, sequence_calls, split_indivisible, split_merge_calls, state_calls,
    wrapper_config,
)


def _close(*path: str | int, atol: float = 1e-5, rtol: float = 1e-4) -> Compare:
    """tensors_close that also takes a missing tensor (None: that call raised,
    or a parameter got no gradient) on either side: both must be missing.
    The judge compares two wrong results too (a submission with a variant),
    and tensors_close assumes the second one is a tensor."""
    close = tensors_close(*path, atol=atol, rtol=rtol)

    def compare(submitted: object, expected: object) -> str | None:
        try:
            mine, theirs = pick(submitted, path), pick(expected, path)
        except (KeyError, IndexError, TypeError):
            return "the result is missing a part"
        if mine is None or theirs is None:
            return None if mine is None and theirs is None else "a call raised an error or returned None"
        if type(theirs) is not torch.Tensor:  # only when comparing with a broken variant
            return None if type(mine) is type(theirs) else "returned the wrong type"
        return close(submitted, expected)

    return compare


# split/merge only move numbers around: anything but an exact copy is wrong.
EXACT = _close("output", atol=0.0, rtol=0.0)
LOADED = plain_equal("load", reason="some weights did not load by name (see the attribute names in the README)")
UNCHANGED_INPUT = plain_equal("input_unchanged", reason="modified its input")
UNTOUCHED = all_of(UNCHANGED_INPUT,
                   plain_equal("buffers_unchanged", reason="changed a registered buffer during the forward pass"))


# ---------------------------------------------------------------- comparisons


def _forward_compare(atol: float = 1e-5, rtol: float = 1e-4) -> Compare:
    return all_of(LOADED, _close("output", atol=atol, rtol=rtol), UNTOUCHED)


STATE_COMPARE = all_of(
    plain_equal("parameters", reason="wrong parameter names or shapes"),
    plain_equal("state_dict_keys", reason="wrong state_dict keys"),
    plain_equal("n_parameters", reason="wrong number of parameters"),
    plain_equal("buffers", reason="wrong registered buffers (name, shape, dtype or not saved)"),
)


_MASK_VALUES = _close("buffer_values", "mask", atol=0.0, rtol=0.0)
MHA_STATE_COMPARE = all_of(STATE_COMPARE,
                           lambda s, e: None if _MASK_VALUES(s, e) is None else "wrong values in the mask buffer")


def _each(key: str, compare: Compare, reason: str = "wrong number of results") -> Compare:
    """``compare`` on every item of the lists found at ``key``."""

    def compare_all(submitted: object, expected: object) -> str | None:
        try:
            mine, theirs = submitted[key], expected[key]
        except (KeyError, IndexError, TypeError):
            return "the result is missing a part"
        if not isinstance(mine, list) or len(mine) != len(theirs):
            return reason
        for one, other in zip(mine, theirs):
            if (why := compare(one, other)) is not None:
                return why
        return None

    return compare_all


SEQUENCE_COMPARE = all_of(
    _each("calls", plain_equal("buffers_unchanged", reason="a call changed the registered mask")),
    _each("calls", _close("output")),
    _each("fresh", _close()),
)


def _tensor_dict_close(key: str, atol: float = 1e-5, rtol: float = 1e-4) -> Compare:
    """The dicts of tensors at ``key`` have the same names and close tensors."""
    close = _close(atol=atol, rtol=rtol)

    def compare(submitted: object, expected: object) -> str | None:
        try:
            mine, theirs = submitted[key], expected[key]
        except (KeyError, TypeError):
            return "the result is missing a part"
        if not isinstance(mine, dict) or sorted(mine) != sorted(theirs):
            return "gradients for the wrong set of parameters"
        for name in theirs:
            if (why := close(mine[name], theirs[name])) is not None:
                return f"parameter gradients: {why}"
        return None

    return compare


GRADIENT_COMPARE = all_of(
    lambda s, e: None if (why := _close("input_grad")(s, e)) is None else f"input gradient: {why}",
    _tensor_dict_close("parameter_grads"),
)

VALUE_PITFALLS = ("scale-by-d", "softmax-wrong-dim", "view-no-transpose", "merge-wrong-order",
                  "view-without-contiguous", "no-out-proj")


def _check(check_id: str, weight: float, seed: int, en: str, zh: str, calls: CallBuilder, compare: Compare,
           *pitfalls: str) -> Check:
    """A Check on one line of arguments: twenty of them read better so."""
    return Check(id=check_id, weight=weight, seed=seed, message=text(en, zh), calls=calls, compare=compare,
                 pitfalls=pitfalls)


CHECKS = [
    # ------------------------------------------------------------ split / merge
    _check("06-split-heads", 2, 0,
           "split_heads on many input shapes (float32 and float64): each head gets its own features of every "
           "token; the input is left unchanged",
           "在多种输入形状（float32 与 float64）上调用 split_heads：每个头得到每个 token 自己的那部分特征；输入保持不变",
           lambda gen: split_merge_calls(gen, SPLIT, 9), all_of(EXACT, UNCHANGED_INPUT),
           "view-no-transpose"),
    _check("06-merge-heads", 2, 1,
           "merge_heads on many input shapes (float32 and float64): each token's heads side by side; "
           "the input is left unchanged",
           "在多种输入形状（float32 与 float64）上调用 merge_heads：每个 token 的各个头并排拼接；输入保持不变",
           lambda gen: split_merge_calls(gen, MERGE, 9), all_of(EXACT, UNCHANGED_INPUT),
           "merge-wrong-order", "view-without-contiguous"),
    _check("06-round-trips", 1, 2,
           "merge_heads(split_heads(x, h)) gives x back, and split_heads(merge_heads(y), h) gives y back",
           "merge_heads(split_heads(x, h)) 还原 x，split_heads(merge_heads(y), h) 还原 y",
           lambda gen: round_trip_calls(gen, 3),
           all_of(_close("merge_of_split", atol=0.0, rtol=0.0), _close("split_of_merge", atol=0.0, rtol=0.0)),
           "view-no-transpose", "merge-wrong-order"),
    _check("06-split-heads-indivisible", 0.5, 3,
           "split_heads raises ValueError when the features do not divide into the heads",
           "特征数不能被头数整除时，split_heads 抛出 ValueError",
           split_indivisible, plain_equal("raised", reason="did not raise ValueError")),
    # ------------------------------------------------------------ the wrapper
    _check("06-wrapper-values", 2, 10,
           "MultiHeadAttentionWrapper with 1 to 4 heads, weights loaded by name: the heads' outputs side by side "
           "along the features, also for inputs shorter than context_length",
           "1 到 4 个头的 MultiHeadAttentionWrapper（按名称加载权重）：各头的输出沿特征维并排拼接，输入短于 "
           "context_length 时也一样",
           lambda gen: forward_calls(gen, WRAPPER, [2, 3, 4, 1]) + forward_calls(gen, WRAPPER, [3, 2], shorter=True),
           _forward_compare(), "cat-wrong-dim", "plain-list-layers"),
    _check("06-wrapper-state", 1, 11,
           "MultiHeadAttentionWrapper registers every head: parameters, buffers and state_dict keys",
           "MultiHeadAttentionWrapper 注册了每个头：参数、缓冲区与 state_dict 的键",
           lambda gen: state_calls(WRAPPER, [wrapper_config(gen, h) for h in (3, 1)]), STATE_COMPARE,
           "plain-list-layers"),
    _check("06-wrapper-dropout", 1.5, 12,
           "MultiHeadAttentionWrapper with dropout: training mode under fixed random seeds, and no dropout at all "
           "in eval mode",
           "带 dropout 的 MultiHeadAttentionWrapper：固定随机种子下的训练模式，以及评估模式下完全不做 dropout",
           lambda gen: (forward_calls(gen, WRAPPER, [2, 3], dropout=0.4, train=True)
                        + forward_calls(gen, WRAPPER, [3, 2], dropout=0.5)),
           _forward_compare(), "plain-list-layers"),
    _check("06-wrapper-float64", 1, 13,
           "MultiHeadAttentionWrapper after .to(torch.float64), on float64 inputs, at float64 precision",
           "MultiHeadAttentionWrapper 经 .to(torch.float64) 后处理 float64 输入，达到 float64 精度",
           lambda gen: forward_calls(gen, WRAPPER, [2, 4], dtype=torch.float64),
           _forward_compare(atol=1e-10, rtol=1e-9), "plain-list-layers"),
    _check("06-wrapper-gradients", 1, 14,
           "MultiHeadAttentionWrapper: gradients of the input and of every head's parameters",
           "MultiHeadAttentionWrapper：输入与每个头的参数的梯度",
           lambda gen: gradient_calls(gen, WRAPPER, [3, 2]), GRADIENT_COMPARE, "plain-list-layers"),
    # ------------------------------------------------------------ MultiHeadAttention
    _check("06-mha-divisibility", 0.5, 20,
           "MultiHeadAttention raises ValueError exactly when d_out is not divisible by num_heads",
           "当且仅当 d_out 不能被 num_heads 整除时，MultiHeadAttention 抛出 ValueError",
           constructor_calls,
           plain_equal("raised", reason="raised ValueError when it should not, or did not when it should")),
    _check("06-mha-state", 1.5, 21,
           "MultiHeadAttention registers its projections, out_proj (with a bias) and the bool causal mask buffer: "
           "parameters, buffers and state_dict keys",
           "MultiHeadAttention 注册了各投影层、out_proj（带偏置）以及布尔因果掩码缓冲区：参数、缓冲区与 state_dict 的键",
           lambda gen: state_calls(MHA, [mha_config(gen, h) | {"qkv_bias": bias}
                                          for h, bias in ((2, False), (3, True), (1, False))]),
           MHA_STATE_COMPARE, "no-out-proj", "qkv-bias-ignored"),
    _check("06-mha-values", 3, 22,
           "MultiHeadAttention with 1 to 4 heads, d_in equal to d_out or not, with and without qkv_bias, weights "
           "loaded by name: output values; the input and the mask buffer are left unchanged",
           "1 到 4 个头、d_in 与 d_out 相等或不等、有无 qkv_bias 的 MultiHeadAttention（按名称加载权重）：输出的数值；"
           "输入与掩码缓冲区保持不变",
           lambda gen: forward_calls(gen, MHA, [2, 3, 4, 1, 4, 2, 3]), _forward_compare(), *VALUE_PITFALLS),
    _check("06-mha-float64", 1, 23,
           "MultiHeadAttention after .to(torch.float64), on float64 inputs, at float64 precision",
           "MultiHeadAttention 经 .to(torch.float64) 后处理 float64 输入，达到 float64 精度",
           lambda gen: forward_calls(gen, MHA, [2, 3, 1], dtype=torch.float64),
           _forward_compare(atol=1e-10, rtol=1e-9)),
    _check("06-mha-shorter-inputs", 1.5, 24,
           "MultiHeadAttention on inputs shorter than context_length",
           "MultiHeadAttention 处理短于 context_length 的输入",
           lambda gen: forward_calls(gen, MHA, [2, 3, 4, 2], shorter=True), _forward_compare(),
           "mask-no-slice", "mask-inplace-buffer"),
    _check("06-mha-longer-inputs", 0.5, 25,
           "MultiHeadAttention raises ValueError for inputs longer than context_length",
           "输入长于 context_length 时，MultiHeadAttention 抛出 ValueError",
           longer_calls, plain_equal("raised", reason="did not raise ValueError")),
    _check("06-mha-mask-unchanged", 1.5, 26,
           "one MultiHeadAttention called on inputs of different lengths in turn: the registered mask stays as it "
           "was and every call gives what a fresh module gives",
           "同一个 MultiHeadAttention 依次处理不同长度的输入：注册的掩码保持原样，每次调用的结果与新建模块相同",
           sequence_calls, SEQUENCE_COMPARE, "mask-inplace-buffer", "mask-no-slice"),
    _check("06-mha-dropout-train", 1.5, 27,
           "MultiHeadAttention in training mode with dropout on the attention weights, under fixed random seeds",
           "训练模式下、固定随机种子时，MultiHeadAttention 对注意力权重做 dropout",
           lambda gen: forward_calls(gen, MHA, [2, 3, 4], dropout=0.3, train=True), _forward_compare(),
           "dropout-typo", "dropout-before-softmax"),
    _check("06-mha-dropout-eval", 1, 28,
           "MultiHeadAttention with dropout > 0 in eval mode applies no dropout",
           "dropout > 0 的 MultiHeadAttention 在评估模式下不做 dropout",
           lambda gen: forward_calls(gen, MHA, [2, 3], dropout=0.5), _forward_compare(), "dropout-in-eval"),
    _check("06-mha-gradients", 1.5, 29,
           "MultiHeadAttention: gradients of the input and of every parameter, out_proj included",
           "MultiHeadAttention：输入与每个参数（包括 out_proj）的梯度",
           lambda gen: gradient_calls(gen, MHA, [2, 3, 1]), GRADIENT_COMPARE, "no-out-proj"),
    _check("06-large-scores", 1, 31,
           "MultiHeadAttention on very large scores (hundreds): finite outputs, no overflow",
           "分数非常大（数百）时，MultiHeadAttention 的输出为有限值，不溢出",
           large_scores, _forward_compare(atol=1e-4, rtol=1e-3), "softmax-overflow"),
    device_check("06-mha-device", placements, owner="MultiHeadAttention (and the wrapper)",
                 pitfalls=("mask-cpu-loop", "mask-not-buffer"), seed=30),
    no_forbidden_calls("06", requires=("06-mha-values",), kernels=("fused attention",)),
]

# Round trips, errors raised and registered state count only once the functions and modules they are about work.
CHECKS = requiring(CHECKS, {
    "06-mha-device": ("06-mha-values",),
    "06-round-trips": ("06-split-heads", "06-merge-heads"),
    "06-split-heads-indivisible": ("06-split-heads",),
    "06-wrapper-state": ("06-wrapper-values",),
    "06-mha-divisibility": ("06-mha-values",),
    "06-mha-state": ("06-mha-values",),
    "06-mha-longer-inputs": ("06-mha-values",),
})

# The exercise forbids scaled_dot_product_attention: every call is recorded,
# and one that runs a fused attention kernel fails its check.
CHECKS = observing(CHECKS, (FUSED_ATTENTION,))
