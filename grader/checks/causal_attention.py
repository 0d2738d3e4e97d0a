"""Hidden checks of exercise 05 (causal_attention).

Every call builds a fresh ``CausalAttention`` in the sandbox and loads
seeded weights by name (``coursekit.probes.causal_attention``), so nothing
depends on the order in which a submission's ``__init__`` creates its
layers. Train-mode calls seed torch right before the forward, so the
dropout masks of submission and reference are drawn identically.
"""
from __future__ import annotations

from collections.abc import Callable

import torch

from coursekit.probes import causal_attention as probe
from grader.checks import FUSED_ATTENTION, observing, requiring
from grader.checks import Check, Compare, all_of, no_forbidden_calls, plain_equal, tensors_close, text
from grader.checks.devices import device_check, placement_call
from grader.sandbox import ProbeCall

P = "coursekit.probes.causal_attention:"
FORWARD, RAISED, STRUCTURE = P + "forward", P + "raised", P + "structure"
AFTER_TO, DEVICES, GRADIENTS = P + "after_to", P + "devices", P + "all_gradients"
DROPOUT = P + "dropout_runs"


# ---------------------------------------------------------------- random configurations

def _int(gen: torch.Generator, low: int, high: int) -> int:
    """An int in [low, high], inclusive."""
    return int(torch.randint(low, high + 1, (1,), generator=gen))


def _config(gen: torch.Generator, *, shorter: bool | None = None, batched: bool = True,
            dtype: torch.dtype = torch.float32) -> dict:
    """Random sizes, input and seeded weights for ``probe.forward`` and the
    like. ``shorter``: n < context_length (True), n == context_length
    (False) or either (None). Odd sizes and batch 1 come up often."""
    n = _int(gen, 1, 7)
    if shorter is None:
        shorter = bool(_int(gen, 0, 1))
    context_length = n + (_int(gen, 1, 4) if shorter else 0)
    d_in, d_out, batch = _int(gen, 1, 8), _int(gen, 1, 6), _int(gen, 1, 3)
    qkv_bias = bool(_int(gen, 0, 1))
    shape = (batch, n, d_in) if batched else (n, d_in)
    x = torch.randn(shape, generator=gen, dtype=dtype)
    weights = probe.random_weights(d_in, d_out, qkv_bias, seed=_int(gen, 0, 2**30), dtype=dtype)
    return {"x": x, "d_out": d_out, "context_length": context_length, "qkv_bias": qkv_bias, "weights": weights}


def _forwards(gen: torch.Generator, count: int, **options: bool) -> list[ProbeCall]:
    return [ProbeCall(FORWARD, _config(gen, **options)) for _ in range(count)]


OUTPUT = "outputs", 0  # forward's result: the output of its (only) call
def _revealing(gen: torch.Generator, count: int, shorter: bool = True) -> list[ProbeCall]:
    """Inputs whose values are the identity: the output is the attention
    weight matrix itself, read without any hook. ``shorter``: n may be
    below context_length."""
    calls = []
    for i in range(count):
        n, qkv_bias = _int(gen, 2, 7), bool(i % 2)
        x, weights = probe.revealing_setup(_int(gen, 1, 3), n, qkv_bias=qkv_bias, seed=_int(gen, 0, 2**30))
        calls.append(ProbeCall(FORWARD, {"x": x, "d_out": n, "context_length": n + _int(gen, 0, 2 * shorter),
                                         "qkv_bias": qkv_bias, "weights": weights}))
    return calls


def _too_long(gen: torch.Generator) -> list[ProbeCall]:
    calls = []
    for batched in (True, True, False):
        context_length = _int(gen, 1, 5)
        n = context_length + _int(gen, 1, 3)
        d_in = _int(gen, 2, 6)
        x = torch.randn((2, n, d_in) if batched else (n, d_in), generator=gen)
        calls.append(ProbeCall(RAISED, {"x": x, "d_out": _int(gen, 1, 4), "context_length": context_length}))
    return calls


# Inputs this many times larger make the scores ~60 times larger than in the
# other checks (hundreds): exp() overflows float32 unless the softmax
# subtracts each row's maximum first (torch.softmax does).
LARGE = 8.0


def _large_scores(gen: torch.Generator) -> list[ProbeCall]:
    calls = []
    for batched in (True, True, False):
        config = _config(gen, batched=batched)
        calls.append(ProbeCall(FORWARD, config | {"x": config["x"] * LARGE}))
    return calls


def _placements(gen: torch.Generator) -> list[ProbeCall]:
    """Forward passes on the meta device: batched and shorter than
    context_length, then one unbatched at full length."""
    calls = []
    for batched, shorter in ((True, True), (False, False)):
        config = _config(gen, shorter=shorter, batched=batched)
        d_in = config["x"].size(-1)
        calls.append(placement_call("CausalAttention", {"qkv_bias": config["qkv_bias"]}, config["x"],
                                    init_args=(d_in, config["d_out"], config["context_length"], 0.0)))
    return calls


def _structures(gen: torch.Generator) -> list[ProbeCall]:
    return [ProbeCall(STRUCTURE, {"d_in": _int(gen, 1, 8), "d_out": _int(gen, 1, 6),
                                  "context_length": _int(gen, 1, 9), "dropout": p, "qkv_bias": bias})
            for p, bias in ((0.0, False), (0.25, True), (0.6, False))]


def _dropout(gen: torch.Generator, count: int, *, train: bool) -> list[ProbeCall]:
    """Dropout p in [0.2, 0.8] under two seeds, against the same weights
    without dropout; some calls unbatched. Train mode uses inputs whose
    values are the identity, so the output is the weight matrix and dropout
    on it shows entry by entry. Inputs as long as context_length: slicing
    the mask is checked elsewhere."""
    calls = []
    for i in range(count):
        if train:
            kwargs = _revealing(gen, 1, shorter=False)[0].kwargs
            if i % 3 == 2:
                kwargs["x"] = kwargs["x"][0]
        else:
            kwargs = _config(gen, batched=i % 3 != 2, shorter=False)
        p = round(0.2 + 0.6 * float(torch.rand((), generator=gen)), 3)
        seeds = [_int(gen, 0, 10_000), _int(gen, 0, 10_000)]
        calls.append(ProbeCall(DROPOUT, kwargs | {"dropout": p, "train": train, "seeds": seeds}))
    return calls


def _repeated(gen: torch.Generator) -> list[ProbeCall]:
    """Three calls on one module (eval mode, so dropout mistakes do not
    show here): shorter than context_length, as long, and unbatched."""
    return [ProbeCall(FORWARD, _config(gen, shorter=True) | {"calls": 3}),
            ProbeCall(FORWARD, _config(gen, shorter=False) | {"calls": 3}),
            ProbeCall(FORWARD, _config(gen, shorter=True, batched=False) | {"calls": 3})]


def _gradients(gen: torch.Generator) -> list[ProbeCall]:
    """Eval mode in float32 (batched, unbatched) and float64; train mode
    with dropout under a fixed seed."""
    return [ProbeCall(GRADIENTS, _config(gen, batched=batched, dtype=dtype)
                      | {"dropout": 0.4 * train, "train": train, "seed": _int(gen, 0, 10_000),
                         "upstream_seed": _int(gen, 0, 10_000)})
            for dtype, batched, train in ((torch.float32, True, False), (torch.float32, False, False),
                                          (torch.float64, True, False), (torch.float32, True, True))]


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
        calls=lambda gen: _forwards(gen, 8, shorter=False),
        compare=tensors_close(*OUTPUT),
        pitfalls=MASK_MISTAKES,
    ),
    Check(
        id="05-shorter-inputs",
        weight=2,
        message=text("outputs for inputs shorter than context_length", "输入短于 context_length 时的输出"),
        calls=lambda gen: _forwards(gen, 6, shorter=True),
        compare=tensors_close(*OUTPUT),
        pitfalls=("mask-no-slice", *MASK_MISTAKES),
        seed=1,
    ),
    Check(
        id="05-unbatched",
        message=text("outputs for unbatched inputs of shape (n, d_in)", "不带 batch、形状为 (n, d_in) 的输入的输出"),
        calls=lambda gen: _forwards(gen, 4, batched=False),
        compare=tensors_close(*OUTPUT),
        pitfalls=("mask-no-slice", *MASK_MISTAKES),
        seed=2,
    ),
    Check(
        id=WEIGHTS_OK,
        weight=2,
        message=text("the attention weights: zero on future tokens, non-zero on the diagonal, each row summing "
                     "to one, no NaN", "注意力权重：未来 token 上为 0，对角线上不为 0，每行之和为 1，没有 NaN"),
        calls=lambda gen: _revealing(gen, 4, shorter=False),
        compare=_derived(_symptoms, "the weights are not causal and normalised"),
        pitfalls=MASK_MISTAKES,
        seed=3,
    ),
    Check(
        id="05-too-long-raises",
        message=text("an input longer than context_length raises ValueError (batched and unbatched)",
                     "输入长于 context_length 时抛出 ValueError（带或不带 batch）"),
        calls=_too_long,
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
        calls=_structures,
        compare=_mask_registered,
        pitfalls=("mask-not-buffer", "mask-off-by-one", "qkv-bias-ignored"),
        seed=5,
    ),
    Check(
        id="05-to-float64",
        message=text(".to(torch.float64) converts the parameters, keeps a bool mask, and the module then computes "
                     "in float64", ".to(torch.float64) 转换参数、掩码仍为 bool，之后模块以 float64 计算"),
        calls=lambda gen: [ProbeCall(AFTER_TO, _config(gen, dtype=torch.float64) | {"dtype": torch.float64})
                           for _ in range(3)],
        compare=all_of(_dtypes_of_reference_tensors, tensors_close("output")),
        seed=6,
    ),
    Check(
        id="05-to-device",
        message=text(".to(device) moves every tensor of the module, the mask included",
                     ".to(device) 会移动模块的所有张量，包括掩码"),
        calls=lambda gen: [ProbeCall(DEVICES, {"d_in": _int(gen, 1, 6), "d_out": _int(gen, 1, 6),
                                               "context_length": _int(gen, 1, 8), "device": "meta"})
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
        calls=_large_scores,
        compare=all_of(tensors_close(*OUTPUT, atol=1e-4, rtol=1e-3), plain_equal("load", reason="weights did not load")),
        pitfalls=("softmax-overflow",),
        seed=15,
    ),
    device_check(
        "05-forward-device", _placements, owner="CausalAttention", pitfalls=("mask-cpu-loop", "mask-not-buffer"),
        weight=1, seed=14,
    ),
    Check(
        id="05-eval-no-dropout",
        weight=1.5,
        message=text("in eval mode dropout has no effect, whatever the random seed",
                     "评估模式下 dropout 不起作用（无论随机种子为何）"),
        calls=lambda gen: _dropout(gen, 3, train=False),
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
        calls=lambda gen: _dropout(gen, 4, train=True),
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
        calls=_repeated,
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
        calls=_gradients,
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
