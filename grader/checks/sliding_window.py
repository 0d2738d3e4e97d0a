"""Hidden checks of exercise 18 (sliding-window attention with a rolling cache).

Every model probe runs exercise 12's reference GPT (shipped beside the
submission) without positions (NoPE), with weights drawn from the config
and a seed, in float64: the submission and the reference see the same
model. Sequences run two to four times past ``context_length`` and the
ring buffer wraps several times, so a cache that only works before it
wraps, or a model that needs positions, fails. The work a cached step
saves is measured from outside the child (grader/checks/work.py), as
exercise 14's; a cache that holds more than ``window`` positions is caught
by its ring buffers, compared slot by slot with the reference's (the
README fixes the layout: position p in slot p % window).
"""
from __future__ import annotations

import torch

from grader.checks import (Check, Figure, all_of, deep_close, error_type_equal, no_forbidden_calls, plain_equal, requiring,
                           tensors_close, text)
from grader.checks.devices import device_check
from grader.checks.kv_cache import model_config
from grader.checks.work import Cost, cheaper_than_recomputing, yardstick_calls
from grader.sandbox import ProbeCall

PROBES = "coursekit.probes.sliding_window"
F64 = {"atol": 1e-9, "rtol": 1e-7}


def _int(gen: torch.Generator, low: int, high: int) -> int:
    """A random int in [low, high]."""
    return int(torch.randint(low, high + 1, (1,), generator=gen))


def _seed(gen: torch.Generator) -> int:
    return _int(gen, 0, 10_000)


def _window_and_length(gen: torch.Generator, config: dict) -> tuple[int, int]:
    """A window of 1-5 and a sequence past the context that wraps the ring at least three times."""
    window = _int(gen, 1, 5)
    context = config["context_length"]
    low = max(2 * context, 4 * window)
    return window, _int(gen, low, low + 4)


def _tokens(gen: torch.Generator, config: dict, shape: tuple[int, ...]) -> torch.Tensor:
    return torch.randint(0, config["vocab_size"], shape, generator=gen)


def _mask_calls(gen: torch.Generator) -> list[ProbeCall]:
    """Square and rectangular masks, offsets inside and outside the keys,
    window 1 and windows as long as (or longer than) the sequence."""
    cases = [(1, 1, 1, 0), (4, 4, 1, 0), (5, 5, 5, 0), (3, 3, 7, 0), (2, 6, 3, 4)]
    for _ in range(30):
        nq, nk = _int(gen, 1, 7), _int(gen, 1, 9)
        window = (1, _int(gen, 2, 4), max(nq, nk) + _int(gen, 0, 2))[_int(gen, 0, 2)]
        offset = (nk - nq if nk >= nq else 0, _int(gen, 0, 10))[_int(gen, 0, 1)]
        cases.append((nq, nk, window, offset))
    return [ProbeCall(f"{PROBES}:masks", {"cases": cases})]


def _left_pad_mask(gen: torch.Generator, batch: int, n: int) -> torch.Tensor:
    """Left padding, True at padding: row 0 none, the others 1 .. n - 1 pads."""
    pad_mask = torch.zeros(batch, n, dtype=torch.bool)
    for row in range(1, batch):
        pad_mask[row, :_int(gen, 1, n - 1)] = True
    return pad_mask


def _attention_calls(gen: torch.Generator) -> list[ProbeCall]:
    calls = []
    for index in range(6):
        config = model_config(gen)
        window, n = _window_and_length(gen, config)
        batch = _int(gen, 2, 3)
        x = torch.randn(batch, n, config["d_model"], generator=gen, dtype=torch.float64)
        calls.append(ProbeCall(f"{PROBES}:attention", {
            "config": config, "seed": _seed(gen), "x": x, "window": window,
            "pad_mask": _left_pad_mask(gen, batch, n) if index % 2 else None}))
    return calls


def _forward_calls(gen: torch.Generator) -> list[ProbeCall]:
    calls = []
    for index in range(5):
        config = model_config(gen, min_layers=2)   # a NaN in one layer reaches real tokens in the next
        window, n = _window_and_length(gen, config)
        padded = index % 2 == 1
        batch = _int(gen, 2 if padded else 1, 3)
        calls.append(ProbeCall(f"{PROBES}:forward", {
            "config": config, "seed": _seed(gen), "idx": _tokens(gen, config, (batch, n)), "window": window,
            "pad_mask": _left_pad_mask(gen, batch, n) if padded else None}))
    return calls


def _step_calls(gen: torch.Generator, *, chunked: bool, count: int = 4) -> list[ProbeCall]:
    """A prefill, then one token at a time (or chunks of 1 to window + 2
    tokens, longer than the ring too) far past the context."""
    calls = []
    for index in range(count):
        config = model_config(gen)
        window, n = _window_and_length(gen, config)
        # A prefill of one token, one shorter than the window, and one longer.
        prefill = (1, max(1, window - 1), window + _int(gen, 1, 3))[index % 3]
        chunks, left = [prefill], n - prefill
        while left:
            size = min(left, _int(gen, 1, window + 2) if chunked else 1)
            chunks.append(size)
            left -= size
        calls.append(ProbeCall(f"{PROBES}:steps", {
            "config": config, "seed": _seed(gen), "idx": _tokens(gen, config, (_int(gen, 1, 3), n)),
            "window": window, "chunks": chunks}))
    return calls


def _tagged_calls(gen: torch.Generator) -> list[ProbeCall]:
    """The cache by itself, keys tagged with their positions: what append
    returns (held slots, then the new positions) and the slots after it."""
    calls = []
    for _ in range(3):
        window = _int(gen, 1, 5)
        sizes = [_int(gen, 1, window + 2) for _ in range(_int(gen, 4, 8))]
        calls.append(ProbeCall(f"{PROBES}:tagged_appends", {"window": window, "sizes": sizes}))
    return calls


def _field_calls(gen: torch.Generator) -> list[ProbeCall]:
    cases = [(1, 1), (0, 4), (1, 4), (3, 1), (2, 3), (32, 4096)]
    cases += [(_int(gen, 0, 40), _int(gen, 1, 5000)) for _ in range(12)]
    return [ProbeCall(f"{PROBES}:receptive_fields", {"cases": cases})]


def _device_calls(gen: torch.Generator) -> list[ProbeCall]:
    """The windowed model and a cache that wraps, without padding and with a left-padded batch."""
    calls = []
    for padded in (False, True):
        config = model_config(gen)
        window = _int(gen, 1, 2)
        n = 2 * window + 2          # the ring wraps once
        calls.append(ProbeCall(f"{PROBES}:placement", {
            "config": config, "idx": _tokens(gen, config, (2, n)), "window": window, "prefill": _int(gen, 1, 2),
            "pad_mask": _left_pad_mask(gen, 2, n) if padded else None}))
    return calls


def _unmodified(submitted: object, expected: object) -> str | None:
    """The inputs after the call equal the reference's (untouched ones),
    judged here on the tensors, not on the child's word."""
    return deep_close(atol=0, rtol=0)(submitted["inputs_after"], expected["inputs_after"]) and "modified its input"


# --- the work a rolling cache saves (grader/checks/work.py) ---------------------
# d_model 128, two blocks, a window of 256 after 488 positions (as exercise
# 14's 512, the buffer long wrapped): recomputing the windowed model over
# the whole sequence costs tens of cached steps, and a submission that does
# it at every step still ends well within the run's time limit. The window
# is wide so that the last token's receptive field (2 * 255 + 1 positions)
# is nearly the whole sequence: with a window of 16 it was 31, and
# recomputing only those at every step (exact, with no positions) passed
# as a cache (a red-team pass; tests/test_cached_steps_work.py).
COST_CONFIG = {"vocab_size": 32, "d_model": 128, "num_heads": 4, "num_layers": 2, "context_length": 64,
               "dropout": 0.1, "tie_weights": False}
COST_WINDOW = 256
COST_LENGTH = 512
COST_STEPS = 24
YARDSTICK = f"{PROBES}:cost_full"


def _cost_calls(gen: torch.Generator) -> list[ProbeCall]:
    model = {"config": COST_CONFIG, "seed": _seed(gen), "window": COST_WINDOW}
    idx = torch.randint(0, COST_CONFIG["vocab_size"], (1, COST_LENGTH), generator=gen)
    prefill = COST_LENGTH - COST_STEPS
    return [ProbeCall(f"{PROBES}:cost_prefill", {**model, "idx": idx[:, :prefill]}),
            ProbeCall(f"{PROBES}:cost_steps", {"first": idx[:, prefill:prefill + 1], "count": COST_STEPS}),
            *yardstick_calls(YARDSTICK, {**model, "idx": idx})]


COULD_NOT_TELL = text(
    "could not tell whether the rolling cache saves the work (its CPU time was too near the limit to decide on); "
    "the instructor will review this check",
    "无法判断滚动缓存是否省下了计算（CPU 时间太接近界限，无法据此判定）；教师会复核这一项检查")
RECOMPUTED = text("each step recomputed the whole sequence: a cached step must cost far less than recomputing",
                  "每一步都重新计算了整个序列：使用缓存的一步，开销必须远小于重新计算")

CHECKS = requiring([
    Check(
        id="18-mask",
        weight=2,
        message=text("sliding_window_mask for square and rectangular shapes, offsets, window 1 and windows longer "
                     "than the sequence: True exactly outside [offset + i - window + 1, offset + i]",
                     "sliding_window_mask 在方形与长方形、各种 offset、window 为 1 以及窗口长于序列时：恰好在 "
                     "[offset + i - window + 1, offset + i] 之外为 True"),
        calls=_mask_calls,
        compare=deep_close(atol=0, rtol=0),
        pitfalls=("window-off-by-one", "window-not-causal", "window-offset-ignored"),
    ),
    Check(
        id="18-attention",
        weight=2,
        message=text("sliding_window_attention past the context, with and without left padding: the reference's "
                     "outputs (float64), the input unchanged",
                     "超过上下文长度的 sliding_window_attention，有无左侧填充：输出与参考答案相同（float64），输入不被修改"),
        calls=_attention_calls,
        compare=all_of(tensors_close("output", **F64), plain_equal("inputs_unchanged", reason="modified its input"),
                       _unmodified),
        pitfalls=("window-off-by-one", "window-not-causal", "window-padding-ignored", "softmax-all-masked-nan"),
        seed=1,
    ),
    Check(
        id="18-forward",
        weight=2,
        message=text("windowed_forward of the model without positions, past its context_length, with and without "
                     "left padding: the reference's logits (float64)",
                     "无位置编码模型的 windowed_forward，超过其 context_length，有无左侧填充：logits 与参考答案相同（float64）"),
        calls=_forward_calls,
        compare=all_of(tensors_close("logits", **F64), _unmodified),
        pitfalls=("window-off-by-one", "window-not-causal", "window-padding-ignored", "softmax-all-masked-nan"),
        seed=2,
    ),
    Check(
        id="18-steps",
        weight=4,
        message=text("forward_cached with a RollingKVCache, a prefill then one token at a time far past the context "
                     "(the ring wraps several times): at every step the windowed recomputation's logits (float64), "
                     "cache.seen counting the positions",
                     "使用 RollingKVCache 的 forward_cached：先预填充，再逐个 token 远远超过上下文长度（环形缓冲区"
                     "绕回多次）：每一步的 logits 都等于带窗口的重算结果（float64），cache.seen 等于已输入的位置数"),
        calls=lambda gen: _step_calls(gen, chunked=False),
        compare=all_of(tensors_close("logits", **F64), plain_equal("seen", reason="wrong cache.seen"), _unmodified),
        pitfalls=("window-ring-order", "window-offset-ignored", "window-off-by-one", "window-not-causal"),
        seed=3,
    ),
    Check(
        id="18-chunks",
        weight=2,
        message=text("forward_cached in chunks of several tokens, some longer than the window: the windowed "
                     "recomputation's logits",
                     "每次输入多个 token（有的比窗口还长）的 forward_cached：logits 等于带窗口的重算结果"),
        calls=lambda gen: _step_calls(gen, chunked=True),
        compare=all_of(tensors_close("logits", **F64), plain_equal("seen", reason="wrong cache.seen")),
        pitfalls=("window-ring-order", "window-offset-ignored", "window-not-causal"),
        seed=4,
    ),
    Check(
        id="18-ring",
        weight=2,
        message=text("the ring buffers after every step: min(seen, window) positions per layer, position p in slot "
                     "p % window, and len(cache) counting them; append returns the held slots then the new "
                     "positions, with the position of each",
                     "每一步之后的环形缓冲区：每层保存 min(seen, window) 个位置，位置 p 位于槽位 p % window，"
                     "len(cache) 等于保存的位置数；append 先返回保存的槽位、再返回新位置，并给出每个的位置"),
        calls=lambda gen: _step_calls(gen, chunked=True, count=3) + _tagged_calls(gen),
        compare=all_of(plain_equal("held", reason="wrong len(cache)"),
                       deep_close(**F64, ignore=("logits", "held", "seen", "inputs_unchanged",
                                                          "inputs_after"))),
        pitfalls=("window-cache-grows",),
        seed=5,
    ),
    Check(
        id="18-receptive-field",
        weight=1,
        message=text("receptive_field(num_layers, window) for small and large depths and windows",
                     "receptive_field(num_layers, window)：各种深度和窗口大小"),
        calls=_field_calls,
        compare=plain_equal("fields", reason="wrong receptive field"),
        pitfalls=("receptive-field-no-minus-one",),
        seed=6,
    ),
    Check(
        id="18-domain",
        weight=0.5,
        message=text("a window of 0 (and num_layers -1) raises ValueError in sliding_window_mask, RollingKVCache "
                     "and receptive_field",
                     "window 为 0（以及 num_layers 为 -1）时，sliding_window_mask、RollingKVCache 和 "
                     "receptive_field 抛出 ValueError"),
        calls=lambda gen: [ProbeCall(f"{PROBES}:domain_errors", {})],
        compare=all_of(*(error_type_equal(key) for key in ("mask", "cache", "field_window", "field_layers"))),
        seed=7,
    ),
    Check(
        id="18-cache-cost",
        weight=1,
        seed=8,
        measured=True,
        message=text("forward_cached, one token at a time after 488 positions with a window of 16, costs far less "
                     "CPU time than recomputing the windowed model over the sequence (measured by the grader), and "
                     "gives the reference's values",
                     "窗口为 16、已有 488 个位置之后逐个 token 的 forward_cached，所用 CPU 时间远少于对整个序列"
                     "做带窗口的重算（由评分程序测量），且结果与参考答案相同"),
        calls=_cost_calls,
        compare=deep_close(**F64),
        run_rule=cheaper_than_recomputing([Cost(f"{PROBES}:cost_steps", YARDSTICK, COST_STEPS, RECOMPUTED)],
                                          could_not_tell=COULD_NOT_TELL),
    ),
    device_check("18-device", _device_calls, owner="windowed_forward and forward_cached", pitfalls=(), seed=9),
    no_forbidden_calls("18", requires=("18-attention",)),
], {
    # A cache whose values are right without the saving is not the exercise:
    # its checks pay only once a cached step is measured to cost far less.
    "18-steps": ("18-cache-cost",), "18-chunks": ("18-cache-cost",), "18-ring": ("18-steps",),
    "18-domain": ("18-mask",), "18-device": ("18-forward", "18-steps")})

# The README's picture: 12 positions, a window of 3; the last token's reach
# grows by window - 1 per layer (3, 5, 7 positions). Public inputs only.
FIGURE_CONFIG = {"vocab_size": 16, "context_length": 4, "d_model": 8, "num_heads": 2, "num_layers": 1}
FIGURE_LENGTH, FIGURE_WINDOW = 12, 3
FIGURES = [
    Figure(
        name="sliding-window",
        title=text("the window: 1 where a query may attend (12 positions, window 3; rows: queries, columns: keys)",
                   "窗口：query 可以关注的位置为 1（12 个位置，窗口为 3；行：query，列：key）"),
        call=ProbeCall(f"{PROBES}:window_picture", {"n": FIGURE_LENGTH, "window": FIGURE_WINDOW}),
        path=("visible",),
        axes=(tuple(str(p) for p in range(FIGURE_LENGTH)), tuple(str(p) for p in range(FIGURE_LENGTH))),
    ),
    Figure(
        name="receptive-field",
        title=text("the positions whose token changes the last token's logits, after 1, 2 and 3 windowed layers "
                   "(window 3; columns: positions)",
                   "经过 1、2、3 层窗口注意力后，哪些位置的 token 会改变最后一个 token 的 logits（窗口为 3；列：位置）"),
        call=ProbeCall(f"{PROBES}:reach", {"config": FIGURE_CONFIG, "seed": 0, "n": FIGURE_LENGTH,
                                          "window": FIGURE_WINDOW, "depths": [1, 2, 3]}),
        path=("reach",),
        axes=(("L=1", "L=2", "L=3"), tuple(str(p) for p in range(FIGURE_LENGTH))),
    ),
]
