"""Hidden checks of exercise 05 (causal_attention).

Every call builds a fresh ``CausalAttention`` in the sandbox and loads
seeded weights by name (``coursekit.probes.causal_attention``), so nothing
depends on the order in which a submission's ``__init__`` creates its
layers. In train mode every dropout draws its mask from a seed by the
(query, key) position of each entry (``coursekit.probes.dropout``), so the
dropout masks of submission and reference are drawn identically however
dropout is called. The inputs are built in
grader/checks/causal_attention_inputs.py; this module says what is compared.
"""
from __future__ import annotations

from collections.abc import Callable

import torch

from coursekit.probes import causal_attention as probe
from grader.checks import FUSED_ATTENTION, observing, requiring
from grader.checks import Check, Compare, all_of, no_forbidden_calls, plain_equal, tensors_close, text
from grader.checks.causal_attention_inputs import (
    AFTER_TO, DEVICES, dropout_calls, forward_calls, gradient_calls, large_score_calls, placement_calls, randint,
    random_config, repeated_calls, revealing_calls, structure_calls, too_long_calls,
)
from grader.checks.devices import device_check
from grader.sandbox import ProbeCall

OUTPUT = "outputs", 0  # forward's result: the output of its (only) call


# ---------------------------------------------------------------- comparisons

def _each_close(key: str) -> Compare:
    """Every tensor of the reference's ``key`` dict (by name) close to the
    submission's; extra names in the submission are not judged here."""

    def compare(submitted: object, expected: object) -> str | None:
        if not isinstance(expected, dict) or not isinstance(expected.get(key), dict):
            return "the result is missing a part"
        for name, value in expected[key].items():
            if value is None:
                continue
            if (reason := tensors_close(key, name)(submitted, expected)) is not None:
                return reason
        return None

    return compare


def _dtypes_of_reference_tensors(submitted: object, expected: object) -> str | None:
    """The reference's parameters and buffers have the same dtypes in the
    submission after ``.to(torch.float64)`` (bool mask stays bool)."""
    try:
        same = all(submitted["dtypes"].get(name) == dtype for name, dtype in expected["dtypes"].items())
    except (KeyError, TypeError, AttributeError):
        return "the result is missing a part"
    return None if same else "wrong dtype after .to(torch.float64)"


def _unsaved(buffer: dict | None) -> dict | None:
    """A buffer's description without its persistence (judged apart)."""
    return None if buffer is None else {k: v for k, v in buffer.items() if k != "persistent"}


def _mask_registered(submitted: object, expected: object) -> str | None:
    """Same parameters (names, shapes); a ``mask`` buffer with the same shape,
    dtype and persistence, saved in ``state_dict``; the dropout's p."""
    try:
        if submitted["parameters"] != expected["parameters"]:
            return "wrong parameters (names or shapes)"
        # .get on both sides: the judge also compares a submission with a
        # pitfall variant's results, which may lack the buffer.
        if _unsaved(submitted["buffers"].get("mask")) != _unsaved(expected["buffers"].get("mask")):
            return "mask is not a registered bool buffer of the right shape"
        if ("mask" in submitted["state_dict_keys"]) != ("mask" in expected["state_dict_keys"]):
            return "mask is not saved in state_dict"
        if submitted["dropout_p"] != expected["dropout_p"]:
            return "dropout is not an nn.Dropout with the given p"
    except (KeyError, TypeError, AttributeError):
        return "the result is missing a part"
    return tensors_close("mask")(submitted, expected)


# ---------------------------------------------------------------- self-consistency
# These read one behaviour from the submission's own results (dropout
# against its own output without dropout; a second call against the first)
# and compare that with the reference's, so a mistake elsewhere (wrong
# scale, wrong mask) does not also fail the dropout and buffer checks.

_BROKEN = (KeyError, IndexError, TypeError, AttributeError, RuntimeError, ValueError)


def _same(a: object, b: object) -> bool:
    return (type(a) is torch.Tensor and type(b) is torch.Tensor and a.shape == b.shape
            and torch.allclose(a.double(), b.double(), rtol=1e-5, atol=1e-6, equal_nan=True))


def _derived(derive: Callable[[dict], object], reason: str) -> Compare:
    """Equal ``derive(result)`` (plain data) for submission and reference."""

    def compare(submitted: object, expected: object) -> str | None:
        try:
            mine = derive(submitted)  # type: ignore[arg-type]
        except _BROKEN:
            return "the result is missing a part or has the wrong shape"
        try:  # ``expected`` may be a pitfall variant's result (see grader.judge)
            theirs = derive(expected)  # type: ignore[arg-type]
        except _BROKEN:
            return reason
        return None if mine == theirs else reason

    return compare


def _eval_is_clean(result: dict) -> list[bool]:
    return [_same(output, result["clean"]) for output in result["outputs"]]


def _repeat_facts(result: dict) -> dict:
    before, after = result["mask_before"], result["mask_after"]
    return {"same_outputs": [_same(o, result["outputs"][0]) for o in result["outputs"][1:]],
            "mask_unchanged": (before is None and after is None) or _same(before, after),
            "input_unchanged": result["input_unchanged"] is True}


def _symptoms(result: dict) -> dict:
    weights = result["outputs"][0]
    return {"shape": list(weights.shape), **probe.weight_symptoms(weights)}


def _train_dropout(submitted: object, expected: object) -> str | None:
    """Where both outputs without dropout have a finite non-zero weight, the
    train-mode output divided by it (0 where dropped, 1/(1-p) where kept)
    matches the reference's under the same seed; weights that were zero
    stay zero."""
    try:
        clean, ref_clean = submitted["clean"].double(), expected["clean"].double()  # type: ignore[index]
        if clean.shape != ref_clean.shape:
            return "wrong shape"
        if not clean.isfinite().any():
            return "no usable output"
        for mine, theirs in zip(submitted["outputs"], expected["outputs"], strict=True):  # type: ignore[index]
            mine, theirs = mine.double(), theirs.double()
            if mine.shape != clean.shape:
                return "wrong shape"
            if not (mine[clean == 0] == 0).all():
                return "dropout gave weight to a blocked token"
            seen = clean.isfinite() & ref_clean.isfinite() & (clean != 0) & (ref_clean != 0)
            if not torch.allclose(mine[seen] / clean[seen], theirs[seen] / ref_clean[seen], rtol=1e-4, atol=1e-4):
                return "dropout did not act once on the attention weights as expected"
    except _BROKEN:
        return "the result is missing a part or has the wrong shape"
    return None


# ---------------------------------------------------------------- the checks

MASK_MISTAKES = ("mask-off-by-one", "mask-after-softmax")
# The self-consistency checks count only once the module computes causal,
# normalised weights: an output that ignores its input (zeros) is trivially
# "the same on every call" and "unchanged by dropout in eval mode".
WEIGHTS_OK = "05-attention-weights"

CHECKS = [
    Check(
        id="05-full-length",
        weight=3,
        message=text("outputs for inputs exactly as long as context_length, many sizes, with and without bias",
                     "输入长度恰好等于 context_length 时的输出（多种尺寸，带或不带偏置）"),
        calls=lambda gen: forward_calls(gen, 8, shorter=False),
        compare=tensors_close(*OUTPUT),
        pitfalls=MASK_MISTAKES,
    ),
    Check(
        id="05-shorter-inputs",
        weight=2,
        message=text("outputs for inputs shorter than context_length", "输入短于 context_length 时的输出"),
        calls=lambda gen: forward_calls(gen, 6, shorter=True),
        compare=tensors_close(*OUTPUT),
        pitfalls=("mask-no-slice", *MASK_MISTAKES),
        seed=1,
    ),
    Check(
        id="05-unbatched",
        message=text("outputs for unbatched inputs of shape (n, d_in)", "不带 batch、形状为 (n, d_in) 的输入的输出"),
        calls=lambda gen: forward_calls(gen, 4, batched=False),
        compare=tensors_close(*OUTPUT),
        pitfalls=("mask-no-slice", *MASK_MISTAKES),
        seed=2,
    ),
    Check(
        id=WEIGHTS_OK,
        weight=2,
        message=text("the attention weights: zero on future tokens, non-zero on the diagonal, each row summing "
                     "to one, no NaN", "注意力权重：未来 token 上为 0，对角线上不为 0，每行之和为 1，没有 NaN"),
        calls=lambda gen: revealing_calls(gen, 4, shorter=False),
        compare=_derived(_symptoms, "the weights are not causal and normalised"),
        pitfalls=MASK_MISTAKES,
        seed=3,
    ),
    Check(
        id="05-too-long-raises",
        message=text("an input longer than context_length raises ValueError (batched and unbatched)",
                     "输入长于 context_length 时抛出 ValueError（带或不带 batch）"),
        calls=too_long_calls,
        compare=plain_equal("raised", reason="did not raise ValueError"),
        seed=4,
    ),
    Check(
        id="05-mask-buffer",
        weight=2,
        message=text("the constructor: three projections, nn.Dropout(p), and mask as a registered, saved bool "
                     "buffer, True strictly above the diagonal",
                     "构造函数：三个投影层、nn.Dropout(p)，以及 mask：注册并会被保存的 bool buffer，"
                     "仅在对角线以上为 True"),
        calls=structure_calls,
        compare=_mask_registered,
        pitfalls=("mask-not-buffer", "mask-off-by-one", "qkv-bias-ignored"),
        seed=5,
    ),
    Check(
        id="05-to-float64",
        message=text(".to(torch.float64) converts the parameters, keeps a bool mask, and the module then computes "
                     "in float64", ".to(torch.float64) 转换参数、掩码仍为 bool，之后模块以 float64 计算"),
        calls=lambda gen: [ProbeCall(AFTER_TO, random_config(gen, dtype=torch.float64) | {"dtype": torch.float64})
                           for _ in range(3)],
        compare=all_of(_dtypes_of_reference_tensors, tensors_close("output")),
        seed=6,
    ),
    Check(
        id="05-to-device",
        message=text(".to(device) moves every tensor of the module, the mask included",
                     ".to(device) 会移动模块的所有张量，包括掩码"),
        calls=lambda gen: [ProbeCall(DEVICES, {"d_in": randint(gen, 1, 6), "d_out": randint(gen, 1, 6),
                                               "context_length": randint(gen, 1, 8), "device": "meta"})
                           for _ in range(2)],
        # The devices the tensors ended on: only "meta" when .to() moved them all.
        compare=_derived(lambda devices: sorted(set(devices.values())), "some tensors were left behind"),
        pitfalls=("mask-not-buffer",),
        seed=7,
    ),
    Check(
        id="05-large-scores",
        message=text("very large scores (hundreds): finite outputs, no overflow",
                     "非常大的分数（数百）：输出为有限值，不溢出"),
        calls=large_score_calls,
        compare=all_of(tensors_close(*OUTPUT, atol=1e-4, rtol=1e-3), plain_equal("load", reason="weights did not load")),
        pitfalls=("softmax-overflow",),
        seed=15,
    ),
    device_check(
        "05-forward-device", placement_calls, owner="CausalAttention", pitfalls=("mask-cpu-loop", "mask-not-buffer"),
        weight=1, seed=14,
    ),
    Check(
        id="05-eval-no-dropout",
        weight=1.5,
        message=text("in eval mode dropout has no effect, whatever the random seed",
                     "评估模式下 dropout 不起作用（无论随机种子为何）"),
        calls=lambda gen: dropout_calls(gen, 3, train=False),
        compare=_derived(_eval_is_clean, "dropout changed the output in eval mode"),
        pitfalls=("dropout-in-eval",),
        requires=(WEIGHTS_OK,),
        seed=8,
    ),
    Check(
        id="05-train-dropout",
        weight=2,
        message=text("in train mode dropout acts once on the attention weights after the softmax, "
                     "kept weights scaled by 1/(1-p)",
                     "训练模式下 dropout 在 softmax 之后作用于注意力权重一次，保留的权重乘以 1/(1-p)"),
        calls=lambda gen: dropout_calls(gen, 4, train=True),
        compare=_train_dropout,
        pitfalls=("dropout-typo", "dropout-before-softmax"),
        requires=(WEIGHTS_OK,),
        seed=9,
    ),
    Check(
        id="05-repeated-calls",
        weight=1.5,
        message=text("calling forward several times gives the same output and leaves self.mask and the input "
                     "unchanged", "多次调用 forward 输出相同，且 self.mask 与输入都不被修改"),
        calls=repeated_calls,
        compare=_derived(_repeat_facts, "a later call differs, or the mask or the input was modified"),
        pitfalls=("mask-inplace-buffer",),
        requires=(WEIGHTS_OK,),
        seed=10,
    ),
    Check(
        id="05-gradients",
        weight=2,
        message=text("gradients of the input and of every parameter (float32 and float64, eval and train mode)",
                     "输入和每个参数的梯度（float32 与 float64，评估与训练模式）"),
        calls=gradient_calls,
        compare=all_of(tensors_close("input_grad"), _each_close("parameter_grads")),
        seed=11,
    ),
    no_forbidden_calls("05", requires=("05-full-length",), kernels=("fused attention",)),
]

# Errors raised, the mask buffer and devices count only once the module computes its output.
CHECKS = requiring(CHECKS, {
    "05-forward-device": ("05-full-length",),
    "05-too-long-raises": ("05-full-length",),
    "05-mask-buffer": ("05-full-length",),
    "05-to-device": ("05-full-length",),
})

# The exercise forbids scaled_dot_product_attention: every call is recorded,
# and one that runs a fused attention kernel fails its check.
CHECKS = observing(CHECKS, (FUSED_ATTENTION,))
