"""Keep PyTorch from importing ``torch._dynamo`` where nothing compiles.

``torch._dynamo`` (the compiler's front end) costs 1.4 s to import, 0.9 s
beyond the sympy that ``torch._check`` imports anyway. PyTorch imports it
in two places that run eagerly in this course's code, only to tell a
compiler that is not running how to treat the function:

* every ``torch._disable_dynamo`` wrapper, on its first call, to mark its
  function as one not to compile. The Python reference kernels that the
  ``meta`` device runs are such functions (``masked_fill`` on ``meta``:
  the placement test was 1.39 s of ``pytest exercises/05``, 0.52 s now),
  and so is an optimiser's ``add_param_group``;
* every optimiser's ``step`` (``_use_grad_for_differentiable``), to put a
  graph break before and after it: 1.2 s of ``pytest exercises/13`` on a
  correct solution, in the first test whose ``train_step`` steps an SGD.

While ``torch._dynamo`` has not been imported no compiler can be running,
and both do nothing but call the function. :func:`defer_dynamo` makes them
call it directly until then; once anything imports ``torch._dynamo`` (a
student's own ``torch.compile``), each hands over to what PyTorch ships
the next time it runs. Used in a student's ``pytest exercises/NN`` and in
the fork-server alike.
"""
from __future__ import annotations

import gc
import sys
import types

import torch
from torch.optim.optimizer import _use_grad_for_differentiable

_done = False


def defer_dynamo() -> None:
    """Find PyTorch's wrappers made so far (both kinds share one code object
    each: one scan of the heap, ~40 ms) and make them wait for an import of
    ``torch._dynamo`` that someone else does. Idempotent."""
    global _done
    if _done or "torch._dynamo" in sys.modules:
        return
    _done = True
    mark_code = torch._disable_dynamo(lambda: None).__code__
    step_code = _use_grad_for_differentiable(lambda *args: None).__code__
    marks_known = {"fn", "recursive"} <= set(mark_code.co_freevars)
    # Written for PyTorch 2.13: another one's wrappers are left alone.
    steps_known = step_code.co_freevars == ("func",) and "graph_break" in step_code.co_names
    frozen = gc.get_freeze_count()  # the fork-server freezes its heap: get_objects would not see it
    if frozen:
        gc.unfreeze()
    try:
        found = [o for o in gc.get_objects()
                 if type(o) is types.FunctionType and (o.__code__ is mark_code or o.__code__ is step_code)]
    finally:
        if frozen:
            gc.freeze()
    for wrapper in found:
        if wrapper.__code__ is mark_code and marks_known:
            _defer_mark(wrapper)
        elif wrapper.__code__ is step_code and steps_known:
            _defer_step(wrapper)


# --- torch._disable_dynamo's marks ------------------------------------------

# torch._compile._disable_dynamo's wrapper keeps what it made on the function, under this name.
_CACHE_ATTRIBUTE = "__dynamo_disable"


class _UntilDynamoImported:
    """What ``torch._dynamo.disable(fn)`` would return, for as long as
    nothing has imported ``torch._dynamo``: the wrapper it makes (run ``fn``
    with the frame hook off) would call ``fn`` as it is. Once something
    imports it, the real wrapper is made and takes this one's place."""

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


def _defer_mark(wrapper: types.FunctionType) -> None:
    cells = dict(zip(wrapper.__code__.co_freevars, (c.cell_contents for c in wrapper.__closure__)))
    fn = cells["fn"]
    if getattr(fn, _CACHE_ATTRIBUTE, None) is None:
        setattr(fn, _CACHE_ATTRIBUTE, _UntilDynamoImported(fn, cells["recursive"]))


# --- optimisers' step ------------------------------------------------------

# A step wrapper runs in torch.optim.optimizer's namespace: its new code finds
# the function that does the work there, under this name.
_STEP_NAME = "_coursekit_step_until_dynamo_imported"
_deferred_steps: list[tuple[types.FunctionType, types.CodeType]] = []  # (wrapper, PyTorch's code)


def _step_code_template(func):
    def _use_grad(*args, **kwargs):
        return _coursekit_step_until_dynamo_imported(func, args, kwargs)  # noqa: F821 (see _STEP_NAME)
    return _use_grad


def _step_until_dynamo_imported(func, args: tuple, kwargs: dict):
    """PyTorch's ``_use_grad`` less its graph breaks, which only a compiler
    reads, while ``torch._dynamo`` is not imported; afterwards, every
    deferred step gets PyTorch's code back and this one runs it."""
    if getattr(sys.modules.get("torch._dynamo"), "graph_break", None) is None:
        optimiser = args[0]
        grad_was = torch.is_grad_enabled()
        try:
            torch.set_grad_enabled(optimiser.defaults["differentiable"])
            return func(*args, **kwargs)
        finally:
            torch.set_grad_enabled(grad_was)
    for wrapper, original in _deferred_steps:
        wrapper.__code__ = original
    stepping = next(wrapper for wrapper, _ in _deferred_steps if wrapper.__closure__[0].cell_contents is func)
    return stepping(*args, **kwargs)


def _defer_step(wrapper: types.FunctionType) -> None:
    namespace = wrapper.__globals__
    namespace.setdefault(_STEP_NAME, _step_until_dynamo_imported)
    _deferred_steps.append((wrapper, wrapper.__code__))
    wrapper.__code__ = _step_code_template(None).__code__
