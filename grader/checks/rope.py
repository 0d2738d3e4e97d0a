"""Hidden checks of exercise 16 (rotary position embeddings).

Everything is compared in float64 with the reference's results on the same
inputs; the properties RoPE is for are judged here, in the grader's
process, from the tensors the probes return: the scores q_i·k_j stay the
same when every position shifts by the same amount, every rotated vector
keeps its norm, and attention's output does not move with that shift.
Those properties hold for the wrong pairing and the wrong frequencies too,
so they pay only beside the values (``requires``). The cached forward must
equal the reference's, which is the full recomputation, at every step, and
a cached step must cost far less than recomputing (measured from outside
the child, grader/checks/work.py, as exercise 14's).
"""
from __future__ import annotations

import torch

from grader.checks import (Check, Figure, all_of, deep_close, error_type_equal, no_forbidden_calls, plain_equal, requiring,
                           tensors_close, text)
from grader.checks.devices import device_check, placement_call
from grader.checks.work import Cost, cheaper_than_recomputing, yardstick_calls
from grader.sandbox import ProbeCall

PROBES = "coursekit.probes.rope"
F64 = {"atol": 1e-9, "rtol": 1e-7}
BASES = (10000.0, 10000.0, 500000.0, 100.0)   # LLaMA 3 uses 500,000; a small base turns every pair fast


def _int(gen: torch.Generator, low: int, high: int) -> int:
    """A random int in [low, high]."""
    return int(torch.randint(low, high + 1, (1,), generator=gen))


def _seed(gen: torch.Generator) -> int:
    return _int(gen, 0, 10_000)


def _randn(gen: torch.Generator, *shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=gen, dtype=torch.float64)


def _positions(gen: torch.Generator, n: int, rows: int | None = None) -> torch.Tensor:
    """Positions of n tokens: a run start .. start + n - 1 (one row, or one
    per sequence with its own start), or any positions up to 600."""
    if rows is None:
        if _int(gen, 0, 2) == 0:
            return torch.randint(0, 600, (n,), generator=gen)
        return torch.arange(n) + _int(gen, 0, 500)
    return torch.arange(n)[None, :] + torch.randint(0, 500, (rows, 1), generator=gen)


def _layout(gen: torch.Generator, batched: bool) -> tuple[int, int]:
    """(batch, heads): for per-sequence positions, batch != heads except
    once in a while (a table lined up with the heads then gives wrong values
    instead of an error)."""
    heads = _int(gen, 1, 4)
    batch = _int(gen, 1, 3)
    if batched and batch == heads and _int(gen, 0, 3):
        batch = heads + 1
    return batch, heads


def _angle_calls(gen: torch.Generator) -> list[ProbeCall]:
    calls = []
    for index in range(4):
        kwargs = {"context_length": _int(gen, 1, 40), "head_dim": 2 * _int(gen, 1, 8)}
        if index:
            kwargs["base"] = BASES[index]
        calls.append(ProbeCall(f"{PROBES}:angles", kwargs))
    return calls


def _rotate_calls(gen: torch.Generator, *, batched: bool) -> list[ProbeCall]:
    calls = []
    for index in range(5):
        (b, h), n, hd = _layout(gen, batched), _int(gen, 1, 7), 2 * _int(gen, 1, 6)
        kwargs = {"x": _randn(gen, b, h, n, hd), "positions": _positions(gen, n, b if batched else None)}
        if index >= 3:
            kwargs["base"] = BASES[index - 1]
        calls.append(ProbeCall(f"{PROBES}:rotate", kwargs))
    return calls


def _shift_calls(gen: torch.Generator) -> list[ProbeCall]:
    calls = []
    for index in range(4):
        (b, h), n, hd = _layout(gen, index % 2 == 1), _int(gen, 2, 7), 2 * _int(gen, 1, 6)
        calls.append(ProbeCall(f"{PROBES}:shifted", {
            "q": _randn(gen, b, h, n, hd), "k": _randn(gen, b, h, n, hd),
            "positions": _positions(gen, n, b if index % 2 == 1 else None), "shift": _int(gen, 1, 300)}))
    return calls


def _odd_calls(gen: torch.Generator) -> list[ProbeCall]:
    return [ProbeCall(f"{PROBES}:odd_head_dim", {"head_dim": 2 * _int(gen, 0, 4) + 1, "num_heads": _int(gen, 1, 3)})
            for _ in range(2)]


def block_config(gen: torch.Generator) -> dict:
    """Sizes of a block: an even head_dim (2-8), 1-4 heads, a context of 4-9."""
    num_heads = _int(gen, 1, 4)
    return {"d_model": num_heads * 2 * _int(gen, 1, 4), "num_heads": num_heads, "context_length": _int(gen, 4, 9),
            "dropout": (0.0, 0.1, 0.3)[_int(gen, 0, 2)], "qkv_bias": bool(_int(gen, 0, 1))}


def model_config(gen: torch.Generator, min_layers: int = 1) -> dict:
    """A small random RoPEGPT in eval mode: dropout is set and must not act."""
    return {"vocab_size": _int(gen, 6, 16), **block_config(gen), "num_layers": _int(gen, min_layers, 3),
            "tie_weights": bool(_int(gen, 0, 3))}


def _attention_calls(gen: torch.Generator) -> list[ProbeCall]:
    calls = []
    for index in range(5):
        block = block_config(gen)
        config = {"d_in": _int(gen, 2, 8), "d_out": block["d_model"], "context_length": block["context_length"],
                  "dropout": block["dropout"], "num_heads": block["num_heads"], "qkv_bias": block["qkv_bias"]}
        b = _int(gen, 1, 3)
        if index >= 3 and b == config["num_heads"]:
            b += 1                          # per-sequence positions with batch != heads
        n = _int(gen, 1, config["context_length"])
        positions = (None, _positions(gen, n), _positions(gen, n), _positions(gen, n, b), _positions(gen, n, b))[index]
        calls.append(ProbeCall(f"{PROBES}:attention", {"config": config, "seed": _seed(gen),
                                                      "x": _randn(gen, b, n, config["d_in"]),
                                                      "positions": positions, "shift": _int(gen, 1, 200)}))
    return calls


def _tokens(gen: torch.Generator, config: dict, shape: tuple[int, ...], avoid_last: bool = False) -> torch.Tensor:
    return torch.randint(0, config["vocab_size"] - int(avoid_last), shape, generator=gen)


def _gpt_calls(gen: torch.Generator) -> list[ProbeCall]:
    calls = []
    for _ in range(4):
        config = model_config(gen)
        idx = _tokens(gen, config, (_int(gen, 1, 3), _int(gen, 1, config["context_length"])))
        calls.append(ProbeCall(f"{PROBES}:gpt_logits", {"config": config, "seed": _seed(gen), "idx": idx}))
    return calls


def _step_calls(gen: torch.Generator, *, chunked: bool) -> list[ProbeCall]:
    """A prefill, then one token at a time (or chunks of 2-3) up to the whole context."""
    calls = []
    for index in range(4):
        config = model_config(gen)
        context = config["context_length"]
        prefill = 1 if index == 1 else _int(gen, 1, context - 2 if chunked else context - 1)
        chunks, left = [prefill], context - prefill
        while left:
            size = min(left, _int(gen, 2, 3) if chunked else 1)
            chunks.append(size)
            left -= size
        idx = _tokens(gen, config, (1 if index == 0 else _int(gen, 2, 3), context))
        calls.append(ProbeCall(f"{PROBES}:steps", {"config": config, "seed": _seed(gen), "idx": idx,
                                                  "chunks": chunks}))
    return calls


def _padding_calls(gen: torch.Generator) -> list[ProbeCall]:
    calls = []
    for _ in range(3):
        config = model_config(gen, min_layers=2)   # a NaN in one layer reaches real tokens in the next
        room = config["context_length"] - 1
        lengths = [1, room] + [_int(gen, 1, room) for _ in range(_int(gen, 0, 2))]
        prompts = [_tokens(gen, config, (n,), avoid_last=True) for n in lengths]
        calls.append(ProbeCall(f"{PROBES}:padded", {
            "config": config, "seed": _seed(gen), "prompts": prompts, "pad_id": config["vocab_size"] - 1,
            "next_ids": _tokens(gen, config, (len(prompts), 1), avoid_last=True)}))
    return calls


def _device_calls(gen: torch.Generator) -> list[ProbeCall]:
    """RoPEGPT's forward, and a prefill and a step through forward_cached,
    without padding and with a left-padded batch, on the meta device."""
    config = model_config(gen)
    calls = [placement_call("RoPEGPT", config, _tokens(gen, config, (2, config["context_length"])))]
    for padded in (False, True):
        config = model_config(gen)
        prefill = _int(gen, 1, config["context_length"] - 1)
        pad_mask = None
        if padded:
            pad_mask = torch.zeros(2, prefill + 1, dtype=torch.bool)
            pad_mask[1, :_int(gen, 0, prefill - 1)] = True
        calls.append(ProbeCall(f"{PROBES}:cached_placement", {
            "config": config, "idx": _tokens(gen, config, (2, prefill + 1)), "prefill": prefill,
            "pad_mask": pad_mask}))
    return calls


# --- the work a cache saves (as exercise 14's, grader/checks/kv_cache_cost.py) -----
COST_CONFIG = {"vocab_size": 32, "d_model": 128, "num_heads": 4, "num_layers": 2, "context_length": 512,
               "dropout": 0.1, "tie_weights": False}
COST_STEPS = 24
YARDSTICK = f"{PROBES}:cost_full"


def _cost_calls(gen: torch.Generator) -> list[ProbeCall]:
    model = {"config": COST_CONFIG, "seed": _seed(gen)}
    idx = torch.randint(0, COST_CONFIG["vocab_size"], (1, COST_CONFIG["context_length"]), generator=gen)
    prefill = COST_CONFIG["context_length"] - COST_STEPS
    return [ProbeCall(f"{PROBES}:cost_prefill", {**model, "idx": idx[:, :prefill]}),
            ProbeCall(f"{PROBES}:cost_steps", {"first": idx[:, prefill:prefill + 1], "count": COST_STEPS}),
            *yardstick_calls(YARDSTICK, {**model, "idx": idx})]


COULD_NOT_TELL = text(
    "could not tell whether the cache saves the work (its CPU time was too near the limit to decide on); the "
    "instructor will review this check",
    "无法判断缓存是否省下了计算（CPU 时间太接近界限，无法据此判定）；教师会复核这一项检查")
RECOMPUTED = text("each step recomputed the whole prefix: a cached step must cost far less than recomputing",
                  "每一步都重新计算了整个前缀：使用缓存的一步，开销必须远小于重新计算")


# --- judged here, from the returned tensors ------------------------------------------

def _scores_relative(submitted: object, expected: object) -> str | None:
    """q_i·k_j with every position shifted equals q_i·k_j unshifted (1e-9)."""
    scores = submitted["q"] @ submitted["k"].transpose(-2, -1)
    moved = submitted["q_shifted"] @ submitted["k_shifted"].transpose(-2, -1)
    same = scores.shape == moved.shape and torch.allclose(scores, moved, atol=1e-9, rtol=1e-9)
    return None if same else "the scores change when every position shifts by the same amount"


def _norms_kept(submitted: object, expected: object) -> str | None:
    """Every rotated query and key has the norm of the vector it came from
    (the inputs as the reference's run has them)."""
    q, k = expected["inputs"]
    pairs = ((submitted["q"], q), (submitted["k"], k), (submitted["q_shifted"], q), (submitted["k_shifted"], k))
    kept = all(r.shape == v.shape and torch.allclose(r.norm(dim=-1), v.norm(dim=-1), atol=1e-9, rtol=1e-9)
               for r, v in pairs)
    return None if kept else "a rotation changed the length of a vector"


def _output_relative(submitted: object, expected: object) -> str | None:
    """Attention's output with every position shifted equals the output unshifted (1e-9)."""
    out, moved = submitted["output"], submitted["shifted"]
    same = out.shape == moved.shape and torch.allclose(out, moved, atol=1e-9, rtol=1e-7)
    return None if same else "the output changes when every position shifts by the same amount"


def _unmodified(submitted: object, expected: object) -> str | None:
    """The inputs after the call equal the reference's (untouched ones), judged on the tensors."""
    return deep_close(atol=0, rtol=0)(submitted["inputs_after"], expected["inputs_after"]) and "modified its input"


CHECKS = requiring([
    Check(
        id="16-angles", weight=1,
        message=text("rope_angles: cos and sin of position * base^(-2k/head_dim), (context_length, head_dim // 2)",
                     "rope_angles：位置 * base^(-2k/head_dim) 的 cos 与 sin，形状 (context_length, head_dim // 2)"),
        calls=_angle_calls, compare=all_of(tensors_close("cos", **F64), tensors_close("sin", **F64)),
        pitfalls=("rope-angle-exponent",), seed=1),
    Check(
        id="16-rotate", weight=2.5,
        message=text("apply_rope with one position per token: each pair (2k, 2k+1) of the queries' coordinates "
                     "rotated by position * theta_k; the input left unchanged",
                     "每个 token 一个位置时的 apply_rope：每一对坐标 (2k, 2k+1) 旋转 位置 * theta_k；输入保持不变"),
        calls=lambda gen: _rotate_calls(gen, batched=False),
        compare=all_of(tensors_close("rotated", **F64), _unmodified),
        pitfalls=("rope-halves-pairing", "rope-angle-exponent"), seed=2),
    Check(
        id="16-rotate-batched", weight=1.5,
        message=text("apply_rope with positions (b, n), one row per sequence, the same for every head",
                     "位置为 (b, n)（每个序列一行、所有头相同）时的 apply_rope"),
        calls=lambda gen: _rotate_calls(gen, batched=True),
        compare=all_of(tensors_close("rotated", **F64), _unmodified),
        pitfalls=("rope-positions-axis", "rope-halves-pairing", "rope-angle-exponent"), seed=3),
    Check(
        id="16-relative", weight=1,
        message=text("the scores q_i·k_j of rotated queries and keys stay the same when every position shifts "
                     "by the same amount (they depend on i - j only)",
                     "所有位置整体平移相同的量时，旋转后的 query 与 key 的分数 q_i·k_j 保持不变（只取决于 i - j）"),
        calls=_shift_calls, compare=all_of(_scores_relative, deep_close(**F64, ignore=("relative", "norms_kept"))),
        seed=4),
    Check(
        id="16-norms", weight=0.5,
        message=text("a rotation keeps the length of every query and key vector",
                     "旋转保持每个 query 和 key 向量的长度不变"),
        calls=_shift_calls, compare=_norms_kept, seed=5),
    Check(
        id="16-odd-head-dim", weight=0.5,
        message=text("an odd head_dim raises ValueError: in rope_angles, apply_rope and RoPEMultiHeadAttention",
                     "head_dim 为奇数时抛出 ValueError：rope_angles、apply_rope 和 RoPEMultiHeadAttention 都是"),
        calls=_odd_calls,
        compare=all_of(error_type_equal("angles"), error_type_equal("apply"), error_type_equal("attention")),
        seed=6),
    Check(
        id="16-attention", weight=2.5,
        message=text("RoPEMultiHeadAttention (06's weights) with default positions, positions (n,) and (b, n): "
                     "the reference's outputs, and the same output when every position shifts",
                     "RoPEMultiHeadAttention（06 的权重）在默认位置、位置 (n,) 与 (b, n) 下：输出与参考答案一致，"
                     "所有位置整体平移时输出不变"),
        calls=_attention_calls,
        compare=all_of(deep_close(**F64), _output_relative),
        pitfalls=("rope-values-rotated", "rope-before-split", "rope-positions-axis"), seed=7),
    Check(
        id="16-gpt", weight=2.5,
        message=text("RoPEGPT: 12's GPT without pos_emb (the parameter names), and the reference's logits",
                     "RoPEGPT：去掉 pos_emb 的练习 12 的 GPT（参数名一致），logits 与参考答案一致"),
        calls=_gpt_calls,
        compare=all_of(tensors_close("logits", **F64), plain_equal("load", reason="wrong parameter names"),
                       plain_equal("parameters", reason="wrong parameter names"),
                       plain_equal("inputs_unchanged", reason="modified its input")),
        pitfalls=("rope-values-rotated", "rope-before-split"), seed=8),
    Check(
        id="16-steps", weight=3,
        message=text("forward_cached, a prefill then one token at a time up to the whole context: at every step "
                     "the logits of the full recomputation (float64), len(cache) counting the positions",
                     "forward_cached：先预填充，再逐个 token 直到整个上下文：每一步的 logits 都等于完整重算的结果"
                     "（float64），len(cache) 等于已缓存的位置数"),
        calls=lambda gen: _step_calls(gen, chunked=False),
        compare=all_of(tensors_close("logits", **F64), plain_equal("lengths", reason="wrong len(cache)")),
        pitfalls=("cache-position-offset",), seed=9),
    Check(
        id="16-chunks", weight=1.5,
        message=text("forward_cached with chunks of several new tokens after the prefill: the logits of the full "
                     "recomputation",
                     "预填充之后每次输入多个新 token 的 forward_cached：logits 等于完整重算的结果"),
        calls=lambda gen: _step_calls(gen, chunked=True),
        compare=all_of(tensors_close("logits", **F64), plain_equal("lengths", reason="wrong len(cache)")),
        pitfalls=("cache-position-offset",), seed=10),
    Check(
        id="16-padding", weight=2,
        message=text("left-padded prompts through forward_cached (prefill and one step): each prompt's positions "
                     "start at its first real token, and its logits are those of the prompt alone",
                     "左侧填充的提示经过 forward_cached（预填充和一步）：每个提示的位置从它的第一个真实 token 开始，"
                     "logits 与单独计算该提示时相同"),
        calls=_padding_calls, compare=deep_close(**F64, ignore=("alone",)),
        pitfalls=("rope-padding-positions", "padding-attended", "softmax-all-masked-nan"), seed=11),
    Check(
        id="16-cache-cost", weight=0.5, seed=12, measured=True,
        message=text("forward_cached, one token at a time after a prefill, at a context of 512 costs far less CPU "
                     "time than recomputing the prefix (measured by the grader), and gives the reference's values",
                     "在 512 的上下文长度下，预填充之后逐个 token 的 forward_cached 所用的 CPU 时间远少于重新计算前缀"
                     "（由评分程序测量），且结果与参考答案相同"),
        calls=_cost_calls, compare=deep_close(**F64),
        run_rule=cheaper_than_recomputing([Cost(f"{PROBES}:cost_steps", YARDSTICK, COST_STEPS, RECOMPUTED)],
                                          could_not_tell=COULD_NOT_TELL)),
    device_check("16-device", _device_calls, owner="RoPEGPT and forward_cached", pitfalls=(), seed=13),
    no_forbidden_calls("16", requires=("16-attention",)),
], {
    # Properties that wrong rotations keep too pay only beside the values.
    "16-relative": ("16-rotate",), "16-norms": ("16-rotate",), "16-odd-head-dim": ("16-rotate",),
    # Values right without the work are not the exercise (as 14's).
    "16-steps": ("16-cache-cost",), "16-chunks": ("16-cache-cost",), "16-padding": ("16-cache-cost",),
    "16-no-forbidden-calls": ("16-rotate",), "16-device": ("16-gpt", "16-steps"),
})


# One query and one key (head_dim 8, the first half the README's): every diagonal one colour.
FIGURES = [
    Figure(
        name="rope-scores",
        title=text("scores (R_i q)·(R_j k) of one query and one key rotated at positions 0..15 (rows i, columns j): "
                   "the same along every diagonal, since they depend on i - j only",
                   "同一个 query 与同一个 key 在位置 0..15 旋转后的分数 (R_i q)·(R_j k)（行 i，列 j）：只取决于 i - j，"
                   "所以每条对角线上都相同"),
        call=ProbeCall(f"{PROBES}:score_map", {
            "q": torch.tensor([1.0, 2.0, 3.0, 4.0, 0.5, -1.0, 1.0, 0.0], dtype=torch.float64),
            "k": torch.tensor([0.5, -1.0, 2.0, 1.0, 1.0, 1.0, -0.5, 2.0], dtype=torch.float64), "n": 16}),
    ),
]

