"""Hidden checks of exercise 17 (grouped-query attention).

Every module is built from a plain config with explicit, seeded weights by
name (coursekit.probes.gqa.random_weights), mostly in float64, and compared
with the reference's outputs on inputs drawn here. The cache is judged from
what comes back only: coursekit.probes.gqa.cached_steps gives every step a
fresh module and a clone of the keys and values the previous step returned,
so those tensors are the only state a step can use; their shape and the
bytes per token they hold are measured here, in the grader's process
(17-cache-heads), and count only once the cached outputs equal the
recomputation (17-cache-values).
"""
from __future__ import annotations

import torch

from coursekit.probes.gqa import measured_bytes_per_token, random_weights
from grader.checks import (FUSED_ATTENTION, Check, Compare, all_of, deep_close, error_type_equal,
                           no_forbidden_calls, observing, plain_equal, requiring, tensors_close, text)
from grader.checks.devices import device_check
from grader.checks.multihead import GRADIENT_COMPARE, LOADED, MHA_STATE_COMPARE, UNTOUCHED
from grader.sandbox import ProbeCall

G, M = "coursekit.probes.gqa:", "coursekit.probes.multihead:"
GQA = "GroupedQueryAttention"
F64 = {"atol": 1e-10, "rtol": 1e-9}
# (num_heads, num_kv_heads): GQA, MQA (g = 1) and MHA (g = h) among them.
HEADS = [(4, 2), (6, 3), (4, 1), (6, 2), (3, 3), (8, 2), (2, 1)]


def _int(gen: torch.Generator, low: int, high: int) -> int:
    """A random int in [low, high], both included."""
    return int(torch.randint(low, high + 1, (1,), generator=gen))


def _seed(gen: torch.Generator) -> int:
    return _int(gen, 0, 2**31 - 1)


def _randn(gen: torch.Generator, *shape: int, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    return torch.randn(*shape, generator=gen, dtype=dtype)


def gqa_config(gen: torch.Generator, heads: tuple[int, int], dropout: float = 0.0, min_context: int = 3) -> dict:
    """d_out = num_heads * head_dim (head_dim 2-4, so that a wrong scale
    shows), d_in mostly different from d_out, qkv_bias drawn."""
    h, g = heads
    return {"d_in": _int(gen, 2, 7), "d_out": h * _int(gen, 2, 4), "context_length": _int(gen, min_context, 7),
            "dropout": dropout, "num_heads": h, "num_kv_heads": g, "qkv_bias": bool(_int(gen, 0, 1))}


def _weights(gen: torch.Generator, config: dict, dtype: torch.dtype = torch.float64) -> dict:
    return random_weights(config, _seed(gen), dtype=dtype)


# ---------------------------------------------------------------- the calls


def repeat_calls(gen: torch.Generator) -> list[ProbeCall]:
    """repeat_kv on (b, g, n, hd): n_rep 1-4, g 1-3 (g = 1 is MQA), float32 and float64."""
    calls = []
    for i, (g, n_rep) in enumerate(((2, 2), (3, 2), (2, 3), (1, 4), (3, 1), (2, 4))):
        dtype = torch.float64 if i % 2 else torch.float32
        x = _randn(gen, _int(gen, 1, 3), g, _int(gen, 1, 5), _int(gen, 1, 4), dtype=dtype)
        calls.append(ProbeCall(G + "repeat_kv_output", {"x": x, "n_rep": n_rep}))
    return calls


def bytes_calls(gen: torch.Generator) -> list[ProbeCall]:
    configs = [{"num_layers": _int(gen, 1, 48), "num_kv_heads": g, "head_dim": _int(gen, 1, 8) * 16, "dtype": dtype}
               for g, dtype in ((8, "float16"), (1, "bfloat16"), (4, "float32"), (2, "float64"))]
    return [ProbeCall(G + "bytes_per_token", {"configs": configs}),
            ProbeCall(G + "bytes_per_token", {"configs": [{k: v for k, v in configs[0].items() if k != "dtype"}]})]


def forward_calls(gen: torch.Generator, heads: list[tuple[int, int]], *, shorter: bool = False,
                  dropout: float = 0.0, train: bool = False) -> list[ProbeCall]:
    """One forward pass per (num_heads, num_kv_heads), float64 (float32 with
    fixed dropout masks in training mode); the first with a batch of one."""
    calls = []
    for i, pair in enumerate(heads):
        config = gqa_config(gen, pair, dropout)
        n = _int(gen, 1, config["context_length"] - 1) if shorter else config["context_length"]
        dtype = torch.float32 if train else torch.float64
        kwargs = {"class_name": GQA, "config": config, "x": _randn(gen, 1 if i == 0 else _int(gen, 2, 3), n,
                                                                   config["d_in"], dtype=dtype),
                  "weights": _weights(gen, config, dtype), "seed": _seed(gen)}
        calls.append(ProbeCall(M + "forward_fixed_dropout", kwargs) if train
                     else ProbeCall(M + "forward_in", kwargs | {"dtype": dtype}))
    return calls


def multihead_calls(gen: torch.Generator) -> list[ProbeCall]:
    """GQA against the shipped 06 MultiHeadAttention: num_kv_heads == num_heads
    (weights copied) and groups (weights expanded)."""
    calls = []
    for pair in ((3, 3), (2, 2), (4, 4), (1, 1), (4, 2), (6, 1)):
        config = gqa_config(gen, pair)
        x = _randn(gen, _int(gen, 1, 3), config["context_length"], config["d_in"])
        calls.append(ProbeCall(G + "against_multihead", {"config": config, "seed": _seed(gen), "x": x}))
    return calls


def causal_calls(gen: torch.Generator) -> list[ProbeCall]:
    """A sequence, and the same sequence with its later tokens changed: the
    first outputs must not move (compared with the reference's, both)."""
    calls = []
    for pair in ((4, 2), (3, 1)):
        config = gqa_config(gen, pair, min_context=4)
        x = _randn(gen, 2, config["context_length"], config["d_in"])
        weights = _weights(gen, config)
        keep = _int(gen, 1, config["context_length"] - 1)
        changed = torch.cat([x[:, :keep], _randn(gen, 2, config["context_length"] - keep, config["d_in"])], dim=1)
        for inputs in (x, changed):
            calls.append(ProbeCall(M + "forward_in", {"class_name": GQA, "config": config, "x": inputs,
                                                      "weights": weights, "dtype": torch.float64}))
    return calls


def constructor_calls(gen: torch.Generator) -> list[ProbeCall]:
    """num_heads a multiple of num_kv_heads or not; d_out divisible by num_heads or not."""
    calls = []
    for d_out, h, g in ((12, 4, 3), (8, 4, 2), (12, 6, 4), (6, 3, 2), (10, 4, 2), (9, 3, 1), (12, 4, 4)):
        config = {"d_in": _int(gen, 2, 6), "d_out": d_out, "context_length": _int(gen, 2, 6), "dropout": 0.0,
                  "num_heads": h, "num_kv_heads": g}
        calls.append(ProbeCall(M + "exception_from", {"name": GQA, "args": [], "kwargs": config}))
    return calls


def state_calls(gen: torch.Generator) -> list[ProbeCall]:
    return [ProbeCall(M + "state", {"class_name": GQA, "config": gqa_config(gen, pair)})
            for pair in ((4, 2), (6, 1), (3, 3))]


def gradient_calls(gen: torch.Generator) -> list[ProbeCall]:
    calls = []
    for pair in ((4, 2), (2, 1)):
        config = gqa_config(gen, pair)
        b, n = _int(gen, 1, 3), config["context_length"]
        calls.append(ProbeCall(M + "gradients", {
            "class_name": GQA, "config": config, "x": _randn(gen, b, n, config["d_in"], dtype=torch.float32),
            "weights": _weights(gen, config, torch.float32),
            "upstream": _randn(gen, b, n, config["d_out"], dtype=torch.float32)}))
    return calls


def cache_calls(gen: torch.Generator) -> list[ProbeCall]:
    """Two sequences of different batch sizes, in alternating steps: a
    prefill (once of one token), then one token at a time or chunks, up to
    the whole context; GQA, MQA and MHA."""
    calls = []
    for index, pair in enumerate(((4, 2), (6, 3), (4, 1), (2, 2))):
        config = gqa_config(gen, pair, min_context=4)
        context = config["context_length"]
        chunks = [1 if index == 1 else _int(gen, 2, context - 2)]
        while (left := context - sum(chunks)) > 0:
            chunks.append(min(left, 1 if index % 2 == 0 else _int(gen, 1, 3)))
        xs = [_randn(gen, b, context, config["d_in"]) for b in (1, _int(gen, 2, 3))]
        calls.append(ProbeCall(G + "cached_steps", {"config": config, "seed": _seed(gen), "xs": xs,
                                                   "chunks": chunks}))
    return calls


def device_calls(gen: torch.Generator) -> list[ProbeCall]:
    """A prefill and a chunk through forward_cached (forward is a prefill), GQA and MQA."""
    calls = []
    for pair in ((4, 2), (3, 1)):
        config = gqa_config(gen, pair, min_context=4)
        x = _randn(gen, 2, config["context_length"] - 1, config["d_in"], dtype=torch.float32)
        calls.append(ProbeCall(G + "cached_placement", {"config": config, "x": x,
                                                       "prefill": _int(gen, 1, x.size(1) - 1)}))
    return calls


def cache_limit_calls(gen: torch.Generator) -> list[ProbeCall]:
    calls = []
    for pair in ((4, 2), (2, 1)):
        config = gqa_config(gen, pair)
        context = config["context_length"]
        x = _randn(gen, 2, context + _int(gen, 1, 2), config["d_in"])
        calls.append(ProbeCall(G + "cached_too_long", {"config": config, "seed": _seed(gen), "x": x,
                                                      "prefill": _int(gen, 1, context)}))
    return calls


# ---------------------------------------------------------------- comparisons


def _unchanged_input(submitted: object, expected: object) -> str | None:
    """The input after the call equals the reference's (untouched), judged
    here on the tensor, not on the child's word."""
    return deep_close(atol=0, rtol=0)(submitted["input_after"], expected["input_after"]) and "modified its input"


def _like_multihead(submitted: object, expected: object) -> str | None:
    """The submission's output against 06's MultiHeadAttention as the
    reference's run computed it (never the submission's own ``multihead``)."""
    reason = tensors_close(**F64)(submitted["output"], expected["multihead"])
    return reason and f"differs from MultiHeadAttention with the same (expanded) weights: {reason}"


def _cache_bytes(submitted: object, expected: object) -> str | None:
    """Bytes per token of every cache that came back, measured here from its
    tensors, equal the reference's (num_kv_heads heads, not num_heads)."""
    for mine, theirs in zip(submitted["caches"], expected["caches"], strict=True):
        for kv, want in zip(mine, theirs, strict=True):
            got = measured_bytes_per_token(kv)
            if got is None:
                return "forward_cached did not return the cache as (keys, values), each (b, heads, t, head_dim)"
            if got != measured_bytes_per_token(want):
                return "the cache holds more (or fewer) bytes per token than num_kv_heads key/value heads"
    return None


FORWARD = all_of(LOADED, tensors_close("output", **F64), UNTOUCHED)
FLOAT32 = all_of(LOADED, tensors_close("output"), UNTOUCHED)
CACHE_VALUES = all_of(deep_close(**F64, ignore=("caches", "inputs_unchanged")),
                      plain_equal("inputs_unchanged", reason="modified x or the keys and values handed in"))
CACHE_HEADS = all_of(_cache_bytes, deep_close(**F64, ignore=("outputs", "full", "inputs_unchanged")))
VALUE_PITFALLS = ("kv-repeat-tiled", "scale-by-kv-width", "kv-proj-full-width")


def _check(check_id: str, weight: float, seed: int, en: str, zh: str, calls, compare: Compare,
           *pitfalls: str) -> Check:
    return Check(id=check_id, weight=weight, seed=seed, message=text(en, zh), calls=calls, compare=compare,
                 pitfalls=pitfalls)


CHECKS = [
    _check("17-repeat-kv", 2, 0,
           "repeat_kv: every key/value head copied for the n_rep consecutive query heads it serves, in order "
           "(float32 and float64, MQA included); the input is left unchanged",
           "repeat_kv：每个 key/value 头按顺序复制给它服务的 n_rep 个相邻 query 头（float32 与 float64，包括 MQA）；"
           "输入保持不变",
           repeat_calls, all_of(tensors_close("output", atol=0.0, rtol=0.0), _unchanged_input), "kv-repeat-tiled"),
    _check("17-bytes-per-token", 1, 1,
           "cache_bytes_per_token for several layers, key/value heads, head sizes and dtypes (float16 by default)",
           "cache_bytes_per_token：不同层数、key/value 头数、头维度与数据类型（默认 float16）",
           bytes_calls, plain_equal("bytes", reason="wrong number of bytes")),
    _check("17-values", 4, 2,
           "GroupedQueryAttention for several (num_heads, num_kv_heads), MQA included, d_in equal to d_out or not, "
           "with and without qkv_bias, weights loaded by name, float64: output values; the input and the mask "
           "buffer are left unchanged",
           "多种 (num_heads, num_kv_heads)（包括 MQA）、d_in 与 d_out 相等或不等、有无 qkv_bias 的 "
           "GroupedQueryAttention（按名称加载权重，float64）：输出的数值；输入与掩码缓冲区保持不变",
           lambda gen: forward_calls(gen, HEADS), FORWARD, *VALUE_PITFALLS),
    _check("17-multihead", 2, 3,
           "GroupedQueryAttention equals exercise 06's MultiHeadAttention with the same weights when num_kv_heads "
           "== num_heads, and with each key/value head's weights copied for its query heads otherwise",
           "num_kv_heads == num_heads 时 GroupedQueryAttention 等于权重相同的练习 06 MultiHeadAttention；"
           "否则等于把每个 key/value 头的权重复制给它的 query 头之后的 MultiHeadAttention",
           multihead_calls, _like_multihead, "kv-repeat-tiled", "scale-by-kv-width"),
    _check("17-causal", 1.5, 4,
           "causal: inputs shorter than context_length, and a token's output does not change when later tokens do",
           "因果性：输入短于 context_length 时正确，且后面的 token 改变时前面 token 的输出不变",
           lambda gen: forward_calls(gen, [(4, 2), (3, 1), (6, 2)], shorter=True) + causal_calls(gen), FORWARD,
           "kv-repeat-tiled"),
    _check("17-divisibility", 1, 5,
           "GroupedQueryAttention raises ValueError exactly when num_heads is not a multiple of num_kv_heads or "
           "d_out is not divisible by num_heads",
           "当且仅当 num_heads 不是 num_kv_heads 的倍数、或 d_out 不能被 num_heads 整除时，GroupedQueryAttention "
           "抛出 ValueError",
           constructor_calls,
           plain_equal("raised", reason="raised ValueError when it should not, or did not when it should"),
           "kv-heads-not-divisible"),
    _check("17-state", 1, 6,
           "GroupedQueryAttention registers W_query (d_out), W_key and W_value (num_kv_heads * head_dim), out_proj "
           "and the bool causal mask buffer: parameters, buffers and state_dict keys",
           "GroupedQueryAttention 注册了 W_query（d_out）、W_key 与 W_value（num_kv_heads * head_dim）、out_proj "
           "以及布尔因果掩码缓冲区：参数、缓冲区与 state_dict 的键",
           state_calls, MHA_STATE_COMPARE, "kv-proj-full-width"),
    _check("17-dropout", 1, 7,
           "GroupedQueryAttention with dropout on the attention weights in training mode under fixed random "
           "masks, and no dropout in eval mode",
           "训练模式下、固定随机掩码时 GroupedQueryAttention 对注意力权重做 dropout；评估模式下不做 dropout",
           lambda gen: (forward_calls(gen, [(4, 2), (2, 1)], dropout=0.3, train=True)
                        + forward_calls(gen, [(4, 2)], dropout=0.5)),
           lambda s, e: (FLOAT32 if e["output"].dtype == torch.float32 else FORWARD)(s, e),
           "dropout-before-softmax", "dropout-in-eval"),
    _check("17-gradients", 1, 8,
           "GroupedQueryAttention: gradients of the input and of every parameter",
           "GroupedQueryAttention：输入与每个参数的梯度",
           gradient_calls, GRADIENT_COMPARE),
    _check("17-cache-values", 3, 9,
           "forward_cached: a prefill, then one token at a time or chunks up to the whole context, each step with "
           "only the keys and values the previous one returned: the outputs of the full recomputation (float64); "
           "the inputs are left unchanged",
           "forward_cached：先预填充，再逐个 token 或分块直到整个上下文，每一步只拿到上一步返回的 key 和 value："
           "输出等于完整重算的结果（float64）；输入保持不变",
           cache_calls, CACHE_VALUES, "cache-mask-rows", "cache-cat-heads-dim", *VALUE_PITFALLS),
    _check("17-cache-heads", 2, 10,
           "the cache forward_cached returns holds num_kv_heads key/value heads, (b, num_kv_heads, t, head_dim) "
           "each, not the repeated ones: its bytes per token, measured by the grader, fall by num_heads / "
           "num_kv_heads against multi-head attention",
           "forward_cached 返回的缓存只存 num_kv_heads 个 key/value 头，每个为 (b, num_kv_heads, t, head_dim)，"
           "而不是复制后的头：评分器测得的每 token 字节数比多头注意力少 num_heads / num_kv_heads 倍",
           cache_calls, CACHE_HEADS, "kv-cache-repeated-heads", "kv-proj-full-width"),
    _check("17-cache-limit", 0.5, 11,
           "forward_cached raises ValueError when the cached and the new tokens exceed context_length",
           "已缓存与新输入的 token 合计超过 context_length 时，forward_cached 抛出 ValueError",
           cache_limit_calls, error_type_equal()),
    device_check("17-device", device_calls, owner="GroupedQueryAttention (forward_cached)", pitfalls=(), seed=12),
    no_forbidden_calls("17", requires=("17-values",), kernels=("fused attention",)),
]

CHECKS = requiring(CHECKS, {
    # Errors raised, registered state, dropout and the cache's size count only
    # once the module computes the right thing.
    "17-divisibility": ("17-values",), "17-state": ("17-values",), "17-dropout": ("17-values",),
    "17-gradients": ("17-values",), "17-cache-limit": ("17-cache-values",),
    "17-device": ("17-values", "17-cache-values"),
    # The tensors that came back are the cache only if the steps worked from them.
    "17-cache-heads": ("17-cache-values",),
})
# The exercise forbids scaled_dot_product_attention: every call that runs
# tensor code is recorded, and one that runs a fused attention kernel fails
# its check (cache_bytes_per_token may be plain arithmetic: nothing to record).
_PLAIN = [c for c in CHECKS if c.id == "17-bytes-per-token"]
CHECKS = _PLAIN + observing([c for c in CHECKS if c not in _PLAIN], (FUSED_ATTENTION,))
