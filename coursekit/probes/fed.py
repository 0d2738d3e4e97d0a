"""Tokens fed to a timed cached step so that no later token exists in the
child before the step that decides it.

A cached step that could read the tokens still to come (a view's storage, or
the probe's own frame: the child shares its process with the probes) could
run one full forward over all of them at the first step and hand out slices
after: right values, no cache, and the cost of one recomputation spread over
every step. So the probe sends only the first chunk; every later chunk is
drawn from the logits the step just returned, one token per position.

Drawn, not greedy: a greedy path can be guessed where the model's top token
hardly depends on more than the last one (18's model, with no positions and
a wide window, cycled through two tokens), and a step could then speculate
the whole path and check it with one forward. Each token is the argmax of
the logits plus Gumbel noise from a fixed generator (the Gumbel-max trick: a
draw from their softmax), so it depends on every logit, not on the top one
alone. The noise is no secret; the logits are the work.
"""
from __future__ import annotations

from collections.abc import Callable

import torch

NOISE_SEED = 0


def fed_steps(step: Callable[[torch.Tensor], torch.Tensor], first: torch.Tensor, count: int) -> torch.Tensor:
    """The logits (b, count, vocab) of ``count`` tokens fed to ``step`` in
    chunks of ``first.size(1)``: ``first`` (b, c), then each chunk drawn
    from the previous chunk's logits at each of its positions (the last one
    cut to what remains)."""
    noise = torch.Generator().manual_seed(NOISE_SEED)
    logits, new, fed = [], first, 0
    while fed < count:
        new = new[:, :count - fed].clone()   # a tensor of its own, no view of anything larger
        out = step(new)
        logits.append(out)
        fed += new.size(1)
        scores = torch.as_tensor(out).detach().to(torch.float64)
        uniform = torch.rand(scores.shape, generator=noise, dtype=torch.float64).clamp_min(1e-300)
        new = (scores - torch.log(-torch.log(uniform))).argmax(dim=-1)
    return torch.cat(logits, dim=1)
