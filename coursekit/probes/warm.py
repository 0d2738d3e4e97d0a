"""First-use costs a probe module pays when it is imported, not in a child.

Some parts of PyTorch load a great deal the first time they run: the
meta-device kernels import sympy (0.55 s, for ``torch._check``) and, as
PyTorch ships them, ``torch._dynamo`` (1.4 s), which an optimiser's first
``step`` imports too. The
sandbox's fork-server imports a probe module before it forks the first
child that uses it (``grader.sandbox.server.load_probes``), so a module
whose calls need one of these calls it at import: the cost is paid once
per server, and never by a server grading exercises that need neither.
Neither touches the global random state: what a probe draws must not
depend on which modules happened to be imported before it.

Where nothing needs ``torch._dynamo`` but a mark that it is not to trace
a function, :func:`defer_dynamo` keeps it from being imported: in the
server and in a student's ``pytest exercises/NN`` alike.
"""
from __future__ import annotations

import gc
import sys
import types

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
    """Run a few operations on the ``meta`` device (loads the decompositions),
    after :func:`defer_dynamo`."""
    if not _AT_IMPORT or "meta" in _DONE:
        return
    _DONE.add("meta")
    defer_dynamo()
    with torch.random.fork_rng(devices=[]), torch.no_grad():
        layer = nn.Linear(2, 2).to("meta")
        nn.functional.layer_norm(layer(torch.zeros(1, 2, device="meta")).softmax(-1), (2,))


class _UntilDynamoImported:
    """What ``torch._dynamo.disable(fn)`` would return, for as long as
    nothing has imported ``torch._dynamo``: then no compiler can be running,
    and the wrapper it makes (run ``fn`` with the frame hook off) would call
    ``fn`` as it is. Once something imports it, the real wrapper is made and
    takes this one's place."""

    def __init__(self, fn: types.FunctionType, recursive: bool):
        self.fn, self.recursive = fn, recursive

    def __call__(self, *args, **kwargs):
        # Not imported, or still being imported (by another thread, or by itself).
        disable = getattr(sys.modules.get("torch._dynamo"), "disable", None)
        if disable is None:
            return self.fn(*args, **kwargs)
        disabled = disable(self.fn, self.recursive, wrapping=False)
        setattr(self.fn, _CACHE_ATTRIBUTE, disabled)
        return disabled(*args, **kwargs)


# torch._compile._disable_dynamo's wrapper keeps what it made on the function, under this name.
_CACHE_ATTRIBUTE = "__dynamo_disable"


def defer_dynamo() -> None:
    """Spare this process the import of ``torch._dynamo`` (1.4 s; 0.9 s
    beyond the sympy that ``torch._check`` imports anyway) that PyTorch's
    ``torch._disable_dynamo`` wrappers do on their first call only to mark
    their function as one not to compile. Every Python reference that the
    meta kernels run is such a function (``masked_fill`` on ``meta``: the
    placement test was 1.39 s of ``pytest exercises/05``, 0.52 s now), and
    so is an optimiser's ``add_param_group``. Each wrapper made so far gets
    :class:`_UntilDynamoImported` as its cached answer; the wrappers share
    one code object, which is how they are found. Done once, 40 ms.
    (An optimiser's ``step`` imports ``torch._dynamo`` directly: this does
    not help there.)"""
    if "dynamo" in _DONE or "torch._dynamo" in sys.modules:
        return
    _DONE.add("dynamo")
    wrapper_code = torch._disable_dynamo(lambda: None).__code__
    if not {"fn", "recursive"} <= set(wrapper_code.co_freevars):
        return  # another PyTorch than the one this was written for (2.13): leave it alone
    frozen = gc.get_freeze_count()  # the fork-server freezes its heap: get_objects would not see it
    if frozen:
        gc.unfreeze()
    try:
        wrappers = [o for o in gc.get_objects() if type(o) is types.FunctionType and o.__code__ is wrapper_code]
    finally:
        if frozen:
            gc.freeze()
    for wrapper in wrappers:
        cells = dict(zip(wrapper_code.co_freevars, (c.cell_contents for c in wrapper.__closure__)))
        fn = cells["fn"]
        if getattr(fn, _CACHE_ATTRIBUTE, None) is None:
            setattr(fn, _CACHE_ATTRIBUTE, _UntilDynamoImported(fn, cells["recursive"]))


def optimizers() -> None:
    """A step of each optimiser the course's code uses (SGD, Adam, AdamW).
    In any process, first :func:`defer_dynamo`: making an optimiser then
    imports nothing (its first ``step`` still does; 13's stub, whose
    tests fail before any step, ran 1.6 s longer)."""
    defer_dynamo()
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


def operators() -> None:
    """Run, recorded by both observers (:func:`coursekit.probes.dispatch.recording`),
    forward and backward in float32 and float64, the tensor operations this
    course's code reaches for. Much of what an operator needs the first time
    it runs in a process is built lazily: the dispatch mode's Python object
    for each operator (~0.3 ms each), kernel lookups, static tables. Built
    once here, in the fork-server, each child finds them ready: a child of
    exercise 01 used ~4 ms of CPU and ~530 page faults less (A/B in one
    run). Called by the server's warm-up; the global random state is left
    as it was."""
    if "operators" in _DONE:
        return
    _DONE.add("operators")
    from coursekit.probes.dispatch import recording

    with torch.random.fork_rng(devices=[]), recording(python_dispatch=True):
        for dtype in (torch.float32, torch.float64):
            _operator_workload(dtype)


def _operator_workload(dtype: torch.dtype) -> None:
    F = nn.functional
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(2, 3, 4, 5, generator=gen, dtype=dtype).requires_grad_(True)
    blocked = torch.rand(2, 3, 4, 5, generator=gen) < 0.3
    # softmax by hand, the ways students write it
    scores = x.masked_fill(blocked, float("-inf"))
    top = scores.amax(dim=-1, keepdim=True)
    _, where_top = scores.max(dim=-1, keepdim=True)
    top = torch.where(torch.isfinite(top), top, torch.zeros_like(top))
    exps = torch.exp(scores - top)
    weights = torch.nan_to_num(exps / exps.sum(dim=-1, keepdim=True).clamp_min(1e-12), nan=0.0)
    # attention: products, masks, reshapes
    context = (weights @ x.transpose(-2, -1)).matmul(x) + torch.einsum("bhqd,bhkd->bhqk", weights, x) @ x
    flat = x.reshape(-1, 4, 5)
    paired = torch.bmm(flat, flat.permute(0, 2, 1)).sum() + torch.baddbmm(flat @ flat.mT, flat, flat.mT).sum()
    causal = torch.tril(torch.ones(4, 4, dtype=torch.bool)) & ~torch.triu(torch.ones(4, 4, dtype=torch.bool), 1)
    positions = torch.arange(4).unsqueeze(0).expand(3, 4).contiguous().view(12).float().pow(2).sqrt()
    joined = torch.cat([x, x], dim=-1).chunk(2, dim=-1)[0] + torch.stack([x, x]).sum(0) + x.split(2, dim=-1)[0].sum()
    z = joined.softmax(-1) + F.softmax(joined, dim=0) + torch.log_softmax(joined, -1) + joined.logsumexp(-1, keepdim=True)
    z = z + F.scaled_dot_product_attention(x, x, x, attn_mask=causal)
    # elementwise, comparisons, reductions, layers
    w = z.mean(-1, keepdim=True) + z.var(-1, keepdim=True, unbiased=False) + z.pow(2).sqrt() + torch.rsqrt(z.abs() + 1)
    w = w + z.log1p().abs() + (z > 0).to(dtype) + (z == 0).to(dtype) + (z < 0).logical_not().to(dtype) + z.sign()
    w = w + torch.tanh(z) + torch.sigmoid(z) + torch.full_like(z, 2.0) + torch.ones_like(z) + z.clone().detach()
    w = w + z.masked_fill(~blocked, 0.0) + F.relu(z) + F.gelu(z) + z.squeeze(0).unsqueeze(0) + z / 5**0.5 / 8 - z.neg()
    w = w + z.index_select(-1, torch.arange(5)) + z.gather(-1, where_top.expand(-1, -1, -1, 5)) + torch.sin(z) * torch.cos(z)
    linear, norm, embed = nn.Linear(5, 5).to(dtype), nn.LayerNorm(5).to(dtype), nn.Embedding(7, 5).to(dtype)
    hidden = norm(linear(x) + embed(torch.tensor([[1, 2, 3, 4]])).unsqueeze(1))
    hidden = F.dropout(hidden, 0.1, training=True)
    loss = F.cross_entropy(hidden.reshape(-1, 5), torch.zeros(24, dtype=torch.long)) + w.mean() \
        + (context.sum() + paired + positions.sum() + weights.sum()) * 0
    loss.backward()
    torch.equal(x, x), x.any(), (x > 0).all(), x.argmax(-1), x.topk(2, -1), x.sort(-1), x.norm(), x.detach().numpy()
