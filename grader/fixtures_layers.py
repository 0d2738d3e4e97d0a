"""Stored values of the public tests of exercises 09 and 10 (see
grader/fixtures.py): the weights the tests load into the student's layers,
made here from PyTorch's own seeded layers (grader/torch_oracles.py) and
renamed to the course's names, and the reference's outputs with them.

The public test module names its weights (``WEIGHTS``: key -> sizes, torch
layer seeds, whether the sublayers are silenced) and its output cases
(``output_cases()``: key -> class, config, weights key, forward
arguments); both are read from it, so the test and its values stay in step.
Each reference output must also equal PyTorch's layers on the same weights:
what the tests' docstrings promise, checked where the values are made.
"""
from __future__ import annotations

from collections.abc import Callable
from types import ModuleType

import torch

from coursekit.probes import stacks
from grader import torch_oracles as oracles

Values = dict[str, torch.Tensor]
_KINDS: dict[str, tuple[Callable[..., torch.nn.Module], Callable[..., dict], Callable[..., torch.Tensor]]] = {
    "encoder": (oracles.torch_encoder_layer, oracles.encoder_layer_to_course, oracles.run_encoder_layers),
    "decoder": (oracles.torch_decoder_layer, oracles.decoder_layer_to_course, oracles.run_decoder_layers),
}


def _torch_layers(kind: str, sizes: tuple[int, int, int], seeds: tuple[int, ...], silenced: bool) -> list:
    make = _KINDS[kind][0]
    layers = [make(*sizes, seed=seed) for seed in seeds]
    return [oracles.tie_norms_(oracles.silence_sublayers_(layer)) for layer in layers] if silenced else layers


def _course_weights(kind: str, layers: list) -> Values:
    """One layer in the layer's names; several in the stack's (``layers.i.``)."""
    return _KINDS[kind][1](layers[0].state_dict()) if len(layers) == 1 else oracles.stack_to_course(layers)


def stored_weights(values: Values, key: str) -> Values:
    """The weights ``key`` among stored ``values`` (what the public tests load)."""
    prefix = f"weights {key} "
    return {name[len(prefix):]: t for name, t in values.items() if name.startswith(prefix)}


@torch.no_grad()
def layer_values(kind: str, reference: ModuleType, tests: ModuleType) -> Values:
    """The weights of ``tests.WEIGHTS`` and the reference's outputs on
    ``tests.output_cases``, checked against PyTorch's layers."""
    values: Values = {}
    layers = {}
    for key, (sizes, seeds, silenced) in tests.WEIGHTS.items():
        layers[key] = _torch_layers(kind, sizes, seeds, silenced)
        values.update({f"weights {key} {name}": t for name, t in _course_weights(kind, layers[key]).items()})
    weights = {key: stored_weights(values, key) for key in tests.WEIGHTS}
    for key, (cls, config, weights_key, args) in tests.output_cases().items():
        out = stacks.output(reference, cls, config, weights[weights_key], args)["output"]
        with torch.enable_grad():  # torch's own (not fast-path) implementation, as the hidden checks run it
            expected = _KINDS[kind][2](layers[weights_key], *args)
        if not torch.allclose(out, expected, atol=1e-5):
            raise AssertionError(f"{kind} fixture {key!r}: the reference differs from PyTorch's layers")
        values[f"output {key}"] = out
    return values


def encoder_09(reference: ModuleType, tests: ModuleType) -> Values:
    """Exercise 09: see :func:`layer_values`."""
    return layer_values("encoder", reference, tests)


def decoder_10(reference: ModuleType, tests: ModuleType) -> Values:
    """Exercise 10: see :func:`layer_values`."""
    return layer_values("decoder", reference, tests)
