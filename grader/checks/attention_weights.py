"""Hidden checks of exercise 02 (attention without trainable weights).

Every check calls the student's functions through the same probes as the
public tests (``coursekit.probes.attention_weights``) on hidden random
inputs and compares with the reference. Unbatched and batched inputs are
separate checks, so a solution that only works for one ``(n, d)`` sequence
keeps the points for it.
"""
from __future__ import annotations

import torch

from grader.checks import FUSED_ATTENTION, observing
from grader.checks import Check, no_forbidden_calls, plain_equal, tensors_close, text
from grader.sandbox import ProbeCall

CALL = "coursekit.probes.attention_weights:call"
GRADIENT = "coursekit.probes.attention_weights:gradient"

# Batch shapes where `x @ x.T` raises no error: (b, n, d) @ (d, n, b) runs
# when n == d and b broadcasts against d; (b, h, n, d) @ (d, n, h, b) when
# h == d. The result then has the wrong numbers or the wrong shape.
SILENT_T_SHAPES: tuple[tuple[int, ...], ...] = ((3, 3, 3), (2, 2, 2, 2), (1, 4, 4))
FLOAT64 = dict(atol=1e-10, rtol=1e-9)


def _int(gen: torch.Generator, low: int, high: int) -> int:
    """A random int in [low, high]."""
    return int(torch.randint(low, high + 1, (1,), generator=gen))


def _batched_shape(gen: torch.Generator, last: tuple[int, int] | None = None) -> tuple[int, ...]:
    """(batch, n, d) or (batch, heads, n, d): batch and heads 1..4, n and d
    1..6; ``last`` fixes the last two sizes (n_query, n_key for scores)."""
    lead = [_int(gen, 1, 4)] + ([_int(gen, 1, 4)] if bool(torch.randint(0, 2, (1,), generator=gen)) else [])
    tail = last if last is not None else (_int(gen, 1, 6), _int(gen, 1, 6))
    return (*lead, *tail)


def _calls(name: str, shapes: list[tuple[int, ...]], gen: torch.Generator, scale: float = 1.0,
           dtype: torch.dtype = torch.float32) -> list[ProbeCall]:
    return [ProbeCall(CALL, {"name": name, "x": (torch.randn(shape, generator=gen) * scale).to(dtype)})
            for shape in shapes]


def _scores_unbatched(gen: torch.Generator) -> list[ProbeCall]:
    shapes = [(_int(gen, 1, 7), _int(gen, 1, 6)) for _ in range(3)] + [(1, 1)]
    return _calls("attention_scores", shapes, gen)


def _scores_batched(gen: torch.Generator) -> list[ProbeCall]:
    shapes = [_batched_shape(gen) for _ in range(4)] + list(SILENT_T_SHAPES)
    return _calls("attention_scores", shapes, gen)


def _weights_rows(gen: torch.Generator) -> list[ProbeCall]:
    """2-D scores, n_query != n_key, many negative entries, and one row that
    sums to zero (where dividing by the sum breaks)."""
    calls = _calls("attention_weights", [(_int(gen, 2, 6), _int(gen, 2, 7)) for _ in range(3)], gen, scale=2.0)
    scores = torch.randn(4, 5, generator=gen) * 2
    scores[1] -= scores[1].mean()  # this row sums to (almost) zero
    scores[2] = -scores[2].abs() - 0.5  # all negative
    return calls + [ProbeCall(CALL, {"name": "attention_weights", "x": scores})]


def _weights_batched(gen: torch.Generator) -> list[ProbeCall]:
    shapes = [_batched_shape(gen, (_int(gen, 2, 5), _int(gen, 2, 6))) for _ in range(4)] + [(3, 3, 3), (2, 3, 4, 4)]
    return _calls("attention_weights", shapes, gen, scale=2.0)


def _weights_large(gen: torch.Generator) -> list[ProbeCall]:
    # 2-D only: this check is about overflow, not about which dim is reduced.
    return _calls("attention_weights", [(_int(gen, 2, 5), _int(gen, 2, 6)) for _ in range(3)], gen, scale=300.0)


def _context_unbatched(gen: torch.Generator) -> list[ProbeCall]:
    return _calls("context_vectors", [(_int(gen, 1, 7), _int(gen, 1, 6)) for _ in range(3)], gen)


def _context_batched(gen: torch.Generator) -> list[ProbeCall]:
    shapes = [_batched_shape(gen) for _ in range(4)] + list(SILENT_T_SHAPES)
    return _calls("context_vectors", shapes, gen)


def _unbatched_each(gen: torch.Generator, dtype: torch.dtype) -> list[ProbeCall]:
    """One (n, d) input per function: the dtype and input checks should not
    also punish a batching mistake, which the batched checks already do."""
    calls = []
    for name in ("attention_scores", "attention_weights", "context_vectors"):
        x = torch.randn(_int(gen, 2, 6), _int(gen, 2, 5), generator=gen, dtype=dtype)
        calls.append(ProbeCall(CALL, {"name": name, "x": x}))
    return calls


def _gradients(gen: torch.Generator) -> list[ProbeCall]:
    calls = []
    for name in ("attention_scores", "attention_weights", "context_vectors", "context_vectors"):
        shape = _batched_shape(gen)
        out_shape = (*shape[:-1], shape[-2]) if name == "attention_scores" else shape
        calls.append(ProbeCall(GRADIENT, {"name": name, "x": torch.randn(shape, generator=gen),
                                          "upstream": torch.randn(out_shape, generator=gen)}))
    return calls


OUTPUT = tensors_close("output")
BATCHED = ("transpose-T-3d", "softmax-wrong-dim", "normalize-by-sum")

CHECKS = [
    Check(
        id="02-scores-unbatched",
        message=text("attention_scores on single (n, d) sequences of random sizes",
                     "在随机大小的单个 (n, d) 序列上计算 attention_scores"),
        calls=_scores_unbatched, compare=OUTPUT, seed=20,
    ),
    Check(
        id="02-scores-batched",
        weight=1.5,
        message=text("attention_scores on batches with one and two leading dims, including batches whose "
                     "sizes are all equal",
                     "在带一个或两个前置 batch 维的输入上计算 attention_scores，包括各维大小都相同的 batch"),
        calls=_scores_batched, compare=OUTPUT, pitfalls=("transpose-T-3d",), seed=21,
    ),
    Check(
        id="02-weights-rows",
        weight=1.5,
        message=text("attention_weights of 2-D scores with negative entries and n_query != n_key",
                     "对含负数、n_query != n_key 的二维分数计算 attention_weights"),
        calls=_weights_rows, compare=OUTPUT, pitfalls=("normalize-by-sum",), seed=22,
    ),
    Check(
        id="02-weights-batched",
        weight=1.5,
        message=text("attention_weights of 3-D and 4-D scores: a softmax over the keys of each query",
                     "对三维和四维分数计算 attention_weights：对每个 query 沿 key 做 softmax"),
        calls=_weights_batched, compare=OUTPUT, pitfalls=("softmax-wrong-dim", "normalize-by-sum"), seed=23,
    ),
    Check(
        id="02-weights-large-scores",
        message=text("attention_weights of very large scores (hundreds) does not overflow",
                     "分数很大（数百）时 attention_weights 不会溢出"),
        calls=_weights_large, compare=OUTPUT, pitfalls=("softmax-overflow", "normalize-by-sum"), seed=24,
    ),
    Check(
        id="02-context-unbatched",
        message=text("context_vectors on single (n, d) sequences of random sizes",
                     "在随机大小的单个 (n, d) 序列上计算 context_vectors"),
        calls=_context_unbatched, compare=OUTPUT, pitfalls=("normalize-by-sum",), seed=25,
    ),
    Check(
        id="02-context-batched",
        weight=2,
        message=text("context_vectors on batches with one and two leading dims, including batches whose "
                     "sizes are all equal",
                     "在带一个或两个前置 batch 维的输入上计算 context_vectors，包括各维大小都相同的 batch"),
        calls=_context_batched, compare=OUTPUT, pitfalls=BATCHED, seed=26,
    ),
    Check(
        id="02-float64",
        message=text("float64 (n, d) inputs keep their dtype and precision in all three functions",
                     "三个函数对 float64 的 (n, d) 输入都保持其 dtype 与精度"),
        calls=lambda gen: _unbatched_each(gen, torch.float64), compare=tensors_close("output", **FLOAT64),
        pitfalls=("normalize-by-sum",), seed=27,
    ),
    Check(
        id="02-gradients",
        weight=1.5,
        message=text("gradients of all three functions with respect to their batched input",
                     "三个函数对其带 batch 的输入的梯度"),
        calls=_gradients, compare=tensors_close(), pitfalls=BATCHED, seed=28,
    ),
    Check(
        id="02-input-unchanged",
        weight=0.5,
        message=text("no function modifies its input tensor", "所有函数都不修改输入张量"),
        calls=lambda gen: _unbatched_each(gen, torch.float32),
        # Judged on the input only (issue 31): wrong values are the value
        # checks' to report; it pays once the three functions compute them.
        compare=plain_equal("input_unchanged", reason="modified its input"),
        requires=("02-scores-unbatched", "02-weights-rows", "02-context-unbatched"),
        seed=29,
    ),
    no_forbidden_calls("02", requires=("02-context-unbatched",), kernels=("fused attention",)),
]

# The exercise forbids scaled_dot_product_attention: every call is recorded,
# and one that runs a fused attention kernel fails its check.
CHECKS = observing(CHECKS, (FUSED_ATTENTION,))
