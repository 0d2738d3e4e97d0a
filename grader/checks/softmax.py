"""Hidden checks of exercise 01 (softmax)."""
from dataclasses import replace

import torch

from grader.checks import Check, Text, all_of, no_forbidden_calls, plain_equal, tensors_close, text
from grader.checks.forbidden import FUSED_ATTENTION, SOFTMAX, observing, unwrapped
from grader.sandbox import ProbeCall

OUTPUT = "coursekit.probes.softmax:softmax_output"
GRADIENT = "coursekit.probes.softmax:softmax_gradient"
NEG_INF = float("-inf")
# Writing softmax is the exercise: code that runs a built-in softmax kernel
# (or names one) earns nothing, whatever else it gets right. Every call is
# recorded, so no call can run one unseen.
NO_BUILTIN = "01-no-forbidden-calls"
KERNELS = (SOFTMAX, FUSED_ATTENTION)


def _random_shape(gen: torch.Generator) -> tuple[int, ...]:
    rank = int(torch.randint(1, 5, (1,), generator=gen))
    return tuple(int(n) for n in torch.randint(1, 7, (rank,), generator=gen))


def _random_dim(shape: tuple[int, ...], gen: torch.Generator) -> int:
    dim = int(torch.randint(0, len(shape), (1,), generator=gen))
    return dim - len(shape) if bool(torch.randint(0, 2, (1,), generator=gen)) else dim


def _random_cases(gen, count, scale=3.0, dtype=torch.float32):
    calls = []
    for _ in range(count):
        shape = _random_shape(gen)
        x = (torch.randn(shape, generator=gen) * scale).to(dtype)
        calls.append(ProbeCall(OUTPUT, {"x": x, "dim": _random_dim(shape, gen)}))
    return calls


def _with_blocked(gen, count, fully_blocked):
    calls = []
    for _ in range(count):
        rows, cols = (int(n) for n in torch.randint(2, 9, (2,), generator=gen))
        x = torch.randn(rows, cols, generator=gen)
        blocked = torch.rand(rows, cols, generator=gen) < 0.4
        if fully_blocked:
            blocked[int(torch.randint(0, rows, (1,), generator=gen))] = True
        else:
            blocked[:, 0] = False  # every row keeps one finite entry
        calls.append(ProbeCall(OUTPUT, {"x": x.masked_fill(blocked, NEG_INF), "dim": -1}))
    return calls


def _gradients(gen, count):
    calls = []
    for _ in range(count):
        rows, cols = (int(n) for n in torch.randint(2, 7, (2,), generator=gen))
        x = torch.randn(rows, cols, generator=gen)
        x[0] = NEG_INF  # a fully blocked row must not poison the gradient
        calls.append(ProbeCall(GRADIENT, {"x": x, "upstream": torch.randn(rows, cols, generator=gen), "dim": -1}))
    return calls


CHECKS = [
    Check(
        id="01-random-shapes",
        requires=(NO_BUILTIN,),
        weight=3,
        message=text("softmax(x, dim) on random inputs of 1 to 4 dimensions, every dim",
                     "在 1 到 4 维的随机输入上、沿每个维度计算 softmax(x, dim)"),
        calls=lambda gen: _random_cases(gen, 24),
        compare=tensors_close("output"),
        pitfalls=("softmax-dim0",),
    ),
    Check(
        id="01-float64",
        requires=(NO_BUILTIN,),
        message=text("float64 inputs keep their dtype and precision", "float64 输入保持其 dtype 与精度"),
        calls=lambda gen: _random_cases(gen, 6, dtype=torch.float64),
        compare=tensors_close("output", atol=1e-10, rtol=1e-9),
        seed=1,
    ),
    Check(
        id="01-large-scores",
        requires=(NO_BUILTIN,),
        weight=2,
        message=text("large scores (hundreds to thousands) do not overflow", "很大的分数（数百到数千）不会溢出"),
        calls=lambda gen: _random_cases(gen, 8, scale=800.0),
        compare=tensors_close("output"),
        pitfalls=("softmax-overflow",),
        seed=2,
    ),
    Check(
        id="01-blocked-entries",
        requires=(NO_BUILTIN,),
        message=text("-inf entries get exactly zero weight", "-inf 元素的权重恰好为 0"),
        calls=lambda gen: _with_blocked(gen, 8, fully_blocked=False),
        compare=tensors_close("output"),
        seed=3,
    ),
    Check(
        id="01-fully-blocked-rows",
        requires=(NO_BUILTIN,),
        weight=2,
        message=text("rows that are entirely -inf give zeros, not NaN", "整行为 -inf 时输出全 0，而不是 NaN"),
        calls=lambda gen: _with_blocked(gen, 8, fully_blocked=True),
        compare=tensors_close("output"),
        pitfalls=("softmax-all-masked-nan",),
        seed=4,
    ),
    Check(
        id="01-gradient",
        requires=(NO_BUILTIN,),
        message=text("the gradient, including through fully blocked rows", "梯度（包括整行被遮蔽的行）"),
        calls=lambda gen: _gradients(gen, 6),
        compare=tensors_close(),
        pitfalls=("softmax-all-masked-nan",),
        seed=5,
    ),
    Check(
        id="01-input-unchanged",
        requires=(NO_BUILTIN,),
        weight=0.5,
        message=text("the input tensor is not modified", "不修改输入张量"),
        calls=lambda gen: _random_cases(gen, 4),
        # Judged on the input only: wrong values are the value checks' to
        # report (a wrong-dim softmax lost these points as "wrong values").
        compare=plain_equal("input_unchanged", reason="modified its input"),
        seed=6,
    ),
    no_forbidden_calls("01", requires=("01-random-shapes",), kernels=KERNELS),
]


def _input_words(call: ProbeCall) -> Text | None:
    """"a 3-dimensional input, softmax over dim -1": the kind of input a call is
    (shown beside the submission's own exception, grader/own_errors.py)."""
    x, dim = unwrapped(call).kwargs.get("x"), unwrapped(call).kwargs.get("dim")
    if type(x) is not torch.Tensor or type(dim) is not int:
        return None
    blocked = ", with -inf entries" if bool(torch.isneginf(x).any()) else ""
    return text(f"a {x.dim()}-dimensional input, softmax over dim {dim}{blocked}",
                f"{x.dim()} 维输入，沿 dim {dim} 计算 softmax{'，含 -inf 元素' if blocked else ''}")


CHECKS = [replace(check, inputs=_input_words) for check in observing(CHECKS, KERNELS)]
