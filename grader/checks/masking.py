"""Hidden checks of exercise 03 (masks and scaled dot-product attention).

Every hidden input comes from the seeded generator a Check receives. The
reference and the submission run the same probes (``coursekit.probes.masking``)
and their plain results are compared; dropout is replayed exactly because the
probe seeds torch just before the call.
"""
from __future__ import annotations

import torch

from grader.checks import FUSED_ATTENTION, observing, requiring
from grader.checks import Check, Compare, Figure, all_of, no_forbidden_calls, plain_equal, tensors_close, text
from grader.sandbox import ProbeCall

PROBES = "coursekit.probes.masking"
CAUSAL = f"{PROBES}:causal_mask_output"
PADDING = f"{PROBES}:padding_mask_output"
ATTENTION = f"{PROBES}:attention_output"
GRADIENTS = f"{PROBES}:attention_gradients"
DROPOUT_USAGE = f"{PROBES}:dropout_usage"
BUILT_MASKS = f"{PROBES}:built_masks_attention"
DEVICES = f"{PROBES}:mask_devices"

Shape = tuple[int, ...]


# --- hidden inputs ---

def _int(gen: torch.Generator, low: int, high: int) -> int:
    """A random int in [low, high]."""
    return int(torch.randint(low, high + 1, (1,), generator=gen))


def _leading(gen: torch.Generator, max_rank: int = 3) -> Shape:
    """Batch and head dimensions: none (unbatched) up to ``max_rank``, sizes 1 to 3."""
    return tuple(_int(gen, 1, 3) for _ in range(_int(gen, 0, max_rank)))


def _qkv(gen: torch.Generator, lead: Shape, n_q: int, n_k: int, d_k: int, d_v: int,
         dtype: torch.dtype = torch.float32) -> dict[str, torch.Tensor]:
    shapes = {"query": (*lead, n_q, d_k), "key": (*lead, n_k, d_k), "value": (*lead, n_k, d_v)}
    # Generated in float64 then cast, so every dtype sees the same numbers.
    return {name: torch.randn(shape, generator=gen, dtype=torch.float64).to(dtype) for name, shape in shapes.items()}


def _random_sizes(gen: torch.Generator) -> tuple[int, int, int, int]:
    """n_q, n_k, d_k, d_v, drawn independently: cross-attention and d_v != d_k
    come up often, size 1 sometimes."""
    return _int(gen, 1, 6), _int(gen, 1, 7), _int(gen, 1, 8), _int(gen, 1, 6)


def _mask(gen: torch.Generator, lead: Shape, n_q: int, n_k: int, *, blocked_rows: int = 0) -> torch.Tensor:
    """A random bool mask (True = blocked) that broadcasts to (*lead, n_q, n_k):
    some leading dims dropped, others (and sometimes the query dim) of size 1.
    Every query keeps a visible key, except ``blocked_rows`` rows of the mask
    that are blocked entirely."""
    kept = lead[_int(gen, 0, len(lead)):]
    shape = [1 if bool(torch.rand(1, generator=gen) < 0.3) else n for n in (*kept, n_q)] + [n_k]
    mask = torch.rand(shape, generator=gen) < 0.45
    mask[..., _int(gen, 0, n_k - 1)] = False
    rows = mask.view(-1, n_k)
    for _ in range(blocked_rows):
        rows[_int(gen, 0, rows.size(0) - 1)] = True
    return mask


def _attention_calls(gen: torch.Generator, count: int, *, masked: bool, blocked_rows: int = 0,
                     dtype: torch.dtype = torch.float32, max_rank: int = 3, **extra: object) -> list[ProbeCall]:
    calls = []
    for _ in range(count):
        lead, (n_q, n_k, d_k, d_v) = _leading(gen, max_rank), _random_sizes(gen)
        kwargs: dict = _qkv(gen, lead, n_q, n_k, d_k, d_v, dtype)
        if masked:
            kwargs["mask"] = _mask(gen, lead, n_q, n_k, blocked_rows=blocked_rows)
        calls.append(ProbeCall(ATTENTION, kwargs | extra))
    return calls


# --- the calls of each check ---

# Queries and keys this many times larger make scores ~100 times larger than
# elsewhere (hundreds): exp() of them overflows float32 unless the softmax
# subtracts each row's maximum first (torch.softmax does).
LARGE = 10.0


def _large_score_calls(gen: torch.Generator) -> list[ProbeCall]:
    calls = _attention_calls(gen, 4, masked=False) + _attention_calls(gen, 4, masked=True)
    return [ProbeCall(call.probe, call.kwargs | {"query": call.kwargs["query"] * LARGE,
                                                 "key": call.kwargs["key"] * LARGE}) for call in calls]

def _causal_calls(gen: torch.Generator) -> list[ProbeCall]:
    sizes = [1, 2, _int(gen, 3, 5), _int(gen, 6, 9), _int(gen, 10, 16)]
    return [ProbeCall(CAUSAL, {"seq_len": n, "device": "cpu" if i % 2 else None}) for i, n in enumerate(sizes)]


def _padding_calls(gen: torch.Generator) -> list[ProbeCall]:
    calls = []
    for i in range(6):
        batch, seq_len = _int(gen, 1, 5), _int(gen, 1, 8)
        lengths = [_int(gen, 0, seq_len) for _ in range(batch)]
        lengths[0] = (0, seq_len)[i % 2]  # the edges: all padding, no padding
        # A list, an int64 tensor and an int32 tensor, in turn.
        as_given: list[int] | torch.Tensor = (
            lengths if i % 3 == 0 else torch.tensor(lengths, dtype=(torch.int64, torch.int32)[i % 3 - 1]))
        calls.append(ProbeCall(PADDING, {"lengths": as_given, "seq_len": seq_len}))
    return calls


def _built_masks_calls(gen: torch.Generator) -> list[ProbeCall]:
    calls = []
    for i in range(4):
        lead = (_int(gen, 1, 3),) + ((_int(gen, 1, 3),) if i % 2 else ())  # (batch,) or (batch, heads)
        n, d_k, d_v = _int(gen, 2, 6), _int(gen, 2, 8), _int(gen, 1, 5)
        lengths = [_int(gen, 1, n) for _ in range(lead[0])]
        kwargs: dict = _qkv(gen, lead, n, n, d_k, d_v)
        # Causal alone, causal and padding (a decoder), padding alone (an encoder).
        kwargs |= {"lengths": None if i == 0 else lengths if i % 2 else torch.tensor(lengths), "causal": i != 3}
        calls.append(ProbeCall(BUILT_MASKS, kwargs))
    return calls


def _fully_blocked_calls(gen: torch.Generator) -> list[ProbeCall]:
    calls = _attention_calls(gen, 4, masked=True, blocked_rows=2)
    # An empty sequence in a batch: a (batch, 1, n_k) padding mask whose first row is all padding.
    for _ in range(2):
        batch, n_q, n_k, d = _int(gen, 2, 3), _int(gen, 1, 4), _int(gen, 2, 5), _int(gen, 2, 6)
        lengths = torch.tensor([0] + [_int(gen, 1, n_k) for _ in range(batch - 1)])
        mask = (torch.arange(n_k) >= lengths[:, None])[:, None, :]
        calls.append(ProbeCall(ATTENTION, _qkv(gen, (batch,), n_q, n_k, d, d + 1) | {"mask": mask}))
    return calls


def _gradient_calls(gen: torch.Generator) -> list[ProbeCall]:
    calls = []
    for i in range(5):
        lead, (n_q, n_k, d_k, d_v) = _leading(gen), _random_sizes(gen)
        kwargs: dict = _qkv(gen, lead, n_q, n_k, d_k, d_v)
        kwargs["upstream"] = torch.randn(*lead, n_q, d_v, generator=gen)
        if i > 0:  # the first without a mask; the others with one blocked row or none
            kwargs["mask"] = _mask(gen, lead, n_q, n_k, blocked_rows=i % 2)
        calls.append(ProbeCall(GRADIENTS, kwargs))
    return calls


def _dropout_calls(gen: torch.Generator, *, train: bool, count: int) -> list[ProbeCall]:
    calls = []
    for _ in range(count):
        p = (0.1, 0.25, 0.5, 0.75)[_int(gen, 0, 3)]
        seed = _int(gen, 0, 2**31 - 1)
        calls += _attention_calls(gen, 1, masked=True, dropout_p=p, train=train, seed=seed)
    return calls


def _dropout_usage_calls(gen: torch.Generator) -> list[ProbeCall]:
    calls = []
    for i in range(3):
        lead, (n_q, n_k, d_k, d_v) = _leading(gen), _random_sizes(gen)
        kwargs: dict = _qkv(gen, lead, n_q, n_k, d_k, d_v)
        if i:
            kwargs["mask"] = _mask(gen, lead, n_q, n_k)
        calls.append(ProbeCall(DROPOUT_USAGE, kwargs))
    return calls


def _device_calls(gen: torch.Generator) -> list[ProbeCall]:
    seq_len = _int(gen, 2, 6)
    return [ProbeCall(DEVICES, {"seq_len": seq_len, "lengths": [_int(gen, 0, seq_len) for _ in range(3)]})]


# --- comparisons ---

def _attention_close(atol: float = 1e-5, rtol: float = 1e-4) -> Compare:
    return all_of(tensors_close("output", atol=atol, rtol=rtol), tensors_close("weights", atol=atol, rtol=rtol))


def _devices_agree(submitted: object, expected: object) -> str | None:
    """The causal mask on the asked device; the padding mask on the lengths'
    device, or "unknown" (code that reads the lengths' values cannot be
    judged on the meta device, and works on a GPU)."""
    if not isinstance(submitted, dict) or not isinstance(expected, dict):
        return "the result is missing a part"
    if submitted.get("causal") != expected["causal"]:
        return "causal_mask ignores its device argument"
    if submitted.get("padding") not in (expected["padding"], "unknown"):
        return "padding_mask is not created on the device of lengths"
    return None


CHECKS = [
    Check(
        id="03-causal-mask",
        weight=1.5,
        message=text("causal_mask: a bool (n, n) mask, True strictly above the diagonal, for many sizes",
                     "causal_mask：多种长度下返回 bool 类型 (n, n) 掩码，仅在对角线以上为 True"),
        calls=_causal_calls,
        compare=tensors_close(),
        pitfalls=("mask-off-by-one", "mask-inverted"),
    ),
    Check(
        id="03-padding-mask",
        weight=1.5,
        message=text("padding_mask: a bool (batch, seq_len) mask from a list or an integer tensor of lengths, "
                     "including lengths 0 and seq_len; the lengths are not modified",
                     "padding_mask：由长度列表或整数张量生成 bool 类型 (batch, seq_len) 掩码，包括长度为 0 和 "
                     "seq_len 的情况；不修改 lengths"),
        calls=_padding_calls,
        compare=all_of(tensors_close("mask"), plain_equal("lengths_unchanged", reason="modified lengths")),
        pitfalls=("mask-inverted",),
        seed=1,
    ),
    Check(
        id="03-random-shapes",
        weight=3,
        message=text("attention without a mask: output and weights for random shapes, with 0 to 3 batch/head "
                     "dimensions, n_q != n_k and d_v != d_k",
                     "无掩码注意力：随机形状（0 到 3 个 batch/head 维，n_q ≠ n_k，d_v ≠ d_k）下的输出与权重"),
        calls=lambda gen: _attention_calls(gen, 10, masked=False),
        compare=_attention_close(),
        pitfalls=("missing-scale", "scale-by-d", "softmax-wrong-dim"),
        seed=2,
    ),
    Check(
        id="03-random-masks",
        weight=2,
        message=text("attention with random masks that broadcast to the scores (fewer dimensions, size-1 "
                     "dimensions); every query sees at least one key",
                     "随机掩码（维数更少或含大小为 1 的维度，可广播到分数形状）下的注意力；每个 query 至少能看到一个 key"),
        calls=lambda gen: _attention_calls(gen, 8, masked=True),
        compare=_attention_close(),
        pitfalls=("mask-inverted", "mask-after-softmax", "softmax-wrong-dim"),
        seed=3,
    ),
    Check(
        id="03-built-masks",
        weight=1.5,
        message=text("attention with masks built by your causal_mask and padding_mask, alone and combined "
                     "(causal | padding), on batched and multi-head inputs",
                     "用你自己的 causal_mask 和 padding_mask 生成的掩码（单独或组合 causal | padding）在批量和多头输入上做注意力"),
        calls=_built_masks_calls,
        compare=all_of(tensors_close("mask"), _attention_close()),
        pitfalls=("mask-off-by-one", "mask-inverted", "mask-after-softmax"),
        seed=4,
    ),
    Check(
        id="03-fully-blocked-rows",
        weight=2,
        message=text("a query whose keys are all blocked (including an empty sequence) gets all-zero weights and "
                     "a zero output, not NaN and not uniform weights",
                     "所有 key 都被遮蔽的 query（包括空序列）得到全 0 权重与全 0 输出，而不是 NaN 或均匀权重"),
        calls=_fully_blocked_calls,
        compare=_attention_close(),
        pitfalls=("softmax-all-masked-nan", "mask-minus-1e9"),
        seed=5,
    ),
    Check(
        id="03-large-scores",
        weight=1,
        message=text("very large scores (hundreds), with and without a mask: finite weights and outputs, no overflow",
                     "非常大的分数（数百），有无掩码：权重和输出都是有限值，不溢出"),
        calls=_large_score_calls,
        compare=_attention_close(atol=1e-4, rtol=1e-3),
        pitfalls=("softmax-overflow",),
        seed=14,
    ),
    Check(
        id="03-gradients",
        weight=1.5,
        message=text("gradients with respect to query, key and value, with and without masks, "
                     "finite through fully blocked rows",
                     "关于 query、key、value 的梯度（有无掩码），经过整行被遮蔽的行时仍为有限值"),
        calls=_gradient_calls,
        compare=all_of(*(tensors_close(name) for name in ("query", "key", "value"))),
        pitfalls=("softmax-all-masked-nan", "missing-scale", "scale-by-d"),
        seed=6,
    ),
    Check(
        id="03-float16",
        message=text("float16 inputs with a mask: no overflow, the dtype is kept",
                     "带掩码的 float16 输入：不溢出，保持 dtype"),
        calls=lambda gen: _attention_calls(gen, 3, masked=True, dtype=torch.float16),
        # Half precision: submission and reference may round differently.
        compare=_attention_close(atol=3e-3, rtol=1e-2),
        pitfalls=("mask-minus-1e9",),
        seed=7,
    ),
    Check(
        id="03-float64",
        message=text("float64 inputs with a mask keep their dtype and full precision",
                     "带掩码的 float64 输入保持其 dtype 与精度"),
        calls=lambda gen: _attention_calls(gen, 4, masked=True, dtype=torch.float64),
        compare=_attention_close(atol=1e-10, rtol=1e-9),
        seed=8,
    ),
    Check(
        id="03-dropout-train",
        weight=1.5,
        message=text("with nn.Dropout in training mode, the weights and output equal the correct weights with the "
                     "same dropout applied (same random seed)",
                     "训练模式下使用 nn.Dropout 时，权重与输出等于对正确权重施加相同 dropout（相同随机种子）的结果"),
        calls=lambda gen: _dropout_calls(gen, train=True, count=4),
        compare=_attention_close(),
        pitfalls=("dropout-typo", "dropout-before-softmax"),
        seed=9,
    ),
    Check(
        id="03-dropout-eval",
        weight=0.5,
        message=text("with nn.Dropout in evaluation mode, nothing is dropped",
                     "评估模式下使用 nn.Dropout 时不丢弃任何权重"),
        calls=lambda gen: _dropout_calls(gen, train=False, count=2),
        compare=_attention_close(),
        pitfalls=("dropout-in-eval",),
        seed=10,
    ),
    Check(
        id="03-dropout-placement",
        message=text("the dropout module is called once, on the weights after the softmax; the weights returned "
                     "and multiplied with the values are those after dropout",
                     "dropout 模块只调用一次，作用于 softmax 之后的权重；返回并与 value 相乘的是 dropout 之后的权重"),
        calls=_dropout_usage_calls,
        compare=all_of(plain_equal("calls", reason="the dropout module was not called exactly once"),
                       tensors_close("seen"), _attention_close()),
        pitfalls=("dropout-typo", "mask-after-softmax", "dropout-before-softmax"),
        seed=11,
    ),
    Check(
        id="03-mask-devices",
        weight=0.5,
        message=text("causal_mask creates the mask on the device it is given; padding_mask on the device of lengths",
                     "causal_mask 在指定设备上创建掩码；padding_mask 在 lengths 所在设备上创建掩码"),
        calls=_device_calls,
        compare=_devices_agree,
        pitfalls=("mask-cpu-loop",),
        seed=12,
    ),
    Check(
        id="03-inputs-unchanged",
        weight=0.5,
        message=text("query, key, value and mask are not modified (with a mask and dropout)",
                     "不修改 query、key、value 和 mask（带掩码和 dropout 时）"),
        calls=lambda gen: _dropout_calls(gen, train=True, count=2),
        # Judged on the inputs only: a mistake in the values is the value
        # checks' to report, not "modified its inputs" (issue 31).
        compare=plain_equal("inputs_unchanged", reason="modified its inputs"),
        seed=13,
    ),
    no_forbidden_calls("03", requires=("03-random-shapes",), kernels=("fused attention",)),
]


# The six 3-d word vectors of seed 001 ("Your journey starts with one step"),
# public in exercise 02: the student's causal weights drawn next to the expected.
# The sequence is left-padded (the first word is padding), so the first query
# sees no key at all: a fully blocked row, where -1e9 instead of -inf shows
# as uniform weights instead of zeros.
_LEFT_PADDED_CAUSAL = torch.triu(torch.ones(6, 6, dtype=torch.bool), diagonal=1) | (torch.arange(6) == 0)
_SEED_WORDS = torch.tensor([[0.43, 0.15, 0.89], [0.55, 0.87, 0.66], [0.57, 0.85, 0.64],
                            [0.22, 0.58, 0.33], [0.77, 0.25, 0.10], [0.05, 0.80, 0.55]])
FIGURES = [
    Figure(
        name="causal-weights",
        title=text("causal attention weights on seed 001's six words, the first one padding, so that the first "
                   "query sees no key (rows: queries, columns: keys)",
                   "seed 001 六个词上的因果注意力权重，第一个词是填充，因此第一个 query 看不到任何 key"
                   "（行：query，列：key）"),
        call=ProbeCall("coursekit.probes.masking:attention_output",
                       {"query": _SEED_WORDS, "key": _SEED_WORDS, "value": _SEED_WORDS, "mask": _LEFT_PADDED_CAUSAL}),
        path=("weights",),
    ),
]

# Masks made on the right device count only once the masks are right;
# inputs left alone, once masked attention computes its values (that check
# is judged on the inputs only).
CHECKS = requiring(CHECKS, {
    "03-mask-devices": ("03-causal-mask", "03-padding-mask"),
    "03-inputs-unchanged": ("03-random-masks",),
})

# The exercise forbids scaled_dot_product_attention: every call is recorded,
# and one that runs a fused attention kernel fails its check.
CHECKS = observing(CHECKS, (FUSED_ATTENTION,))
