"""Hidden checks of exercise 08 (MultiHeadedAttention, PositionwiseFeedForward,
AddNorm).

Every probe loads explicit seeded weights by the contract's names, so a
correct solution that creates its layers in another order still passes.
"""
from __future__ import annotations

import torch

from coursekit.probes.layers import (add_norm_parameter_shapes, attention_parameter_shapes,
                                     feed_forward_parameter_shapes, random_weights)
from grader.checks import FUSED_ATTENTION, observing, requiring
from grader.checks import Check, Compare, all_of, no_forbidden_calls, text
from grader.checks import deep_close, error_type_equal, facts_equal
from grader.checks.devices import device_check, placement_call
from grader.sandbox import ProbeCall

PROBES = "coursekit.probes.layers"
STRUCTURE = f"{PROBES}:structure_of"
CONSTRUCTOR_ERROR = f"{PROBES}:constructor_error_of"
ATTENTION = f"{PROBES}:attention_output"
ATTENTION_GRADS = f"{PROBES}:attention_gradients"
ATTENTION_TRAIN = f"{PROBES}:attention_train_eval"
FFN = f"{PROBES}:feed_forward_output"
FFN_TRAIN = f"{PROBES}:feed_forward_train_eval"
ADD_NORM = f"{PROBES}:add_norm_output"
ADD_NORM_TRAIN = f"{PROBES}:add_norm_train_eval"
ENCODER_LAYER = f"{PROBES}:encoder_layer_output"
BLOCK = f"{PROBES}:block_run"

HEAD_PITFALLS = ("view-no-transpose", "merge-wrong-order", "view-without-contiguous", "no-out-proj")
# Where wrong attention values first show: the head split and merge, and
# the scale. Later checks (masks, gradients, dropout) declare only what is
# specific to them; a head bug there is still shown, as confirmed.
ATTENTION_PITFALLS = (*HEAD_PITFALLS, "scale-by-d")
F64 = {"atol": 1e-10, "rtol": 1e-9}

loaded = facts_equal("load", reason="its parameter names differ from the contract's, so weights do not load")
unchanged = facts_equal("inputs_unchanged", reason="modified an input or the mask in place")


def _int(gen: torch.Generator, low: int, high: int) -> int:
    """A uniform int in [low, high]."""
    return int(torch.randint(low, high + 1, (1,), generator=gen))


def _randn(gen: torch.Generator, *shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.randn(*shape, generator=gen).to(dtype)


def _size(gen: torch.Generator, one_head: bool = False) -> tuple[int, int]:
    """(d_model, num_heads): 2 to 4 heads of 1 to 5 features (odd sizes too)."""
    heads = 1 if one_head else _int(gen, 2, 4)
    return heads * _int(gen, 1, 5), heads


def _mha_weights(gen: torch.Generator, d_model: int, bias: bool = True) -> dict:
    return random_weights(attention_parameter_shapes(d_model, bias), seed=_int(gen, 0, 10_000))


# --- masks (bool, True = blocked) ----------------------------------------------

def _causal(n: int) -> torch.Tensor:
    return torch.triu(torch.ones(n, n, dtype=torch.bool), diagonal=1)


def _random_mask(gen: torch.Generator, *shape: int) -> torch.Tensor:
    """Random blocks, every row keeping at least one key open."""
    mask = torch.rand(*shape, generator=gen) < 0.4
    open_key = torch.randint(0, shape[-1], (*shape[:-1], 1), generator=gen)
    return mask.scatter(-1, open_key, False)


def _padding(gen: torch.Generator, b: int, n_k: int, empty: int | None = None) -> torch.Tensor:
    """(b, 1, n_k) key padding; example ``empty`` is all padding."""
    lengths = torch.randint(1, n_k + 1, (b,), generator=gen)
    if empty is not None:
        lengths[empty] = 0
    return (torch.arange(n_k) >= lengths[:, None]).unsqueeze(1)


# --- calls ---------------------------------------------------------------------

def _structures(gen: torch.Generator) -> list[ProbeCall]:
    configs = [("MultiHeadedAttention", [8, 2], {}), ("MultiHeadedAttention", [6, 3], {"bias": False}),
               ("MultiHeadedAttention", [5, 1], {"dropout": 0.1}), ("PositionwiseFeedForward", [6, 10], {}),
               ("AddNorm", [7], {})]
    return [ProbeCall(STRUCTURE, {"class_name": c, "args": a, "kwargs": k}) for c, a, k in configs]


def _constructor_errors(gen: torch.Generator) -> list[ProbeCall]:
    sizes = [(6, 4), (8, 3), (5, 2), (8, 2), (7, 7), (6, 1)]
    return [ProbeCall(CONSTRUCTOR_ERROR, {"class_name": "MultiHeadedAttention", "args": list(s)}) for s in sizes]


def _attention_call(gen: torch.Generator, d_model: int, heads: int, query: torch.Tensor, key: torch.Tensor,
                    value: torch.Tensor, mask: torch.Tensor | None = None, bias: bool = True) -> ProbeCall:
    return ProbeCall(ATTENTION, {"d_model": d_model, "num_heads": heads, "weights": _mha_weights(gen, d_model, bias),
                                 "query": query, "key": key, "value": value, "mask": mask, "bias": bias})


def _self_attention(gen: torch.Generator) -> list[ProbeCall]:
    calls = []
    for i in range(6):
        d_model, heads = _size(gen, one_head=i == 5)
        x = _randn(gen, _int(gen, 1, 3), _int(gen, 2, 6), d_model)
        calls.append(_attention_call(gen, d_model, heads, x, x, x))
    return calls


def _cross_attention(gen: torch.Generator, bias: bool = True, count: int = 6) -> list[ProbeCall]:
    calls = []
    for i in range(count):
        d_model, heads = _size(gen)
        b = _int(gen, 1, 3)
        n_q = 1 if i == 0 else _int(gen, 2, 5)   # a single query (a decoder's first step)
        n_k = 1 if i == 1 else n_q + _int(gen, 1, 3)
        memory = _randn(gen, b, n_k, d_model)
        value = memory if i % 2 else _randn(gen, b, n_k, d_model)  # key and value from different tensors
        calls.append(_attention_call(gen, d_model, heads, _randn(gen, b, n_q, d_model), memory, value, bias=bias))
    return calls


# Inputs this many times larger make the scores ~60 times larger than in the
# other checks (hundreds): exp() overflows float32 unless the softmax
# subtracts each row's maximum first, as torch.softmax and nn.MultiheadAttention do.
LARGE = 8.0


def _large_scores(gen: torch.Generator) -> list[ProbeCall]:
    """Self-attention and masked cross-attention on large inputs."""
    calls = []
    for i in range(4):
        d_model, heads = _size(gen)
        b, n_q, n_k = _int(gen, 1, 3), _int(gen, 2, 5), _int(gen, 2, 6)
        x = _randn(gen, b, n_q, d_model) * LARGE
        if i % 2:
            memory = _randn(gen, b, n_k, d_model) * LARGE
            calls.append(_attention_call(gen, d_model, heads, x, memory, memory, _padding(gen, b, n_k)))
        else:
            calls.append(_attention_call(gen, d_model, heads, x, x, x))
    return calls


def _placements(gen: torch.Generator) -> list[ProbeCall]:
    """Forward passes on the meta device, with the accepted mask shapes."""
    calls = []
    for mask_kind in ("padding", "causal", "none"):
        d_model, heads = _size(gen)
        b, n = _int(gen, 1, 3), _int(gen, 2, 5)
        x = _randn(gen, b, n, d_model)
        mask = {"padding": _padding(gen, b, n), "causal": _causal(n), "none": None}[mask_kind]
        calls.append(placement_call("MultiHeadedAttention", {}, x, x, x, mask, init_args=(d_model, heads)))
    return calls


def _masked(gen: torch.Generator) -> list[ProbeCall]:
    calls = []
    d_model, heads = _size(gen)
    x = _randn(gen, 2, 5, d_model)
    calls.append(_attention_call(gen, d_model, heads, x, x, x, _causal(5)))                       # (n, n)
    d_model, heads = _size(gen)
    q, memory = _randn(gen, 3, 4, d_model), _randn(gen, 3, 6, d_model)
    calls.append(_attention_call(gen, d_model, heads, q, memory, memory, _random_mask(gen, 4, 6)))  # (n_q, n_k)
    calls.append(_attention_call(gen, d_model, heads, q, memory, memory, _padding(gen, 3, 6)))     # (b, 1, n_k)
    d_model, heads = _size(gen)
    x = _randn(gen, 2, 5, d_model)
    per_example = _causal(5) | _padding(gen, 2, 5)                                                  # (b, n_q, n_k)
    calls.append(_attention_call(gen, d_model, heads, x, x, x, per_example))
    calls.append(_attention_call(gen, d_model, heads, x, x, x, _random_mask(gen, 2, 1, 5, 5)))     # (b, 1, n_q, n_k)
    calls.append(_attention_call(gen, d_model, heads, x, x, x, _random_mask(gen, 2, heads, 5, 5)))  # (b, h, n_q, n_k)
    return calls


def _fully_blocked(gen: torch.Generator) -> list[ProbeCall]:
    d_model, heads = _size(gen)
    q, memory = _randn(gen, 3, 4, d_model), _randn(gen, 3, 5, d_model)
    rows = _random_mask(gen, 4, 5)
    rows[1] = True
    per_head = _random_mask(gen, 2, heads, 4, 4)
    per_head[1, -1, 2] = True
    x = _randn(gen, 2, 4, d_model)
    return [_attention_call(gen, d_model, heads, q, memory, memory, _padding(gen, 3, 5, empty=1)),
            _attention_call(gen, d_model, heads, q, memory, memory, rows),
            _attention_call(gen, d_model, heads, x, x, x, per_head)]


def _gradients(gen: torch.Generator) -> list[ProbeCall]:
    calls = []
    for mask_kind in ("causal", "padding", "empty"):
        d_model, heads = _size(gen)
        b, n_q = 2, _int(gen, 2, 5)
        n_k = n_q if mask_kind == "causal" else n_q + 1
        q, k, v = _randn(gen, b, n_q, d_model), _randn(gen, b, n_k, d_model), _randn(gen, b, n_k, d_model)
        mask = _causal(n_q) if mask_kind == "causal" else _padding(gen, b, n_k, 0 if mask_kind == "empty" else None)
        calls.append(ProbeCall(ATTENTION_GRADS, {
            "d_model": d_model, "num_heads": heads, "weights": _mha_weights(gen, d_model),
            "query": q, "key": k, "value": v, "upstream": _randn(gen, b, n_q, d_model), "mask": mask}))
    return calls


def _block(class_name: str, args: list, weights: dict, inputs: list, *, upstream: torch.Tensor | None = None,
           dtype: torch.dtype | None = None, train: bool = False, seed: int = 0, **kwargs: object) -> ProbeCall:
    return ProbeCall(BLOCK, {"class_name": class_name, "args": args, "kwargs": kwargs, "weights": weights,
                             "inputs": inputs, "upstream": upstream, "dtype": dtype, "train": train, "seed": seed})


def _dropout(gen: torch.Generator) -> list[ProbeCall]:
    calls = []
    for p in (0.2, 0.5):
        d_model, heads = _size(gen)
        calls.append(ProbeCall(ATTENTION_TRAIN, {"d_model": d_model, "num_heads": heads, "dropout": p,
                                                 "weights": _mha_weights(gen, d_model),
                                                 "x": _randn(gen, 2, _int(gen, 2, 5), d_model)}))
    # Cross-attention with a per-example mask in training mode, gradients too.
    d_model, heads = _size(gen)
    q, memory = _randn(gen, 2, 3, d_model), _randn(gen, 2, 5, d_model)
    calls.append(_block("MultiHeadedAttention", [d_model, heads], _mha_weights(gen, d_model),
                        [q, memory, memory, _random_mask(gen, 2, 3, 5)], upstream=_randn(gen, 2, 3, d_model),
                        train=True, seed=5, dropout=0.3))
    return calls


def _float64(gen: torch.Generator) -> list[ProbeCall]:
    f64 = torch.float64
    d_model, heads = _size(gen)
    q, memory = _randn(gen, 2, 3, d_model, dtype=f64), _randn(gen, 2, 4, d_model, dtype=f64)
    attention = _block("MultiHeadedAttention", [d_model, heads], _mha_weights(gen, d_model),
                       [q, memory, memory, _padding(gen, 2, 4)], upstream=_randn(gen, 2, 3, d_model, dtype=f64),
                       dtype=f64)
    ffn = _block("PositionwiseFeedForward", [5, 9], random_weights(feed_forward_parameter_shapes(5, 9), seed=3),
                 [_randn(gen, 2, 3, 5, dtype=f64)], upstream=_randn(gen, 2, 3, 5, dtype=f64), dtype=f64)
    add_norm = _block("AddNorm", [6], random_weights(add_norm_parameter_shapes(6), seed=4),
                      [_randn(gen, 2, 3, 6, dtype=f64), _randn(gen, 2, 3, 6, dtype=f64)],
                      upstream=_randn(gen, 2, 3, 6, dtype=f64), dtype=f64)
    return [attention, ffn, add_norm]


def _feed_forward(gen: torch.Generator) -> list[ProbeCall]:
    calls = []
    for _ in range(3):
        d_model, d_ff = _int(gen, 1, 8), _int(gen, 1, 20)
        calls.append(ProbeCall(FFN, {"d_model": d_model, "d_ff": d_ff, "x": _randn(gen, _int(gen, 1, 3), 4, d_model),
                                     "weights": random_weights(feed_forward_parameter_shapes(d_model, d_ff), 7)}))
    weights = random_weights(feed_forward_parameter_shapes(6, 12), seed=8)
    x = _randn(gen, 2, 3, 6)
    calls.append(ProbeCall(FFN_TRAIN, {"d_model": 6, "d_ff": 12, "dropout": 0.4, "weights": weights, "x": x}))
    calls.append(_block("PositionwiseFeedForward", [6, 12], weights, [x], upstream=_randn(gen, 2, 3, 6),
                        train=True, seed=3, dropout=0.3))
    return calls


def _add_norm(gen: torch.Generator) -> list[ProbeCall]:
    calls = []
    for _ in range(3):
        d_model, b, n = _int(gen, 2, 9), _int(gen, 1, 3), _int(gen, 1, 5)
        calls.append(ProbeCall(ADD_NORM, {"d_model": d_model, "x": _randn(gen, b, n, d_model),
                                          "sublayer_out": _randn(gen, b, n, d_model) * 3,
                                          "weights": random_weights(add_norm_parameter_shapes(d_model), 9)}))
    weights = random_weights(add_norm_parameter_shapes(6), seed=10)
    x, s = _randn(gen, 2, 4, 6), _randn(gen, 2, 4, 6)
    calls.append(ProbeCall(ADD_NORM_TRAIN, {"d_model": 6, "dropout": 0.5, "weights": weights,
                                            "x": x, "sublayer_out": s}))
    calls.append(_block("AddNorm", [6], weights, [x, s], upstream=_randn(gen, 2, 4, 6), train=True, seed=4,
                        dropout=0.3))
    return calls


def _encoder_layer(gen: torch.Generator) -> list[ProbeCall]:
    calls = []
    for masked in (False, True):
        d_model, heads = _size(gen)
        d_ff = _int(gen, 4, 16)
        weights = {}
        for prefix, shapes in (("self_attn", attention_parameter_shapes(d_model)),
                               ("feed_forward", feed_forward_parameter_shapes(d_model, d_ff)),
                               ("add_norm1", add_norm_parameter_shapes(d_model)),
                               ("add_norm2", add_norm_parameter_shapes(d_model))):
            weights |= {f"{prefix}.{k}": v for k, v in random_weights(shapes, _int(gen, 0, 10_000)).items()}
        mask = _padding(gen, 3, 5) if masked else None
        calls.append(ProbeCall(ENCODER_LAYER, {"d_model": d_model, "num_heads": heads, "d_ff": d_ff,
                                               "weights": weights, "x": _randn(gen, 3, 5, d_model), "mask": mask}))
    return calls


structure_compare: Compare = all_of(
    facts_equal("hidden_lists", reason="keeps sub-modules in a plain list, hidden from parameters()"),
    facts_equal("parameters", "state_dict_keys",
                reason="parameter names or shapes differ from the contract (see the README's attribute table)"),
)
attention_compare = all_of(loaded, unchanged, deep_close())

CHECKS = [
    Check(id="08-parameters", weight=1,
          message=text("parameter names and shapes of the three blocks (with and without bias), and state_dict keys",
                       "三个组件的参数名与形状（含与不含 bias）以及 state_dict 的键"),
          calls=_structures, compare=structure_compare, pitfalls=("no-out-proj", "qkv-bias-ignored")),
    Check(id="08-heads-divide", weight=0.5,
          message=text("MultiHeadedAttention raises ValueError when num_heads does not divide d_model, and only then",
                       "仅当 num_heads 不能整除 d_model 时 MultiHeadedAttention 抛出 ValueError"),
          calls=_constructor_errors, compare=error_type_equal(), seed=1),
    Check(id="08-self-attention", weight=3,
          message=text("self-attention: output and per-head weights (attn) for random sizes and 1 to 4 heads; "
                       "inputs left unchanged",
                       "自注意力：随机尺寸、1 到 4 个头时的输出与各头的注意力权重 (attn)；不修改输入"),
          calls=_self_attention, compare=attention_compare, pitfalls=ATTENTION_PITFALLS, seed=2),
    Check(id="08-cross-attention", weight=2,
          message=text("cross-attention: n_q != n_k (a single query or key too), key and value from different tensors",
                       "交叉注意力：n_q != n_k（含只有一个 query 或一个 key），key 与 value 来自不同张量"),
          calls=_cross_attention, compare=attention_compare, pitfalls=ATTENTION_PITFALLS, seed=3),
    Check(id="08-no-bias", weight=1,
          message=text("MultiHeadedAttention with bias=False", "bias=False 时的 MultiHeadedAttention"),
          calls=lambda gen: _cross_attention(gen, bias=False, count=3), compare=attention_compare,
          pitfalls=ATTENTION_PITFALLS, seed=4),
    Check(id="08-masks", weight=3,
          message=text("every accepted mask shape: (n_q, n_k), (b, 1, n_k), (b, n_q, n_k), (b, 1, n_q, n_k) and "
                       "(b, h, n_q, n_k); blocked weights exactly 0; the mask left unchanged",
                       "所有支持的掩码形状：(n_q, n_k)、(b, 1, n_k)、(b, n_q, n_k)、(b, 1, n_q, n_k) 与 "
                       "(b, h, n_q, n_k)；被遮蔽的权重恰好为 0；不修改掩码"),
          calls=_masked, compare=attention_compare, pitfalls=("mask-inverted",), seed=5),
    Check(id="08-fully-blocked", weight=1,
          message=text("queries with every key blocked (a fully padded example, a blocked row, one head's row) "
                       "get zero weights and no NaN",
                       "所有 key 都被遮蔽的 query（整条样本都是填充、某一行被遮蔽、某个头的某一行）权重为 0，且没有 NaN"),
          calls=_fully_blocked, compare=attention_compare, seed=6,
          pitfalls=("softmax-all-masked-nan", "mask-minus-1e9")),
    Check(id="08-attention-gradients", weight=2,
          message=text("gradients with respect to query, key, value and every parameter, with masks "
                       "(a fully padded example included)",
                       "带掩码时（含整条样本都是填充）对 query、key、value 及每个参数的梯度"),
          calls=_gradients, compare=deep_close(), seed=7),
    Check(id="08-attention-dropout", weight=2,
          message=text("training mode: dropout on the attention weights after the softmax (attn holds them), "
                       "the same random mask as nn.Dropout; none in eval mode",
                       "训练模式：在 softmax 之后对注意力权重做 dropout（attn 保存的就是它），随机掩码与 nn.Dropout 相同；"
                       "eval 模式下不做 dropout"),
          calls=_dropout, compare=all_of(unchanged, deep_close()), pitfalls=("dropout-before-softmax",), seed=8),
    Check(id="08-float64", weight=1,
          message=text("the three blocks converted with .to(torch.float64): float64 outputs and gradients at float64 "
                       "precision",
                       "经 .to(torch.float64) 转换后的三个组件：输出与梯度为 float64 且达到 float64 精度"),
          calls=_float64, compare=deep_close(**F64), seed=9),
    Check(id="08-feed-forward", weight=2,
          message=text("PositionwiseFeedForward: values for random sizes; dropout between ReLU and linear2 in "
                       "training mode only; gradients",
                       "PositionwiseFeedForward：随机尺寸下的数值；仅在训练模式下于 ReLU 与 linear2 之间做 dropout；梯度"),
          calls=_feed_forward, compare=all_of(loaded, unchanged, deep_close()), seed=10),
    Check(id="08-add-norm", weight=2,
          message=text("AddNorm: LayerNorm(x + dropout(sublayer_out)) for random sizes; dropout on the sublayer "
                       "output only, in training mode only; gradients",
                       "AddNorm：随机尺寸下的 LayerNorm(x + dropout(sublayer_out))；只对子层输出做 dropout，且仅在训练模式下；梯度"),
          calls=_add_norm, compare=all_of(loaded, unchanged, deep_close()), pitfalls=("residual-missing",), seed=11),
    Check(id="08-encoder-layer", weight=1,
          message=text("the three blocks composed into a post-norm encoder layer, with and without a padding mask",
                       "三个组件组合成后归一化的编码器层，带与不带填充掩码"),
          calls=_encoder_layer, compare=deep_close(), pitfalls=("residual-missing",), seed=12),
    Check(id="08-large-scores", weight=1,
          message=text("very large scores (hundreds), with and without a padding mask: finite weights and outputs, "
                       "as nn.MultiheadAttention gives (a softmax must subtract each row's maximum)",
                       "非常大的分数（数百），有无填充掩码：权重与输出都是有限值，与 nn.MultiheadAttention 一致"
                       "（softmax 需要先减去每行的最大值）"),
          calls=_large_scores, compare=all_of(loaded, unchanged, deep_close(atol=1e-4, rtol=1e-3)),
          pitfalls=("softmax-overflow",), seed=13),
    Check(id="08-attn-before-forward", weight=0.5,
          message=text("MultiHeadedAttention has its attn attribute from __init__ on: None until the first forward",
                       "MultiHeadedAttention 从 __init__ 起就有 attn 属性：第一次前向计算之前为 None"),
          calls=lambda gen: [ProbeCall(f"{PROBES}:attention_attributes", {"d_model": 6, "num_heads": 2})],
          compare=facts_equal("attn", reason="attn does not exist, or is not None, before the first forward "
                              "(set self.attn = None in __init__)"), seed=14),
    device_check("08-device", _placements, owner="MultiHeadedAttention", pitfalls=("mask-cpu-loop",), seed=15),
    no_forbidden_calls("08", requires=("08-self-attention",), kernels=("fused attention",)),
]

# Parameters and the constructor's error count only once attention computes its output.
CHECKS = requiring(CHECKS, {
    "08-device": ("08-self-attention",),
    "08-parameters": ("08-self-attention",),
    "08-heads-divide": ("08-self-attention",),
})

# The exercise forbids scaled_dot_product_attention: every call is recorded,
# and one that runs a fused attention kernel fails its check.
CHECKS = observing(CHECKS, (FUSED_ATTENTION,))
