"""Tokens fed to a timed cached step so that no later token exists in the
child before the step that decides it.

A cached step that could read the tokens still to come (a view's storage, or
the probe's own frame: the child shares its process with the probes) could
run one full forward over all of them at the first step and hand out slices
after: right values, no cache, and the cost of one recomputation spread over
every step. So the probe sends only the first chunk; every later chunk is the
greedy continuation of the logits the step just returned, one token per
position. Greedy decoding of the timed models does not settle into a cycle
(their weights are untied, 16's three times the usual scale:
tests/test_cached_steps_work.py), so guessing the path ahead saves nothing
either.
"""
from __future__ import annotations

from collections.abc import Callable

import torch


def greedy_feed(step: Callable[[torch.Tensor], torch.Tensor], first: torch.Tensor, count: int) -> torch.Tensor:
    """The logits (b, count, vocab) of ``count`` tokens fed to ``step`` in
    chunks of ``first.size(1)``: ``first`` (b, c), then each chunk the
    argmax of the previous chunk's logits at each of its positions (the last
    one cut to what remains)."""
    logits, new, fed = [], first, 0
    while fed < count:
        new = new[:, :count - fed].clone()   # a tensor of its own, no view of anything larger
        out = step(new)
        logits.append(out)
        fed += new.size(1)
        new = torch.as_tensor(out).detach().argmax(dim=-1)
    return torch.cat(logits, dim=1)
