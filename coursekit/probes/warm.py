"""First-use costs a probe module pays when it is imported, not in a child.

Some parts of PyTorch load a great deal the first time they run: the
meta-device kernels import sympy (0.55 s, for ``torch._check``). The
sandbox's fork-server imports a probe module before it forks the first
child that uses it (``grader.sandbox.server.load_probes``), so a module
whose calls need such a thing calls its warm-up here at import: the cost
is paid once per server, and never by a server grading exercises that do
not need it. No warm-up touches the global random state: what a probe
draws must not depend on which modules happened to be imported before it.

What PyTorch would import only for a compiler that is not running
(``torch._dynamo``, 1.4 s) is not paid at all: see
:mod:`coursekit.probes.dynamo_deferral`, which the meta-kernel and
optimiser warm-ups below call first, in any process.
"""
from __future__ import annotations

import torch
from torch import nn

from coursekit.probes.dynamo_deferral import defer_dynamo

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


def explicit_gradients() -> None:
    """A backward given its upstream gradient (``out.backward(grad)``,
    ``torch.autograd.grad(out, inputs, grad)``): its first use imports
    ``torch.fx.experimental.symbolic_shapes`` and sympy (486 modules; 0.35 s
    in a warm process, about 2 s of each of 15's children before this)."""
    if not _AT_IMPORT or "explicit_gradients" in _DONE:
        return
    _DONE.add("explicit_gradients")
    x = torch.ones(2, requires_grad=True)
    (x * 2).backward(torch.ones(2))


def optimizers() -> None:
    """A step of each optimiser the course's code uses (SGD, Adam, Adam's
    foreach form, AdamW), in the server. In any process, first
    :func:`defer_dynamo`: making an optimiser and stepping it then import
    nothing (13's stub, whose tests fail before any step, ran 1.6 s longer;
    its reference 1.2 s)."""
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
                      torch.optim.Adam(model.parameters(), foreach=True), torch.optim.AdamW(model.parameters())):
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
