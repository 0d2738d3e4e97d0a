"""What the hidden checks of exercises 09 (encoder) and 10 (decoder) share:
random sizes and masks, PyTorch's own layers as the source of seeded
weights (:mod:`coursekit.probes.torch_oracles`), the kinds of probe call,
and comparisons of nested results (gradients by parameter name).
"""
from __future__ import annotations

from collections.abc import Callable

import torch

from coursekit.compare import compare_tensors
from grader.checks import Compare, all_of, plain_equal, tensors_close
from grader.sandbox import ProbeCall

Weights = dict[str, torch.Tensor]

# What a stack of layers gets wrong: a plain list, or one layer repeated.
STACK_PITFALLS = ("plain-list-layers", "repeated-layer")


def draw(gen: torch.Generator, low: int, high: int) -> int:
    """An int in ``[low, high]`` (both included) from ``gen``."""
    return int(torch.randint(low, high + 1, (1,), generator=gen))


def random_config(gen: torch.Generator) -> dict:
    """Sizes of one layer: 1 to 4 heads of 2 to 4 features (odd d_model
    included), an unrelated d_ff, and a dropout rate that eval mode must
    ignore."""
    num_heads, head_dim = draw(gen, 1, 4), draw(gen, 2, 4)
    rate = (0.0, 0.1, 0.3, 0.5)[draw(gen, 0, 3)]
    return {"d_model": num_heads * head_dim, "num_heads": num_heads, "d_ff": draw(gen, 3, 24), "dropout": rate}


def layer_config(gen: torch.Generator, stack: bool = False, train: bool = False) -> dict:
    """A layer's sizes (see :func:`random_config`), with 1 to 4 layers for a
    stack; in train mode the dropout rate is never 0."""
    config = random_config(gen)
    if train:
        config["dropout"] = (0.1, 0.3, 0.5)[draw(gen, 0, 2)]
    return {"num_layers": draw(gen, 1, 4), **config} if stack else config


def call_of(probe: str, kind: str, gen: torch.Generator, kwargs: dict, stack: bool, train: bool) -> ProbeCall:
    """The probe call of one ``kind`` of case (output, float64, train,
    gradients): ``kwargs`` holds config, weights and the forward's inputs."""
    if kind == "float64":
        kwargs = {**kwargs, "weights": as_float64(kwargs["weights"]), "stack": stack}
    elif kind == "train":
        kwargs = {**kwargs, "train": True, "seed": oracle_seed(gen), "stack": stack}
    elif kind == "gradients":
        kwargs = {**kwargs, "upstream": torch.randn(kwargs["x"].shape, generator=gen),
                  "train": train, "seed": oracle_seed(gen), "stack": stack}
    return ProbeCall(probe, kwargs)


def padding(gen: torch.Generator, batch: int, n: int, allow_empty: bool = True) -> torch.Tensor:
    """(batch, n) bool, True at padding; one sequence is full, and with
    ``allow_empty`` another may be all padding (its rows are fully blocked)."""
    lengths = torch.randint(0 if allow_empty else 1, n + 1, (batch,), generator=gen)
    lengths[draw(gen, 0, batch - 1)] = n
    return torch.arange(n) >= lengths[:, None]


def random_blocks(gen: torch.Generator, shape: tuple[int, ...]) -> torch.Tensor:
    """A bool mask of ``shape`` with ~40% blocked and one fully blocked row."""
    mask = torch.rand(shape, generator=gen) < 0.4
    mask[..., draw(gen, 0, shape[-2] - 1), :] = True
    return mask


def behaviour_config(gen: torch.Generator, stack: bool) -> dict:
    """Sizes for the checks on a fresh layer: d_model of at least 4, so that
    "normalised" is a clear-cut property, and dropout to see train vs eval."""
    config = random_config(gen)
    heads = config["num_heads"]
    config |= {"d_model": heads * max(config["d_model"] // heads, -(-4 // heads)), "dropout": 0.3}
    return {"num_layers": draw(gen, 2, 3), **config} if stack else config


def padded_lengths(gen: torch.Generator, batch: int, n: int) -> torch.Tensor:
    """(batch, n) bool, True at padding: the first sequence is full, every
    other one has between 1 and n - 1 real positions."""
    lengths = torch.randint(1, n, (batch,), generator=gen)
    lengths[0] = n
    return torch.arange(n) >= lengths[:, None]


def causal(n: int) -> torch.Tensor:
    return torch.ones(n, n, dtype=torch.bool).triu(diagonal=1)


def oracle_seed(gen: torch.Generator) -> int:
    return draw(gen, 0, 2**30)


def oracle_layers(make: Callable[..., torch.nn.Module], config: dict, count: int, gen: torch.Generator,
                  ) -> list[torch.nn.Module]:
    """``count`` torch layers with seeded random weights. Their creation
    draws from the global RNG before ``randomize_`` overwrites everything:
    fork it so that building the plan leaves the grader's RNG alone."""
    sizes = {k: config[k] for k in ("d_model", "num_heads", "d_ff")}
    with torch.random.fork_rng(devices=[]):
        return [make(**sizes, seed=oracle_seed(gen)) for _ in range(count)]


def as_float64(weights: Weights) -> Weights:
    return {name: w.to(torch.float64) for name, w in weights.items()}


def trees_close(*path: str, atol: float = 1e-5, rtol: float = 1e-4) -> Compare:
    """Dicts with the same keys, lists of the same length, tensors close,
    anything else equal, all the way down (e.g. gradients by parameter name)."""

    def walk(mine: object, theirs: object) -> str | None:
        if isinstance(theirs, dict):
            if not isinstance(mine, dict) or set(mine) != set(theirs):
                return "the parameter names differ from the contract's"
            return next((r for k in theirs if (r := walk(mine[k], theirs[k])) is not None), None)
        if isinstance(theirs, list):
            if not isinstance(mine, list) or len(mine) != len(theirs):
                return "the result is missing a part"
            return next((r for m, t in zip(mine, theirs) if (r := walk(m, t)) is not None), None)
        if isinstance(theirs, torch.Tensor):
            if mine is None:
                return "no gradient where one was expected"
            mismatch = compare_tensors(mine, theirs, atol=atol, rtol=rtol)
            return None if mismatch is None else "wrong values"
        if theirs is None:
            return None if mine is None else "a gradient where none was expected"
        return None if type(mine) is type(theirs) and mine == theirs else "wrong result"

    def compare(submitted: object, expected: object) -> str | None:
        for key in path:
            if not isinstance(submitted, dict) or key not in submitted:
                return "the result is missing a part"
            submitted, expected = submitted[key], expected[key]
        return walk(submitted, expected)

    return compare


def loaded_and_close(names: str, atol: float = 1e-5, rtol: float = 1e-4) -> Compare:
    """The weights loaded into parameters of the contract's names, and the
    output agrees."""
    return all_of(plain_equal("load", reason=f"the parameter names differ from the contract's ({names})"),
                  tensors_close("output", atol=atol, rtol=rtol))


def gradients_close(names: str) -> Compare:
    """Loaded by name, and the gradients of the inputs and parameters agree
    (a little looser than outputs: backward sums more terms)."""
    return all_of(plain_equal("load", reason=f"the parameter names differ from the contract's ({names})"),
                  trees_close("inputs", atol=1e-4, rtol=1e-3), trees_close("parameters", atol=1e-4, rtol=1e-3))


def float64_close(names: str) -> Compare:
    return all_of(loaded_and_close(names, atol=1e-10, rtol=1e-9),
                  plain_equal("parameter_dtypes", reason="some parameters are not float64"))


BEHAVIOUR_SAME = plain_equal(reason="behaves differently: output shape, normalisation, masking or dropout")
