"""The hidden inputs of exercise 06's checks (grader/checks/multihead.py):
random sizes and configs, seeded weights by name, and the probe calls
built from them. Every builder takes the check's generator, so a check's
calls are the same on every run.
"""
from __future__ import annotations

import torch

from coursekit.probes.multihead import random_weights
from grader.checks.devices import placement_call
from grader.sandbox import ProbeCall

P = "coursekit.probes.multihead:"
SPLIT, MERGE, ROUND_TRIP = P + "split_heads_output", P + "merge_heads_output", P + "round_trips"
EXCEPTION, FORWARD_EXCEPTION = P + "exception_from", P + "forward_exception"
FORWARD, FORWARD_IN, STATE = P + "forward", P + "forward_in", P + "state"
SEQUENCE, GRADIENTS, FIXED_DROPOUT = P + "calls_in_sequence", P + "gradients", P + "forward_fixed_dropout"
MHA, WRAPPER = "MultiHeadAttention", "MultiHeadAttentionWrapper"


def _int(gen: torch.Generator, low: int, high: int) -> int:
    """A random int in [low, high], both included."""
    return int(torch.randint(low, high + 1, (1,), generator=gen))


def _seed(gen: torch.Generator) -> int:
    return _int(gen, 0, 2**31 - 1)


def _randn(gen: torch.Generator, *shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.randn(*shape, generator=gen, dtype=dtype)


def _sizes(gen: torch.Generator, index: int, count: int) -> tuple[int, int, int, int]:
    """(b, n, h, hd). Most cases have b, n, h all different, h >= 2 and
    n >= 2 (there a split or merge that skips the transpose gives the right
    shape and wrong numbers); the last three have b = 1, n = 1 and h = 1."""
    while len({b := _int(gen, 1, 4), n := _int(gen, 2, 6), h := _int(gen, 2, 4)}) < 3:
        pass
    hd, edge = _int(gen, 1, 4), count - index
    return (1 if edge == 3 else b), (1 if edge == 2 else n), (1 if edge == 1 else h), hd


def split_merge_calls(gen: torch.Generator, probe: str, count: int) -> list[ProbeCall]:
    calls = []
    for i in range(count):
        b, n, h, hd = _sizes(gen, i, count)
        dtype = torch.float64 if i % 3 == 2 else torch.float32
        if probe == SPLIT:
            calls.append(ProbeCall(SPLIT, {"x": _randn(gen, b, n, h * hd, dtype=dtype), "num_heads": h}))
        else:  # contiguous, as the output of weights @ v is
            calls.append(ProbeCall(MERGE, {"x": _randn(gen, b, h, n, hd, dtype=dtype)}))
    return calls


def round_trip_calls(gen: torch.Generator, count: int) -> list[ProbeCall]:
    calls = []
    for i in range(count):
        b, n, h, hd = _sizes(gen, i, count + 3)  # never the edges: h = 1 has nothing to split
        x = _randn(gen, _int(gen, 1, 3), _int(gen, 2, 5), h * _int(gen, 1, 3))
        calls.append(ProbeCall(ROUND_TRIP, {"x": x, "y": _randn(gen, b, h, n, hd)}))
    return calls


def split_indivisible(gen: torch.Generator) -> list[ProbeCall]:
    return [ProbeCall(EXCEPTION, {"name": "split_heads", "args": [_randn(gen, _int(gen, 1, 3), _int(gen, 1, 4), d), h]})
            for d, h in ((7, 2), (5, 3), (6, 4), (3, 2))]


def config(d_in: int, d_out: int, context_length: int, num_heads: int, dropout: float = 0.0,
           qkv_bias: bool = False) -> dict:
    return {"d_in": d_in, "d_out": d_out, "context_length": context_length, "dropout": dropout,
            "num_heads": num_heads, "qkv_bias": qkv_bias}


def mha_config(gen: torch.Generator, num_heads: int, dropout: float = 0.0) -> dict:
    """d_out = num_heads * head_dim, d_in mostly different from d_out."""
    head_dim = _int(gen, 1, 4) if num_heads > 2 else _int(gen, 2, 4)
    return config(_int(gen, 2, 7), num_heads * head_dim, _int(gen, 3, 7), num_heads, dropout,
                  qkv_bias=bool(_int(gen, 0, 1)))


def wrapper_config(gen: torch.Generator, num_heads: int, dropout: float = 0.0) -> dict:
    return config(_int(gen, 2, 6), _int(gen, 1, 4), _int(gen, 3, 7), num_heads, dropout,
                  qkv_bias=bool(_int(gen, 0, 1)))


def _weights(gen: torch.Generator, class_name: str, cfg: dict, dtype: torch.dtype = torch.float32) -> dict:
    drawn = random_weights(class_name, cfg, seed=_seed(gen))
    return {name: w.to(dtype) for name, w in drawn.items()}


def forward_calls(gen: torch.Generator, class_name: str, heads: list[int], *, shorter: bool = False,
                  dropout: float = 0.0, train: bool = False,
                  dtype: torch.dtype = torch.float32) -> list[ProbeCall]:
    """One forward pass per entry of ``heads`` (its number of heads), on a
    random config; the input has context_length tokens, or fewer with
    ``shorter``. The first call has a batch of one. ``train``: training
    mode, with dropout masks drawn from a seed (see forward_fixed_dropout)."""
    make_config = mha_config if class_name == MHA else wrapper_config
    calls = []
    for i, h in enumerate(heads):
        cfg = make_config(gen, h, dropout)
        ctx = cfg["context_length"]
        n = _int(gen, 1, ctx - 1) if shorter else ctx
        b = 1 if i == 0 else _int(gen, 2, 3)
        x = _randn(gen, b, n, cfg["d_in"], dtype=dtype)
        kwargs = {"class_name": class_name, "config": cfg, "x": x,
                  "weights": _weights(gen, class_name, cfg, dtype), "seed": _seed(gen)}
        if train:
            calls.append(ProbeCall(FIXED_DROPOUT, kwargs))
        elif dtype == torch.float32:
            calls.append(ProbeCall(FORWARD, kwargs))
        else:
            calls.append(ProbeCall(FORWARD_IN, kwargs | {"dtype": dtype}))
    return calls


def state_calls(class_name: str, configs: list[dict]) -> list[ProbeCall]:
    return [ProbeCall(STATE, {"class_name": class_name, "config": cfg}) for cfg in configs]


def constructor_calls(gen: torch.Generator) -> list[ProbeCall]:
    """MultiHeadAttention configs, d_out divisible by num_heads or not."""
    calls = []
    for d_out, h in ((6, 4), (5, 2), (7, 3), (6, 3), (4, 4), (5, 1)):
        cfg = config(_int(gen, 2, 6), d_out, _int(gen, 2, 6), h)
        calls.append(ProbeCall(EXCEPTION, {"name": MHA, "args": [], "kwargs": cfg}))
    return calls


def longer_calls(gen: torch.Generator) -> list[ProbeCall]:
    calls = []
    for h in (2, 3):
        cfg = mha_config(gen, h)
        x = _randn(gen, _int(gen, 1, 3), cfg["context_length"] + _int(gen, 1, 3), cfg["d_in"])
        calls.append(ProbeCall(FORWARD_EXCEPTION, {"class_name": MHA, "config": cfg, "x": x}))
    return calls


def sequence_calls(gen: torch.Generator) -> list[ProbeCall]:
    """One module called on a full-length input, shorter ones, then full
    length again: a mask modified in place shows in the later calls."""
    calls = []
    for h in (2, 3):
        cfg = mha_config(gen, h)
        ctx, b = cfg["context_length"], _int(gen, 1, 3)
        lengths = [ctx, _int(gen, 1, ctx - 1), ctx, _int(gen, 1, ctx - 1), ctx]
        inputs = [_randn(gen, b, n, cfg["d_in"]) for n in lengths]
        calls.append(ProbeCall(SEQUENCE, {"class_name": MHA, "config": cfg, "inputs": inputs,
                                          "weights": _weights(gen, MHA, cfg)}))
    return calls


# Inputs this many times larger make the scores ~60 times larger than in the
# other checks (hundreds): exp() overflows float32 unless the softmax
# subtracts each row's maximum first (torch.softmax does).
LARGE = 8.0


def large_scores(gen: torch.Generator) -> list[ProbeCall]:
    calls = forward_calls(gen, MHA, [2, 3])  # the wrapper's heads are the shipped CausalAttention
    return [ProbeCall(call.probe, call.kwargs | {"x": call.kwargs["x"] * LARGE}) for call in calls]


def placements(gen: torch.Generator) -> list[ProbeCall]:
    """Forward passes on the meta device, shorter than context_length, of
    MultiHeadAttention and of the wrapper."""
    calls = []
    for class_name, h, shorter in ((MHA, 3, True), (WRAPPER, 2, True)):
        cfg = (mha_config if class_name == MHA else wrapper_config)(gen, h)
        n = _int(gen, 1, cfg["context_length"] - 1) if shorter else cfg["context_length"]
        calls.append(placement_call(class_name, cfg, _randn(gen, _int(gen, 1, 3), n, cfg["d_in"])))
    return calls


def gradient_calls(gen: torch.Generator, class_name: str, heads: list[int]) -> list[ProbeCall]:
    make_config = mha_config if class_name == MHA else wrapper_config
    calls = []
    for h in heads:
        cfg = make_config(gen, h)
        n, b = cfg["context_length"], _int(gen, 1, 3)  # full length: shorter inputs are another check
        out_features = cfg["d_out"] * (h if class_name == WRAPPER else 1)
        calls.append(ProbeCall(GRADIENTS, {"class_name": class_name, "config": cfg, "x": _randn(gen, b, n, cfg["d_in"]),
                                           "weights": _weights(gen, class_name, cfg),
                                           "upstream": _randn(gen, b, n, out_features)}))
    return calls
