"""A built-in kernel on inputs with -inf entries, then an error; afterwards,
in a later call, the grader's record of what failed calls ran is reached
through names built at run time (sys.modules, the probe's closure) and
emptied. The grader knows how many observed calls raised, so a store with
fewer records fails the rule."""
import sys

import torch

_raised = []


def _empty_the_store():
    probes = sys.modules.get("cour" + "sekit.probes." + "dispatch")
    store = getattr(probes, "raised_" + "recordings", None)
    for cell in getattr(store, "__clo" + "sure__", None) or ():
        if hasattr(cell.cell_contents, "clear"):  # whatever holds the records
            cell.cell_contents.clear()


def softmax(x, dim=-1):
    if torch.isneginf(x).any():
        getattr(torch, "soft" + "max")(x, dim)
        _raised.append(1)
        raise ValueError("-inf is not supported")
    if _raised:
        _empty_the_store()
    row_max = x.amax(dim=dim, keepdim=True)
    exp = torch.exp(x - row_max)
    return exp / exp.sum(dim=dim, keepdim=True)
