"""The hidden inputs of exercise 05's checks (grader/checks/causal_attention.py):
random sizes, inputs and seeded weights (``coursekit.probes.causal_attention``),
and the probe calls built from them. Every builder takes the check's
generator, so a check's calls are the same on every run.
"""
from __future__ import annotations

import torch

from coursekit.probes import causal_attention as probe
from grader.checks.devices import placement_call
from grader.sandbox import ProbeCall

P = "coursekit.probes.causal_attention:"
FORWARD, RAISED, STRUCTURE = P + "forward", P + "raised", P + "structure"
AFTER_TO, DEVICES, GRADIENTS = P + "after_to", P + "devices", P + "all_gradients"
DROPOUT = P + "dropout_runs"


def randint(gen: torch.Generator, low: int, high: int) -> int:
    """An int in [low, high], inclusive."""
    return int(torch.randint(low, high + 1, (1,), generator=gen))


def random_config(gen: torch.Generator, *, shorter: bool | None = None, batched: bool = True,
                  dtype: torch.dtype = torch.float32) -> dict:
    """Random sizes, input and seeded weights for ``probe.forward`` and the
    like. ``shorter``: n < context_length (True), n == context_length
    (False) or either (None). Odd sizes and batch 1 come up often."""
    n = randint(gen, 1, 7)
    if shorter is None:
        shorter = bool(randint(gen, 0, 1))
    context_length = n + (randint(gen, 1, 4) if shorter else 0)
    d_in, d_out, batch = randint(gen, 1, 8), randint(gen, 1, 6), randint(gen, 1, 3)
    qkv_bias = bool(randint(gen, 0, 1))
    shape = (batch, n, d_in) if batched else (n, d_in)
    x = torch.randn(shape, generator=gen, dtype=dtype)
    weights = probe.random_weights(d_in, d_out, qkv_bias, seed=randint(gen, 0, 2**30), dtype=dtype)
    return {"x": x, "d_out": d_out, "context_length": context_length, "qkv_bias": qkv_bias, "weights": weights}


def forward_calls(gen: torch.Generator, count: int, **options: bool) -> list[ProbeCall]:
    return [ProbeCall(FORWARD, random_config(gen, **options)) for _ in range(count)]


def revealing_calls(gen: torch.Generator, count: int, shorter: bool = True) -> list[ProbeCall]:
    """Inputs whose values are the identity: the output is the attention
    weight matrix itself, read without any hook. ``shorter``: n may be
    below context_length."""
    calls = []
    for i in range(count):
        n, qkv_bias = randint(gen, 2, 7), bool(i % 2)
        x, weights = probe.revealing_setup(randint(gen, 1, 3), n, qkv_bias=qkv_bias, seed=randint(gen, 0, 2**30))
        calls.append(ProbeCall(FORWARD, {"x": x, "d_out": n, "context_length": n + randint(gen, 0, 2 * shorter),
                                         "qkv_bias": qkv_bias, "weights": weights}))
    return calls


def too_long_calls(gen: torch.Generator) -> list[ProbeCall]:
    calls = []
    for batched in (True, True, False):
        context_length = randint(gen, 1, 5)
        n = context_length + randint(gen, 1, 3)
        d_in = randint(gen, 2, 6)
        x = torch.randn((2, n, d_in) if batched else (n, d_in), generator=gen)
        calls.append(ProbeCall(RAISED, {"x": x, "d_out": randint(gen, 1, 4), "context_length": context_length}))
    return calls


# Inputs this many times larger make the scores ~60 times larger than in the
# other checks (hundreds): exp() overflows float32 unless the softmax
# subtracts each row's maximum first (torch.softmax does).
LARGE = 8.0


def large_score_calls(gen: torch.Generator) -> list[ProbeCall]:
    calls = []
    for batched in (True, True, False):
        config = random_config(gen, batched=batched)
        calls.append(ProbeCall(FORWARD, config | {"x": config["x"] * LARGE}))
    return calls


def placement_calls(gen: torch.Generator) -> list[ProbeCall]:
    """Forward passes on the meta device: batched and shorter than
    context_length, then one unbatched at full length."""
    calls = []
    for batched, shorter in ((True, True), (False, False)):
        config = random_config(gen, shorter=shorter, batched=batched)
        d_in = config["x"].size(-1)
        calls.append(placement_call("CausalAttention", {"qkv_bias": config["qkv_bias"]}, config["x"],
                                    init_args=(d_in, config["d_out"], config["context_length"], 0.0)))
    return calls


def structure_calls(gen: torch.Generator) -> list[ProbeCall]:
    return [ProbeCall(STRUCTURE, {"d_in": randint(gen, 1, 8), "d_out": randint(gen, 1, 6),
                                  "context_length": randint(gen, 1, 9), "dropout": p, "qkv_bias": bias})
            for p, bias in ((0.0, False), (0.25, True), (0.6, False))]


def dropout_calls(gen: torch.Generator, count: int, *, train: bool) -> list[ProbeCall]:
    """Dropout p in [0.2, 0.8] under two seeds, against the same weights
    without dropout; some calls unbatched. Train mode uses inputs whose
    values are the identity, so the output is the weight matrix and dropout
    on it shows entry by entry. Inputs as long as context_length: slicing
    the mask is checked elsewhere."""
    calls = []
    for i in range(count):
        if train:
            kwargs = revealing_calls(gen, 1, shorter=False)[0].kwargs
            if i % 3 == 2:
                kwargs["x"] = kwargs["x"][0]
        else:
            kwargs = random_config(gen, batched=i % 3 != 2, shorter=False)
        p = round(0.2 + 0.6 * float(torch.rand((), generator=gen)), 3)
        seeds = [randint(gen, 0, 10_000), randint(gen, 0, 10_000)]
        calls.append(ProbeCall(DROPOUT, kwargs | {"dropout": p, "train": train, "seeds": seeds}))
    return calls


def repeated_calls(gen: torch.Generator) -> list[ProbeCall]:
    """Three calls on one module (eval mode, so dropout mistakes do not
    show here): shorter than context_length, as long, and unbatched."""
    return [ProbeCall(FORWARD, random_config(gen, shorter=True) | {"calls": 3}),
            ProbeCall(FORWARD, random_config(gen, shorter=False) | {"calls": 3}),
            ProbeCall(FORWARD, random_config(gen, shorter=True, batched=False) | {"calls": 3})]


def gradient_calls(gen: torch.Generator) -> list[ProbeCall]:
    """Eval mode in float32 (batched, unbatched) and float64; train mode
    with dropout under a fixed seed."""
    return [ProbeCall(GRADIENTS, random_config(gen, batched=batched, dtype=dtype)
                      | {"dropout": 0.4 * train, "train": train, "seed": randint(gen, 0, 10_000),
                         "upstream_seed": randint(gen, 0, 10_000)})
            for dtype, batched, train in ((torch.float32, True, False), (torch.float32, False, False),
                                          (torch.float64, True, False), (torch.float32, True, True))]
