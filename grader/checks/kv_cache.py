"""Hidden checks of exercise 14 (a KV cache and batched generation).

Every probe runs exercise 12's reference GPT (shipped beside the
submission) with weights drawn from the config and a seed, in float64: the
submission and the reference see the same model, and the cached logits must
equal the full recomputation's to float64's precision at every step.
Models are tiny (vocabulary 6-16, 1-3 blocks, context 4-9) so that every
check runs well within the per-check limits; the work the cache saves is
measured at 512 positions by grader/checks/kv_cache_cost.py, and every
check here counts only once it passes.
"""
from __future__ import annotations

import torch

from grader.checks import (Check, all_of, deep_close, error_type_equal, no_forbidden_calls, plain_equal, requiring,
                           tensors_close, text)
from grader.checks.devices import device_check
from grader.checks.gpt import block_config
from grader.checks.kv_cache_cost import COST_CHECKS
from grader.sandbox import ProbeCall

PROBES = "coursekit.probes.kv_cache"
F64 = {"atol": 1e-9, "rtol": 1e-7}


def _int(gen: torch.Generator, low: int, high: int) -> int:
    """A random int in [low, high]."""
    return int(torch.randint(low, high + 1, (1,), generator=gen))


def model_config(gen: torch.Generator, min_layers: int = 1) -> dict:
    """A small random GPT, eval mode: dropout is set and must not act."""
    config = {"vocab_size": _int(gen, 6, 16), **block_config(gen), "num_layers": _int(gen, min_layers, 3),
              "tie_weights": bool(_int(gen, 0, 3))}
    config["context_length"] = max(config["context_length"], 4)
    return config


def _tokens(gen: torch.Generator, config: dict, shape: tuple[int, ...], avoid_last: bool = False) -> torch.Tensor:
    """Token ids; with ``avoid_last`` never the last id of the vocabulary (the pad token)."""
    return torch.randint(0, config["vocab_size"] - int(avoid_last), shape, generator=gen)


def _seed(gen: torch.Generator) -> int:
    return _int(gen, 0, 10_000)


def _step_calls(gen: torch.Generator, *, chunked: bool) -> list[ProbeCall]:
    """A prefill, then one token at a time (or chunks of 2-3) up to the
    whole context."""
    calls = []
    for index in range(5):
        config = model_config(gen)
        context = config["context_length"]
        # A prefill of one token once: the smallest cache a step can hide.
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


def _generate_calls(gen: torch.Generator) -> list[ProbeCall]:
    """Short generations, and more generations past the context (the cache
    must start over), on weights three times the usual scale. Greedy tokens
    hide small errors in the logits: with 4 calls at the usual scale, a cache
    that slides past the context kept every token on 34 % of draws (a
    submission's own draw: grader/checks/inputs.py); with these, on 0 of 400."""
    calls = []
    for index in range(8):
        config = model_config(gen)
        context = config["context_length"]
        n = _int(gen, 1, context)
        new = _int(gen, 1, context - n) if index % 4 == 0 and n < context else _int(gen, context, 3 * context)
        calls.append(ProbeCall(f"{PROBES}:generation", {"config": config, "seed": _seed(gen),
                                                       "idx": _tokens(gen, config, (_int(gen, 1, 2), n)),
                                                       "max_new_tokens": new, "scale": 3.0}))
    return calls


def _limit_calls(gen: torch.Generator) -> list[ProbeCall]:
    calls = []
    for _ in range(2):
        config = model_config(gen)
        idx = _tokens(gen, config, (2, config["context_length"] + 1))
        calls.append(ProbeCall(f"{PROBES}:context_limit", {"config": config, "seed": _seed(gen), "idx": idx}))
    return calls


def _prompts(gen: torch.Generator, config: dict, room: int) -> list[torch.Tensor]:
    """2-4 prompts of different lengths (one of length 1, one of ``room``),
    never holding the pad token (the last id)."""
    lengths = [1, room] + [_int(gen, 1, room) for _ in range(_int(gen, 0, 2))]
    return [_tokens(gen, config, (n,), avoid_last=True) for n in lengths]


def _padding_calls(gen: torch.Generator) -> list[ProbeCall]:
    calls = []
    for _ in range(4):
        config = model_config(gen, min_layers=2)   # a NaN in one layer reaches real tokens in the next
        prompts = _prompts(gen, config, config["context_length"] - 1)
        calls.append(ProbeCall(f"{PROBES}:padded", {
            "config": config, "seed": _seed(gen), "prompts": prompts, "pad_id": config["vocab_size"] - 1,
            "next_ids": _tokens(gen, config, (len(prompts), 1), avoid_last=True),
            "other_pads": _tokens(gen, config, (config["context_length"],), avoid_last=True)}))
    return calls


def _batch_calls(gen: torch.Generator, *, too_long: bool = False) -> list[ProbeCall]:
    calls = []
    for _ in range(2 if too_long else 4):
        config = model_config(gen)
        context = config["context_length"]
        # At least half the context for the longest prompt: beside the prompt of length 1 that is
        # half a row of padding, which attending to it always shows (issue 31: a short room had
        # almost none, and padding-attended passed where the public test caught it).
        room = _int(gen, max(2, context // 2), context - 1)
        new = context - room + _int(gen, 1, 2) if too_long else _int(gen, 1, context - room)
        calls.append(ProbeCall(f"{PROBES}:{'batch_too_long' if too_long else 'batch'}", {
            "config": config, "seed": _seed(gen), "prompts": _prompts(gen, config, room), "max_new_tokens": new,
            "pad_id": config["vocab_size"] - 1}))
    return calls


def _cache_calls(gen: torch.Generator) -> list[ProbeCall]:
    calls = []
    for _ in range(2):
        config = model_config(gen)
        sizes = [_int(gen, 1, 2), 1, 1]
        calls.append(ProbeCall(f"{PROBES}:cache_api", {"config": config, "seed": _seed(gen), "sizes": sizes}))
    return calls


def _device_calls(gen: torch.Generator) -> list[ProbeCall]:
    """A prefill and a step, without padding and with a left-padded batch."""
    calls = []
    for padded in (False, True):
        config = model_config(gen)
        context = config["context_length"]
        prefill = _int(gen, 1, context - 1)
        idx = _tokens(gen, config, (2, prefill + 1))
        pad_mask = None
        if padded:
            pad_mask = torch.zeros(2, prefill + 1, dtype=torch.bool)
            pad_mask[1, :_int(gen, 0, prefill - 1)] = True
        calls.append(ProbeCall(f"{PROBES}:cached_placement", {"config": config, "idx": idx, "prefill": prefill,
                                                             "pad_mask": pad_mask}))
    return calls


def _pad_invariant(submitted: object, expected: object) -> str | None:
    """The rows with other pad tokens, and with the pad token's embedding
    moved, equal the rows (1e-9; the pad token's own logit aside: a tied
    head moves it), judged here from the returned tensors."""
    rows = submitted["rows"]
    vocab = torch.arange(rows[0].size(-1)) != rows[0].size(-1) - 1   # the pad id is the last id
    same = len(submitted["again"]) == len(expected["again"]) and all(
        torch.allclose(a[:, vocab], r[:, vocab], atol=1e-9, rtol=0, equal_nan=True)
        for run in submitted["again"] for a, r in zip(run, rows, strict=True))
    return None if same else "the logits depend on the padding"


def _unmodified(submitted: object, expected: object) -> str | None:
    """The inputs after the call equal the reference's (untouched ones),
    judged here on the tensors, not on the child's word."""
    return deep_close(atol=0, rtol=0)(submitted["inputs_after"], expected["inputs_after"]) and "modified its input"


def _returned_so_far(submitted: object, expected: object) -> str | None:
    reason = deep_close(atol=0, rtol=0)(submitted["returned"], expected["returned"])
    return reason and "append does not return all keys and values so far"


CHECKS = requiring([
    Check(
        id="14-steps",
        weight=4,
        message=text("forward_cached, a prefill then one token at a time up to the whole context: at every step "
                     "the logits of the full recomputation (float64), and len(cache) counting the positions",
                     "forward_cached：先预填充，再逐个 token 直到整个上下文：每一步的 logits 都等于完整重算的结果"
                     "（float64），len(cache) 等于已缓存的位置数"),
        calls=lambda gen: _step_calls(gen, chunked=False),
        compare=all_of(tensors_close("logits", **F64), plain_equal("lengths", reason="wrong len(cache)")),
        pitfalls=("cache-position-offset", "cache-mask-rows"),
    ),
    Check(
        id="14-chunks",
        weight=2,
        message=text("forward_cached with chunks of several new tokens after the prefill: the logits of the full "
                     "recomputation",
                     "预填充之后每次输入多个新 token 的 forward_cached：logits 等于完整重算的结果"),
        calls=lambda gen: _step_calls(gen, chunked=True),
        compare=all_of(tensors_close("logits", **F64), plain_equal("lengths", reason="wrong len(cache)")),
        pitfalls=("cache-chunk-unmasked", "cache-mask-rows", "cache-position-offset"),
        seed=1,
    ),
    Check(
        id="14-generate",
        weight=2.5,
        message=text("generate_cached returns the tokens of greedy decoding by full recomputation, also past "
                     "context_length (the last context_length tokens)",
                     "generate_cached 返回的 token 与完整重算的贪心解码相同，超过 context_length 时也一样"
                     "（使用最后 context_length 个 token）"),
        calls=_generate_calls,
        compare=all_of(tensors_close("tokens"), plain_equal("inputs_unchanged", reason="modified its input"),
                       _unmodified),
        pitfalls=("cache-past-context", "cache-position-offset", "cache-mask-rows"),
        seed=2,
    ),
    Check(
        id="14-context-limit",
        weight=1,
        message=text("the cache never grows past context_length: append to a full cache and forward_cached past "
                     "the context raise ValueError",
                     "缓存永远不会超过 context_length：向已满的缓存 append、或 forward_cached 超出上下文时抛出 "
                     "ValueError"),
        calls=_limit_calls,
        compare=all_of(error_type_equal("append"), error_type_equal("forward"),
                       plain_equal("length", reason="the cache changed although the call failed"),
                       plain_equal("after_refusal", reason="a refused append stored its positions")),
        pitfalls=("cache-past-context",),
        seed=3,
    ),
    Check(
        id="14-padding",
        weight=3,
        message=text("left-padded prompts through forward_cached (prefill and one step): each prompt's logits "
                     "are those of the prompt alone, whatever the pad tokens and their embedding",
                     "左侧填充的提示经过 forward_cached（预填充和一步）：每个提示的 logits 都与单独计算时相同，"
                     "与 pad token 及其嵌入无关"),
        calls=_padding_calls,
        compare=all_of(deep_close(**F64, ignore=("pad_invariant", "again")),
                       plain_equal("pad_invariant", reason="the logits depend on the padding"),
                       _pad_invariant),
        pitfalls=("padding-attended", "padding-positions", "softmax-all-masked-nan"),
        seed=4,
    ),
    Check(
        id="14-batch",
        weight=2.5,
        message=text("generate_batch: each prompt followed by the tokens it gets when generated alone",
                     "generate_batch：每个提示后面接的 token 与单独生成它时相同"),
        calls=_batch_calls,
        compare=all_of(deep_close(ignore=("inputs_unchanged", "inputs_after")),
                       plain_equal("inputs_unchanged", reason="modified its input"), _unmodified),
        pitfalls=("padding-attended", "padding-positions", "softmax-all-masked-nan"),
        seed=5,
    ),
    Check(
        id="14-batch-too-long",
        weight=0.5,
        message=text("generate_batch raises ValueError when the longest prompt plus max_new_tokens exceeds "
                     "context_length",
                     "最长提示加上 max_new_tokens 超过 context_length 时，generate_batch 抛出 ValueError"),
        calls=lambda gen: _batch_calls(gen, too_long=True),
        compare=error_type_equal(),
        seed=6,
    ),
    Check(
        id="14-cache",
        weight=1,
        message=text("KVCache: len() of a new cache is 0 and counts the positions appended; append returns all of "
                     "the layer's keys and values so far, in order",
                     "KVCache：新缓存的 len() 为 0，之后等于已追加的位置数；append 按顺序返回该层至今所有的 key 和 value"),
        calls=_cache_calls,
        compare=all_of(plain_equal("lengths", reason="wrong len(cache)"),
                       plain_equal("concatenated", reason="append does not return all keys and values so far"),
                       _returned_so_far),
        seed=7,
    ),
    *COST_CHECKS,
    device_check("14-device", _device_calls, owner="forward_cached", pitfalls=(), seed=8),
    no_forbidden_calls("14", requires=("14-steps",)),
], {
    # Values right without the work are not the exercise: each check pays only
    # once the cached work it relies on is measured to cost far less than
    # recomputing (grader/checks/kv_cache_cost.py).
    "14-steps": ("14-cache-cost",), "14-chunks": ("14-cache-cost", "14-chunks-cost"),
    "14-padding": ("14-cache-cost", "14-padding-cost"),
    "14-generate": ("14-cache-cost", "14-generate-cost"), "14-batch": ("14-cache-cost", "14-batch-cost"),
    "14-context-limit": ("14-steps", "14-cache-cost"),
    "14-batch-too-long": ("14-batch", "14-cache-cost", "14-batch-cost"),
    "14-cache": ("14-steps", "14-cache-cost"), "14-device": ("14-steps", "14-cache-cost"),
    "14-no-forbidden-calls": ("14-cache-cost",), "14-generate-cost": ("14-cache-cost",),
    "14-batch-cost": ("14-cache-cost",), "14-chunks-cost": ("14-cache-cost",),
    "14-padding-cost": ("14-cache-cost",)})
