"""First-use costs a probe module pays when it is imported, not in a child.

Some parts of PyTorch load a great deal the first time they run: the
meta-device kernels import PyTorch's decompositions, and an optimiser's
first ``add_param_group`` imports ``torch._dynamo`` (together ~1 s). The
sandbox's fork-server imports a probe module before it forks the first
child that uses it (``grader.sandbox.server.load_probes``), so a module
whose calls need one of these calls it at import: the cost is paid once
per server, and never by a server grading exercises that need neither.
Neither touches the global random state: what a probe draws must not
depend on which modules happened to be imported before it.
"""
from __future__ import annotations

import torch
from torch import nn

# Only the fork-server pays at import (grader.sandbox.server.warm_up calls
# pay_at_import): in a student's own ``pytest exercises/NN`` the cost comes
# where it is first needed, or never (a stub fails before any meta
# operation: 05's stub run was 2 s over ``import torch``, 1 s of it this).
_AT_IMPORT = False
_DONE: set[str] = set()  # several probe modules ask for the same warm-up: it runs once


def pay_at_import() -> None:
    """From now on, :func:`meta_kernels` and :func:`optimizers` do their work."""
    global _AT_IMPORT
    _AT_IMPORT = True


def meta_kernels() -> None:
    """Run a few operations on the ``meta`` device (loads the decompositions)."""
    if not _AT_IMPORT or "meta" in _DONE:
        return
    _DONE.add("meta")
    with torch.random.fork_rng(devices=[]), torch.no_grad():
        layer = nn.Linear(2, 2).to("meta")
        nn.functional.layer_norm(layer(torch.zeros(1, 2, device="meta")).softmax(-1), (2,))


def optimizers() -> None:
    """A step of each optimiser the course's code uses (SGD, Adam, AdamW)."""
    if not _AT_IMPORT or "optimizers" in _DONE:
        return
    _DONE.add("optimizers")
    with torch.random.fork_rng(devices=[]):
        _step_each_optimiser()


def _step_each_optimiser() -> None:
    model = nn.Linear(2, 2)
    x = torch.zeros(3, 2)
    for optimiser in (torch.optim.SGD(model.parameters(), lr=0.1), torch.optim.Adam(model.parameters()),
                      torch.optim.AdamW(model.parameters())):
        optimiser.zero_grad()
        model(x).sum().backward()
        optimiser.step()
