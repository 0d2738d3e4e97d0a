"""Hidden checks of exercise 15 (tiled attention with an online softmax).

Values and gradients are compared with the reference's run on the same
float64 inputs to 1e-9 (the reference equals exercise 03's attention to
~1e-15): leading dims (), (b,) and (b, h); n_q == n_k and n_q != n_k; block
sizes that divide n, that do not, of 1 and larger than n; causal with the
diagonal aligned bottom-right, and queries that see no key at all.

Memory is the point of the exercise: two measured checks run a causal
float32 sequence of MEMORY_N positions, the forward alone and forward plus
backward, and the grader reads the child's peak memory from outside
(grader/checks/memory.py). They run first in the child, so that no heap
freed by other calls can hide the peak. The (n, n) matrix is 64 MiB there; the
reference's peak grows by a few MiB. Each value check counts only once the memory of
what it relies on passed, as 14's values wait on the work its cache saves.
"""
from __future__ import annotations

import torch

from grader.checks import FUSED_ATTENTION, Check, all_of, no_forbidden_calls, observed, plain_equal, requiring, \
    tensors_close, text
from grader.checks.memory import MemoryBudget, peak_memory_within
from grader.sandbox import ProbeCall

PROBES = "coursekit.probes.flash_attention"
F64 = {"atol": 1e-9, "rtol": 1e-7}
F32 = {"atol": 1e-4, "rtol": 1e-3}      # float32 over 4096 keys: two correct tilings round differently
# Block 64: n / block = 64, so a correct tiling of the keys alone (every query at once, (n, block)
# temporaries, as the README allows) stays far below the (n, n) matrix, as a tiling of both does.
MEMORY_N, MEMORY_HEAD_DIM, MEMORY_BLOCK = 4096, 64, 64
MATRIX_BYTES = MEMORY_N * MEMORY_N * 4   # one float32 (n, n) matrix: 64 MiB
WARM_UP_N = 2 * MEMORY_BLOCK + 1


def _int(gen: torch.Generator, low: int, high: int) -> int:
    return int(torch.randint(low, high + 1, (1,), generator=gen))


def _leading(gen: torch.Generator, index: int) -> tuple[int, ...]:
    """(), (b,) or (b, h) in turn: any leading dims."""
    return ((), (_int(gen, 1, 3),), (_int(gen, 1, 2), _int(gen, 1, 3)))[index % 3]


def _block(gen: torch.Generator, n: int, index: int) -> int:
    """1, a divisor-or-not of n, and one larger than n, in turn."""
    return (1, _int(gen, 2, max(2, n - 1)), n + _int(gen, 0, 5), 64)[index % 4]


def _tensors(gen: torch.Generator, leading: tuple[int, ...], n_q: int, n_k: int, d: int, d_v: int):
    def randn(*shape: int) -> torch.Tensor:
        return torch.randn(*leading, *shape, generator=gen, dtype=torch.float64)
    return randn(n_q, d), randn(n_k, d), randn(n_k, d_v), randn(n_q, d_v)


def _sizes(gen: torch.Generator, kind: str) -> tuple[int, int]:
    """(n_q, n_k): equal, fewer queries than keys (a cached chunk), or more
    queries than keys (with causal: the first n_q - n_k see nothing)."""
    n_q = _int(gen, 2, 19)
    if kind == "equal":
        return n_q, n_q
    if kind == "fewer":
        return n_q, n_q + _int(gen, 1, 9)
    return n_q + _int(gen, 1, 6), n_q


def _calls(gen: torch.Generator, count: int, causal: bool, kinds: tuple[str, ...], gradients: bool = False,
           via: str = "apply") -> list[ProbeCall]:
    calls = []
    for index in range(count):
        n_q, n_k = _sizes(gen, kinds[index % len(kinds)])
        d = _int(gen, 2, 8)
        q, k, v, grad = _tensors(gen, _leading(gen, index), n_q, n_k, d, _int(gen, 1, 8))
        kwargs = {"query": q, "key": k, "value": v, "block_size": _block(gen, max(n_q, n_k), index),
                  "causal": causal}
        if gradients:
            calls.append(ProbeCall(f"{PROBES}:gradients", {**kwargs, "grad_output": grad, "via": via}))
        else:
            calls.append(ProbeCall(f"{PROBES}:forward", kwargs))
    return calls


def _gradient_calls(gen: torch.Generator) -> list[ProbeCall]:
    return [*_calls(gen, 6, False, ("equal", "fewer", "more"), gradients=True),
            *_calls(gen, 6, True, ("equal", "fewer", "more"), gradients=True)]


VALUES = all_of(tensors_close("output", **F64), tensors_close("lse", **F64))
GRADIENTS = all_of(*(tensors_close(name, **F64) for name in ("output", "grad_query", "grad_key", "grad_value")))
ONLINE = ("online-softmax-no-rescale", "online-softmax-block-max", "online-softmax-sum-per-block",
          "tiled-last-block-dropped")
COULD_NOT_TELL = text(
    "could not tell whether the peak memory stays far below an n×n matrix (the figure was too near the limit to "
    "decide on); the instructor will review this check",
    "无法判断峰值内存是否远低于一个 n×n 矩阵（测得的数值太接近界限，无法据此判定）；教师会复核这一项检查")


def _memory_check(check_id: str, weight: float, probe: str, what: tuple[str, str], seed: int) -> Check:
    def calls(gen: torch.Generator) -> list[ProbeCall]:
        # A short call first warms the child up (the first backward in a process
        # imports hundreds of modules); the long one, last, is measured.
        return [ProbeCall(f"{PROBES}:{probe}", {"n": n, "head_dim": MEMORY_HEAD_DIM,
                                                "block_size": MEMORY_BLOCK, "seed": _int(gen, 0, 10_000)})
                for n in (WARM_UP_N, MEMORY_N)]

    fields = ("output", "lse") if probe == "long_forward" else ("output", "grad_query", "grad_key", "grad_value")
    return Check(
        id=check_id, weight=weight, seed=seed, measured=True, runs_first=True,
        message=text(f"{what[0]} on a causal float32 sequence of {MEMORY_N} positions (head_dim "
                     f"{MEMORY_HEAD_DIM}, block_size {MEMORY_BLOCK}): the reference's values, with a peak memory "
                     f"far below one {MEMORY_N}×{MEMORY_N} matrix ({MATRIX_BYTES >> 20} MiB; measured by the grader)",
                     f"在长度为 {MEMORY_N} 的因果 float32 序列上（head_dim {MEMORY_HEAD_DIM}，block_size "
                     f"{MEMORY_BLOCK}）{what[1]}：结果与参考答案相同，且峰值内存远低于一个 {MEMORY_N}×{MEMORY_N} "
                     f"矩阵（{MATRIX_BYTES >> 20} MiB；由评分程序测量）"),
        calls=calls, compare=all_of(*(tensors_close(name, **F32) for name in fields)),
        run_rule=peak_memory_within([MemoryBudget(f"{PROBES}:{probe}", MATRIX_BYTES, text(*what))], COULD_NOT_TELL),
        pitfalls=("flash-full-matrix", "flash-backward-full-matrix", "flash-autograd-through-blocks")
        if probe == "long_sequence" else ("flash-full-matrix",))


CHECKS = requiring([
    Check(
        id="15-forward",
        weight=4,
        message=text("tiled_attention without a mask: the output and the log-sum-exp of softmax(QKᵀ/√d)V "
                     "(float64, 1e-9), any leading dims, n_q equal to n_k or not, block sizes that divide n or not",
                     "不带掩码的 tiled_attention：输出与 log-sum-exp 等于 softmax(QKᵀ/√d)V 的结果（float64，"
                     "1e-9），任意前导维度，n_q 与 n_k 相等或不等，block_size 能否整除 n 都可以"),
        calls=lambda gen: _calls(gen, 12, False, ("equal", "fewer", "more")),
        compare=VALUES,
        pitfalls=ONLINE,
    ),
    Check(
        id="15-causal",
        weight=3,
        message=text("tiled_attention with causal=True: the diagonal aligned bottom-right (query i sees keys "
                     "j <= i + n_k - n_q), also when n_q < n_k",
                     "causal=True 的 tiled_attention：对角线右下对齐（query i 只能看到 j <= i + n_k - n_q 的 "
                     "key），n_q < n_k 时也一样"),
        calls=lambda gen: _calls(gen, 12, True, ("equal", "fewer")),
        compare=VALUES,
        pitfalls=("causal-block-off-by-one", "causal-top-left", *ONLINE),
        seed=1,
    ),
    Check(
        id="15-fully-blocked",
        weight=1.5,
        message=text("causal with more queries than keys: a query that sees no key gets zeros and lse = -inf, "
                     "never NaN, and the other queries their values",
                     "因果且 query 多于 key 时：看不到任何 key 的 query 输出全 0、lse = -inf，绝不出现 NaN；"
                     "其余 query 的结果正确"),
        calls=lambda gen: _calls(gen, 8, True, ("more",)),
        compare=VALUES,
        pitfalls=("online-softmax-blocked-nan", "causal-top-left"),
        seed=2,
    ),
    Check(
        id="15-gradients",
        weight=4,
        message=text("FlashAttention.apply(q, k, v, causal, block_size): the output and the gradients of q, k "
                     "and v equal those of softmax(QKᵀ/√d)V (float64, 1e-9), causal or not, with fully blocked "
                     "queries",
                     "FlashAttention.apply(q, k, v, causal, block_size)：输出及 q、k、v 的梯度与 softmax(QKᵀ/√d)V "
                     "的相同（float64，1e-9），无论是否因果，包括完全被遮蔽的 query"),
        calls=_gradient_calls,
        compare=GRADIENTS,
        pitfalls=("flash-backward-delta", "online-softmax-blocked-nan"),
        seed=3,
    ),
    Check(
        id="15-wrapper",
        weight=1,
        message=text("flash_attention(query, key, value, block_size=..., causal=...) with keywords: the output "
                     "and gradients of FlashAttention.apply",
                     "用关键字参数调用 flash_attention(query, key, value, block_size=..., causal=...)：输出与梯度"
                     "与 FlashAttention.apply 相同"),
        calls=lambda gen: [*_calls(gen, 3, True, ("equal", "fewer", "more"), gradients=True, via="wrapper"),
                           *_calls(gen, 2, False, ("fewer",), gradients=True, via="wrapper")],
        compare=GRADIENTS,
        pitfalls=("autograd-apply-keywords",),
        seed=4,
    ),
    Check(
        id="15-input-unchanged",
        weight=0.5,
        message=text("the query, key and value tensors are not modified", "不修改 query、key 和 value 张量"),
        calls=lambda gen: _calls(gen, 4, True, ("equal", "fewer")),
        compare=plain_equal("inputs_unchanged", reason="modified its input"),
        seed=5,
    ),
    _memory_check("15-memory-forward", 2, "long_forward", ("tiled_attention", "tiled_attention"), seed=6),
    _memory_check("15-memory-backward", 2, "long_sequence",
                  ("flash_attention forward and backward", "flash_attention 的前向与反向"), seed=7),
    no_forbidden_calls("15", requires=("15-forward",), kernels=("fused attention",)),
], {
    # Values without the memory are not the exercise: each value check pays
    # only once the memory of what it runs is measured far below (n, n).
    "15-forward": ("15-memory-forward",), "15-causal": ("15-memory-forward",),
    "15-fully-blocked": ("15-memory-forward",), "15-input-unchanged": ("15-forward", "15-memory-forward"),
    "15-gradients": ("15-memory-backward",), "15-wrapper": ("15-memory-backward", "15-gradients"),
    "15-memory-backward": ("15-memory-forward",),
})
# The memory checks' calls are not recorded: the recorder keeps an event per
# operator until the call ends (hundreds of MiB over a long sequence's
# blocks), which is the very figure they measure. The forbidden names are
# still read from the submitted bytes for them.
CHECKS = [check if check.measured or check.id.endswith("-no-forbidden-calls") else observed(check, (FUSED_ATTENTION,))
          for check in CHECKS]
