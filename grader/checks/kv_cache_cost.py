"""Exercise 14's checks of the work a cache saves, measured from outside
the child (grader/checks/work.py): at 512 positions, a cached step,
``generate_cached`` and ``generate_batch`` must cost far less CPU time than
recomputing, against the reference's costs in its own run. Each function's
check gates the checks of the values it produces (grader/checks/kv_cache.py),
so one bug in ``generate_batch`` does not cost ``forward_cached``'s points.

Every call is sent alone (``measured``). The values come first: a
submission that recomputes on small inputs and returns anything cheap at
512 positions fails on them. That holds only while those values cannot be
guessed: the model's weights are untied, and its greedy tokens at this size
vary (tested).
"""
from __future__ import annotations

import torch

from grader.checks import Check, deep_close, text
from grader.checks.work import Cost, built_ahead, cheaper_than_recomputing, yardstick_calls
from grader.sandbox import ProbeCall

PROBES = "coursekit.probes.kv_cache_cost"
F64 = {"atol": 1e-9, "rtol": 1e-7}
# d_model 128, two blocks, 512 positions: a full forward costs 50 to 75
# cached steps (float64, one thread), and with two blocks no shortcut short
# of caching keys and values saves more than half of a recomputation.
# Measured on the reference, recomputing costs 25 to 70 times each timed
# call, the gap the rule needs to decide (grader/checks/work.py).
# Untied weights: with tied ones, this model's greedy decoding repeats the
# prompt's last token, so a generation could be guessed without any work
# (tests/test_kv_cache_work.py proves the tokens at this size vary).
COST_CONFIG = {"vocab_size": 32, "d_model": 128, "num_heads": 4, "num_layers": 2, "context_length": 512,
               "dropout": 0.1, "tie_weights": False}
COST_STEPS = 24          # single-token steps after a prefill to the context's end
COST_NEW = 64            # tokens generated after prompts of 448 (the prefill, one forward, is in the timed call:
                         # 32 new tokens left recomputing at 16 to 23x the cached generation, 64 at 25 to 41x)
COST_CHUNK = 3           # tokens per chunk (14-chunks-cost)
YARDSTICK = f"{PROBES}:cost_full"


def _model(gen: torch.Generator) -> dict:
    return {"config": COST_CONFIG, "seed": int(torch.randint(0, 10_001, (1,), generator=gen))}


def _tokens(gen: torch.Generator, *shape: int) -> torch.Tensor:
    """Token ids, never the last one (generate_batch's pad id)."""
    return torch.randint(0, COST_CONFIG["vocab_size"] - 1, shape, generator=gen)


def _step_calls(gen: torch.Generator) -> list[ProbeCall]:
    """A prefill, the single-token steps after it (timed), and full
    forwards of the same tokens (the yardstick of a recomputation)."""
    model, context = _model(gen), COST_CONFIG["context_length"]
    idx = _tokens(gen, 1, context)
    prefill = context - 2 * COST_STEPS   # the chunks (14-chunks-cost) come after the steps
    return [ProbeCall(f"{PROBES}:cost_prefill", {**model, "idx": idx[:, :prefill]}),
            ProbeCall(f"{PROBES}:cost_steps", {"first": idx[:, prefill:prefill + 1], "count": COST_STEPS}),
            *yardstick_calls(YARDSTICK, {**model, "idx": idx})]


def _chunk_calls(gen: torch.Generator) -> list[ProbeCall]:
    """Chunks of COST_CHUNK tokens, through the cache 14-cache-cost's steps
    left (timed): only the chunks' own values and work decide here."""
    return [ProbeCall(f"{PROBES}:cost_chunks", {"first": _tokens(gen, 1, COST_CHUNK), "count": COST_STEPS})]


def _padded_calls(gen: torch.Generator) -> list[ProbeCall]:
    """A left-padded prefill, then single-token steps with the padding mask (timed)."""
    model, context = _model(gen), COST_CONFIG["context_length"]
    idx = _tokens(gen, 1, context)
    pad_mask = torch.zeros(1, context - COST_STEPS, dtype=torch.bool)
    pad_mask[:, :int(torch.randint(2, 9, (1,), generator=gen))] = True
    return [ProbeCall(f"{PROBES}:cost_prefill", {**model, "idx": idx[:, :context - COST_STEPS], "pad_mask": pad_mask}),
            ProbeCall(f"{PROBES}:cost_padded_steps", {"first": idx[:, context - COST_STEPS:context - COST_STEPS + 1],
                                                         "count": COST_STEPS})]


def _generation_calls(gen: torch.Generator) -> list[ProbeCall]:
    prompt = COST_CONFIG["context_length"] - COST_NEW
    return built_ahead(f"{PROBES}:cost_generation", {**_model(gen), "idx": _tokens(gen, 1, prompt),
                                                     "max_new_tokens": COST_NEW})


def _batch_calls(gen: torch.Generator) -> list[ProbeCall]:
    prompt = COST_CONFIG["context_length"] - COST_NEW
    lengths = (prompt, prompt - int(torch.randint(3, 10, (1,), generator=gen)))
    return built_ahead(f"{PROBES}:cost_batch", {**_model(gen), "prompts": [_tokens(gen, n) for n in lengths],
                                                "max_new_tokens": COST_NEW, "pad_id": COST_CONFIG["vocab_size"] - 1})


def _recomputed(what: str, zh: str):
    return text(f"{what}: with the cache, a new token must cost far less than recomputing",
                f"{zh}：使用缓存时，一个新 token 的开销必须远小于重新计算")


COULD_NOT_TELL = text(
    "could not tell whether the cache saves the work (its CPU time was too near the limit to decide on); the "
    "instructor will review this check",
    "无法判断缓存是否省下了计算（CPU 时间太接近界限，无法据此判定）；教师会复核这一项检查")
RECOMPUTED = text("each step recomputed the whole prefix: a cached step must cost far less than recomputing",
                  "每一步都重新计算了整个前缀：使用缓存的一步，开销必须远小于重新计算")


def _check(check_id: str, weight: float, what: tuple[str, str], calls, costs: list[Cost], seed: int) -> Check:
    return Check(
        id=check_id, weight=weight, seed=seed, measured=True,
        message=text(f"{what[0]} at a context of 512 costs far less CPU time than recomputing the prefix "
                     "(measured by the grader), and gives the reference's values",
                     f"在 512 的上下文长度下，{what[1]}所用的 CPU 时间远少于重新计算前缀（由评分程序测量），"
                     "且结果与参考答案相同"),
        calls=calls, compare=deep_close(**F64),
        run_rule=cheaper_than_recomputing(costs, could_not_tell=COULD_NOT_TELL))


COST_CHECKS = [
    # Each gates only the checks of what it times (grader/checks/kv_cache.py):
    # a mistake in chunks or padding does not cost the single steps' points.
    _check("14-cache-cost", 0.5, ("forward_cached, one token at a time after a prefill",
                                  "预填充之后逐个 token 的 forward_cached"), _step_calls,
           [Cost(f"{PROBES}:cost_steps", YARDSTICK, COST_STEPS, RECOMPUTED)], seed=9),
    _check("14-chunks-cost", 0.25, ("forward_cached, chunks of 3 tokens", "每块 3 个 token 的 forward_cached"),
           _chunk_calls, [Cost(f"{PROBES}:cost_chunks", YARDSTICK, COST_STEPS // COST_CHUNK,
                               _recomputed("each chunk recomputed the whole prefix",
                                           "每一块都重新计算了整个前缀"))], seed=12),
    _check("14-padding-cost", 0.25, ("forward_cached with a padding mask, one token at a time after a "
                                     "left-padded prefill", "左侧填充的预填充之后、带填充掩码逐个 token 的 forward_cached"),
           _padded_calls, [Cost(f"{PROBES}:cost_padded_steps", YARDSTICK, COST_STEPS,
                                _recomputed("with a padding mask, each step recomputed the whole prefix",
                                            "带填充掩码时，每一步都重新计算了整个前缀"))], seed=13),
    _check("14-generate-cost", 0.5, ("generate_cached", "generate_cached "), _generation_calls,
           [Cost(f"{PROBES}:cost_generation", YARDSTICK, COST_NEW,
                 _recomputed("generate_cached recomputed the whole prefix for each new token",
                             "generate_cached 每生成一个新 token 都重新计算了整个前缀"))], seed=10),
    _check("14-batch-cost", 0.5, ("generate_batch", "generate_batch "), _batch_calls,
           [Cost(f"{PROBES}:cost_batch", YARDSTICK, 2 * COST_NEW,
                 _recomputed("generate_batch recomputed the whole prefix for each new token",
                             "generate_batch 每生成一个新 token 都重新计算了整个前缀"))], seed=11),
]
