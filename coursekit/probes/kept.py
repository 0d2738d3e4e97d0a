"""Models built ahead of the calls the grader times, by a call of their own.

The grader reads a child's CPU time around each measured call from outside
(grader/checks/work.py). Building a model with seeded weights at the size
14, 16 and 18 time costs 0.01 to 0.02 s in the sandbox's warm child (0.07
to 0.15 s in a cold process): a fifth to a quarter of what 14's cached
generation was timed at, a figure that varies from call to call, and no
part of the work measured. So a plan sends :func:`build_ahead` first; the
timed calls after it take the model with :func:`built`.

A child that empties this store only makes its own timed calls build the
model again, so costlier: what it does here can take points away, never
grant them.
"""
from __future__ import annotations

import json
from collections.abc import Callable
from types import ModuleType

from torch import nn

Build = Callable[[ModuleType, dict, int], nn.Module]

_MODELS: dict[tuple, nn.Module] = {}


def _key(build: Build, config: dict, seed: int) -> tuple:
    return build.__module__, build.__qualname__, json.dumps(config, sort_keys=True), seed


def build_ahead(build: Build, module: ModuleType, config: dict, seed: int) -> dict:
    """Build ``build(module, config, seed)`` and keep it (only it) for the
    timed calls that follow; nothing to compare."""
    _MODELS.clear()
    _MODELS[_key(build, config, seed)] = build(module, config, seed)
    return {}


def built(build: Build, module: ModuleType, config: dict, seed: int) -> nn.Module:
    """The model :func:`build_ahead` kept for these arguments, else a new
    one (whose construction then counts in the caller's time)."""
    found = _MODELS.get(_key(build, config, seed))
    return found if found is not None else build(module, config, seed)
