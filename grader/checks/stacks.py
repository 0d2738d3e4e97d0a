"""What the hidden checks of exercises 09 (encoder) and 10 (decoder) share:
random sizes and masks, PyTorch's own layers as the source of seeded
weights (:mod:`grader.torch_oracles`), the kinds of probe call,
comparisons of nested results (gradients by parameter name), and the checks
themselves, declared once (:func:`stack_checks`) and built from a table of
rows per exercise.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from coursekit.compare import compare_tensors
from grader import torch_oracles as oracles
from grader.checks import (ATTENTION_LAYER, Check, Compare, all_of, no_forbidden_calls, observing, plain_equal, requiring,
                           tensors_close)
from grader.checks.devices import device_check, placement_call
from grader.course import Text
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


# --- the checks every layer-and-stack exercise shares, declared once ------------
#
# Exercises 09 and 10 check the same things about a layer and a stack of them
# (loaded weights, float64, gradients, train-mode dropout, inputs unchanged,
# registered layers, behaviour, devices); only the sublayers, the forward's
# inputs and the probes differ. A :class:`StackKind` says what differs, a
# table of :class:`Case` rows says which checks and with what weight, and
# :func:`stack_checks` builds them. A third stack is one more kind and table.

Inputs = Callable[[torch.Generator, int, str, torch.dtype, dict], dict]


@dataclass(frozen=True)
class StackKind:
    """What one exercise's layer and stack are made of."""

    exercise: str                      # "09"
    word: str                          # "encoder": its probe module, probe names and check ids
    layer: str                         # the layer's class: "EncoderLayer"
    stack: str                         # the stack's class: "Encoder"
    names: str                         # the layer's sublayers, as messages name them
    oracle: Callable[..., torch.nn.Module]      # a seeded torch layer (grader.torch_oracles)
    to_course: Callable[[dict], Weights]        # its state_dict under the contract's names
    # (gen, d_model, mask kind, dtype, options) -> the forward's inputs: sizes, tensors, masks
    inputs: Inputs
    behaviour_inputs: Callable[[torch.Generator, int], dict]   # (gen, d_model) -> a fresh layer's inputs
    placement_args: Callable[[torch.Generator, int, str], tuple]  # (gen, d_model, mask kind) -> forward's args
    placements: tuple[tuple[str, bool, str], ...]               # (class, is a stack, mask kind) on the meta device
    stack_names: str = "layers.0.self_attn, ..."

    def probe(self, what: str) -> str:
        """``coursekit.probes.encoder:encoder_<what>``."""
        return f"coursekit.probes.{self.word}:{self.word}_{what}"


@dataclass(frozen=True)
class Case:
    """One row of an exercise's table: a check of the layer (or, with
    ``stack``, of the stack) made of ``count`` calls of one kind:

    - ``output``, ``float64``, ``train``, ``gradients``: given weights, the
      mask kinds taking turns; ``unchanged``: outputs, inputs left as they were;
    - ``behaviour``: a fresh layer's facts; ``structure``: what it registers;
    - ``device``: forward passes on the meta device (the kind's placements).
    """

    id: str
    what: str
    seed: int
    message: Text | None = None                  # None: the kind's own (device checks)
    count: int = 0
    masks: tuple[str, ...] = ()
    stack: bool = False
    weight: float = 1.0
    pitfalls: tuple[str, ...] = ()
    options: dict = field(default_factory=dict)   # silenced=True, or the kind's own (same_lengths=True)


_PROBE_OF = {"float64": "float64_values", "train": "seeded_output", "gradients": "gradient_values"}


def layer_weights(kind: StackKind, config: dict, gen: torch.Generator, silenced: bool = False) -> Weights:
    """Seeded weights of a layer (or of a stack, when ``config`` has
    ``num_layers``) under the contract's names. ``silenced``: each sublayer
    outputs 0 and the norms are tied, so only the residual path is left."""
    layers = oracle_layers(kind.oracle, config, config.get("num_layers", 1), gen)
    if "num_layers" in config:
        return oracles.stack_to_course(layers)
    if silenced:
        oracles.tie_norms_(oracles.silence_sublayers_(layers[0]))
    return kind.to_course(layers[0].state_dict())


def weighted_calls(kind: StackKind, gen: torch.Generator, case: Case) -> list[ProbeCall]:
    """``case.count`` calls, each on random sizes with its own seeded weights;
    in ``gradients``, every other call trains."""
    what = "output" if case.what == "unchanged" else case.what
    options = {k: v for k, v in case.options.items() if k != "silenced"}
    calls = []
    for i in range(case.count):
        train = what == "train" or (what == "gradients" and i % 2 == 1)
        config = layer_config(gen, case.stack, train)
        weights = layer_weights(kind, config, gen, case.options.get("silenced", False))
        dtype = torch.float64 if what == "float64" else torch.float32
        inputs = kind.inputs(gen, config["d_model"], case.masks[i % len(case.masks)], dtype, options)
        probe = kind.probe(_PROBE_OF.get(what) or ("output" if case.stack else "layer_output"))
        calls.append(call_of(probe, what, gen, {"config": config, "weights": weights, **inputs}, case.stack, train))
    return calls


def behaviour_calls(kind: StackKind, gen: torch.Generator, case: Case) -> list[ProbeCall]:
    calls = []
    for _ in range(case.count):
        config = behaviour_config(gen, case.stack)
        inputs = kind.behaviour_inputs(gen, config["d_model"])
        calls.append(ProbeCall(kind.probe("behaviour"), {"config": config, **inputs, "stack": case.stack}))
    return calls


def structure_calls(kind: StackKind, gen: torch.Generator, case: Case) -> list[ProbeCall]:
    probe = kind.probe("structure" if case.stack else "layer_structure")
    return [ProbeCall(probe, {"config": layer_config(gen, case.stack)}) for _ in range(case.count)]


def placement_calls(kind: StackKind, gen: torch.Generator, case: Case) -> list[ProbeCall]:
    calls = []
    for cls, stack, masks in kind.placements:
        config = layer_config(gen, stack)
        calls.append(placement_call(cls, config, *kind.placement_args(gen, config["d_model"], masks)))
    return calls


def _compare(kind: StackKind, case: Case) -> Compare:
    names = kind.stack_names if case.stack else kind.names
    loaded = loaded_and_close(kind.stack_names, atol=2e-5) if case.stack else loaded_and_close(kind.names)
    if case.what == "structure" and case.stack:
        return all_of(plain_equal("hidden_lists", reason="layers kept in a plain Python list"),
                      plain_equal("layers", reason=f"layers is not an nn.ModuleList of separate {kind.layer}s"),
                      plain_equal("parameters", reason="the registered parameters differ from the contract's"))
    return {
        "behaviour": BEHAVIOUR_SAME,
        "structure": plain_equal("parameters", reason="the registered parameters differ from the contract's "
                                                      "(names or shapes)"),
        "output": loaded, "train": loaded,
        # Judged on the inputs alone (issue 31): wrong values are the value
        # checks' to report; it waits on the layer's outputs (stack_checks).
        "unchanged": plain_equal("inputs_unchanged", reason="modified an input in place"),
        "float64": float64_close(names),
        "gradients": gradients_close(names),
    }[case.what]


_CALLS = {"behaviour": behaviour_calls, "structure": structure_calls}


def _check(kind: StackKind, case: Case) -> Check:
    if case.what == "device":
        return device_check(case.id, lambda gen: placement_calls(kind, gen, case),
                            owner=f"{kind.layer} and {kind.stack}", pitfalls=case.pitfalls, seed=case.seed)
    if case.message is None:
        raise ValueError(f"{case.id}: a {case.what} check needs a message")
    build = _CALLS.get(case.what, weighted_calls)
    return Check(id=case.id, weight=case.weight, message=case.message, calls=lambda gen: build(kind, gen, case),
                 compare=_compare(kind, case), pitfalls=case.pitfalls, seed=case.seed)


def stack_checks(kind: StackKind, table: list[Case]) -> list[Check]:
    """The exercise's checks, in the table's order, then its forbidden-calls
    check. Behaviour facts, unchanged inputs and registered structure count
    only once the layer (the first plain ``output`` row) and the stack (the
    first stacked one) compute their outputs; devices only once the stack does."""
    first = {(c.what, c.stack): c.id for c in reversed(table)}
    layer_core, stack_core = first[("output", False)], first[("output", True)]
    requires = {c.id: (stack_core if c.stack or c.what == "device" else layer_core,)
                for c in table if c.what in ("behaviour", "structure", "device", "unchanged")}
    checks = [_check(kind, case) for case in table]
    checks.append(no_forbidden_calls(kind.exercise, requires=(first[("behaviour", False)],),
                                     kernels=(ATTENTION_LAYER,)))
    # Every call recorded: PyTorch's attention layers (nn.MultiheadAttention,
    # nn.Transformer*Layer, however reached) cost the check; the fused
    # scaled_dot_product_attention the README allows does not (issue 36).
    return observing(requiring(checks, requires), (ATTENTION_LAYER,))
