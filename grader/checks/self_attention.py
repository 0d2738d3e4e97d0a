"""Hidden checks of exercise 04 (SelfAttention with trainable weights).

The probes (``coursekit.probes.self_attention``) build the student's
``SelfAttention`` and copy hidden weights in *by name*, so a correct
solution that creates its layers in another order still passes. Unbatched
and batched inputs are separate checks, as are the scale and the module's
bookkeeping (registration, state_dict, dtype conversion), so each mistake
costs the points of what it breaks.
"""
from __future__ import annotations

import torch

from grader.checks import FUSED_ATTENTION, observing, requiring
from grader.checks import Check, Compare, all_of, no_forbidden_calls, plain_equal, tensor_dicts_close, tensors_close, text
from grader.sandbox import ProbeCall

PROBES = "coursekit.probes.self_attention"
PROJECTIONS = ("W_query", "W_key", "W_value")
FLOAT64 = dict(atol=1e-10, rtol=1e-9)


def _int(gen: torch.Generator, low: int, high: int) -> int:
    """A random int in [low, high]."""
    return int(torch.randint(low, high + 1, (1,), generator=gen))


def _coin(gen: torch.Generator) -> bool:
    return bool(torch.randint(0, 2, (1,), generator=gen))


def _weights(gen: torch.Generator, d_in: int, d_out: int, bias: bool, scale: float = 1.0) -> dict[str, torch.Tensor]:
    """Weights in nn.Linear layout, drawn like its default init times ``scale``."""
    bound = scale / d_in ** 0.5
    weights = {}
    for name in PROJECTIONS:
        weights[f"{name}.weight"] = (2 * torch.rand(d_out, d_in, generator=gen) - 1) * bound
        if bias:
            weights[f"{name}.bias"] = (2 * torch.rand(d_out, generator=gen) - 1) * bound
    return weights


def _sizes(gen: torch.Generator) -> tuple[int, int]:
    """d_in != d_out, so scaling by the wrong one of them shows."""
    d_in, d_out = _int(gen, 1, 7), _int(gen, 1, 8)
    if d_out == d_in:
        d_out += 1
    return d_in, d_out


def _forward(gen: torch.Generator, shape_lead: tuple[int, ...], n: int, d_in: int, d_out: int,
             bias: bool, scale: float = 1.0, probe: str = "forward_output") -> ProbeCall:
    return ProbeCall(f"{PROBES}:{probe}", {"weights": _weights(gen, d_in, d_out, bias, scale),
                                            "x": torch.randn(*shape_lead, n, d_in, generator=gen)})


def _structure(gen: torch.Generator) -> list[ProbeCall]:
    configs = [(*_sizes(gen), False), (*_sizes(gen), True), (4, 4, _coin(gen))]
    return [ProbeCall(f"{PROBES}:structure", {"d_in": d_in, "d_out": d_out, "qkv_bias": bias})
            for d_in, d_out, bias in configs]


def _unbatched(gen: torch.Generator) -> list[ProbeCall]:
    calls = [_forward(gen, (), _int(gen, 1, 7), *_sizes(gen), _coin(gen)) for _ in range(3)]
    return calls + [_forward(gen, (), 1, 3, 2, True)]  # a single token attends only to itself


def _batched(gen: torch.Generator) -> list[ProbeCall]:
    calls = [_forward(gen, (_int(gen, 1, 4),), _int(gen, 1, 7), *_sizes(gen), _coin(gen)) for _ in range(4)]
    # batch == n == d_out, and batch 1 with n == d_out: there `queries @ keys.T`
    # raises no error (wrong numbers, or a wrong shape)
    return calls + [_forward(gen, (3,), 3, 5, 3, False), _forward(gen, (1,), 4, 2, 4, True)]


def _scale(gen: torch.Generator) -> list[ProbeCall]:
    """Weights large enough that the softmax saturates without 1/sqrt(d_k),
    and d_k from 1 to 16 (d_in different), unbatched to keep batching out."""
    shapes = [(5, 3, 1), (4, 6, 16), (6, 16, 9), (3, 2, 5)]
    return [_forward(gen, (), n, d_in, d_out, _coin(gen), scale=2.5) for n, d_in, d_out in shapes]


def _large_scores(gen: torch.Generator) -> list[ProbeCall]:
    """Weights six times those of the scale check: scores ~36 times larger
    (hundreds), where exp() overflows float32 unless the softmax subtracts
    each row's maximum first (torch.softmax does)."""
    shapes = [(5, 3, 2), (4, 6, 8), (6, 5, 4)]
    return [_forward(gen, (b,) if b else (), n, d_in, d_out, _coin(gen), scale=15.0)
            for b, (n, d_in, d_out) in zip((0, 2, 1), shapes)]


def _per_example(gen: torch.Generator) -> list[ProbeCall]:
    configs = [(3, 3, 4, 3), (2, 5, 3, 2), (4, 4, 6, 4)]  # (batch, n, d_in, d_out); the 1st and 3rd: silent .T
    return [_forward(gen, (b,), n, d_in, d_out, _coin(gen), probe="per_example") for b, n, d_in, d_out in configs]


def _gradients(gen: torch.Generator) -> list[ProbeCall]:
    calls = []
    for lead, bias in (((), True), ((2,), False), ((3,), True)):
        n, (d_in, d_out) = _int(gen, 2, 6), _sizes(gen)
        calls.append(ProbeCall(f"{PROBES}:gradients", {
            "weights": _weights(gen, d_in, d_out, bias, scale=1.5),
            "x": torch.randn(*lead, n, d_in, generator=gen),
            "upstream": torch.randn(*lead, n, d_out, generator=gen)}))
    return calls


def _to_float64(gen: torch.Generator) -> list[ProbeCall]:
    calls = []
    for bias in (True, False):
        d_in, d_out = _sizes(gen)
        calls.append(ProbeCall(f"{PROBES}:after_to", {
            "weights": _weights(gen, d_in, d_out, bias), "x": torch.randn(_int(gen, 2, 6), d_in, generator=gen),
            "dtype": torch.float64}))
    return calls


def _twice(gen: torch.Generator) -> list[ProbeCall]:
    # unbatched: a batching mistake already costs the batched checks' points
    return [_forward(gen, (), _int(gen, 2, 6), *_sizes(gen), bias, probe="forward_twice") for bias in (True, False)]


LOADED = plain_equal("load", reason="the weights could not be copied into W_query, W_key, W_value by name")
OUTPUT = all_of(LOADED, tensors_close("output"))
STRUCTURE = all_of(
    plain_equal("is_module", reason="not an nn.Module"),
    plain_equal("hidden_lists", reason="keeps layers in a plain Python list"),
    plain_equal("layers", reason="W_query, W_key, W_value are not the expected nn.Linear layers"),
    plain_equal("registered", "parameters", reason="wrong registered parameters"),
)

CHECKS = [
    Check(
        id="04-structure",
        weight=1.5,
        message=text("SelfAttention is an nn.Module with W_query, W_key, W_value as registered nn.Linear layers "
                     "of the right sizes, with and without bias",
                     "SelfAttention 是 nn.Module，W_query、W_key、W_value 是已注册、大小正确的 nn.Linear 层"
                     "（有无 bias 两种情况）"),
        calls=_structure, compare=STRUCTURE, pitfalls=("missing-super-init", "plain-list-layers", "qkv-bias-ignored"),
        seed=40,
    ),
    Check(
        id="04-state-dict",
        weight=0.5,
        message=text("state_dict() holds the weights (and biases) of the three projections under their names",
                     "state_dict() 以各自的名字包含三个投影的权重（和 bias）"),
        calls=_structure, compare=plain_equal("registered", "state_dict_keys", reason="wrong state_dict keys"),
        pitfalls=("plain-list-layers",), seed=41,
    ),
    Check(
        id="04-unbatched",
        weight=2,
        message=text("forward on unbatched (n, d_in) inputs of random sizes, with and without bias",
                     "在随机大小、不带 batch 的 (n, d_in) 输入上做 forward（有无 bias）"),
        calls=_unbatched, compare=OUTPUT, pitfalls=("missing-scale", "global-in-forward"),
        seed=42,
    ),
    Check(
        id="04-batched",
        weight=3,
        message=text("forward on (batch, n, d_in) batches of random sizes, including batch size 1 and batches "
                     "whose sizes are equal",
                     "在随机大小的 (batch, n, d_in) 输入上做 forward，包括 batch 为 1 以及各维大小相同的 batch"),
        calls=_batched, compare=OUTPUT, pitfalls=("transpose-T-3d", "missing-scale"), seed=43,
    ),
    Check(
        id="04-scale",
        weight=2,
        message=text("scores are scaled by 1/sqrt(d_k) before the softmax (large weights, d_k from small to large)",
                     "softmax 之前分数乘以 1/sqrt(d_k)（较大的权重，d_k 从小到大）"),
        calls=_scale, compare=OUTPUT, pitfalls=("missing-scale",), seed=44,
    ),
    Check(
        id="04-large-scores",
        weight=1,
        message=text("very large scores (hundreds): finite outputs, no overflow",
                     "非常大的分数（数百）：输出为有限值，不溢出"),
        calls=_large_scores, compare=all_of(LOADED, tensors_close("output", atol=1e-4, rtol=1e-3)),
        pitfalls=("softmax-overflow",), seed=49,
    ),
    Check(
        id="04-batch-equals-examples",
        message=text("a batch gives the same outputs as each of its examples on its own",
                     "一个 batch 的输出与逐个样本单独计算的输出相同"),
        calls=_per_example, compare=all_of(LOADED, tensors_close("batched"), tensors_close("per_example")),
        pitfalls=("transpose-T-3d",), seed=45,
    ),
    Check(
        id="04-gradients",
        weight=2,
        message=text("gradients with respect to the input and to every parameter, by name",
                     "对输入和每个参数（按名字）的梯度"),
        calls=_gradients, compare=all_of(LOADED, tensors_close("input"), tensor_dicts_close("parameters")),
        pitfalls=("plain-list-layers", "missing-scale"), seed=46,
    ),
    Check(
        id="04-to-float64",
        weight=1.5,
        message=text(".to(torch.float64) converts every parameter, and float64 outputs keep their precision",
                     ".to(torch.float64) 会转换所有参数，float64 输出保持其精度"),
        calls=_to_float64,
        compare=all_of(LOADED, plain_equal("dtypes", reason="not every tensor of the module is float64"),
                       tensors_close("output", **FLOAT64)),
        pitfalls=("plain-list-layers",), seed=47,
    ),
    Check(
        id="04-no-side-effects",
        weight=1,
        message=text("forward modifies neither its input nor the module's weights, and gives the same output "
                     "when called twice",
                     "forward 不修改输入和模块的权重，连续调用两次结果相同"),
        calls=_twice,
        compare=all_of(LOADED, plain_equal("input_unchanged", reason="modified its input"),
                       plain_equal("state_unchanged", reason="modified the module's weights"),
                       tensors_close("first"), tensors_close("second")),
        seed=48,
    ),
    no_forbidden_calls("04", requires=("04-unbatched",), kernels=("fused attention",)),
]

# Registered structure counts only once the module computes its output.
CHECKS = requiring(CHECKS, {
    "04-structure": ("04-unbatched",),
    "04-state-dict": ("04-unbatched",),
})

# The exercise forbids scaled_dot_product_attention: every call is recorded,
# and one that runs a fused attention kernel fails its check.
CHECKS = observing(CHECKS, (FUSED_ATTENTION,))
