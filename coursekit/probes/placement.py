"""Device placement without a GPU: run a module's forward pass on PyTorch's
``meta`` device, where a tensor that ``forward`` creates on the CPU meets
the inputs' device and fails as it would on a GPU.

Two ways of seeing a mismatch, because the meta kernels alone check devices
for some operations only (``masked_fill`` does, ``masked_fill_`` and ``@``
do not): the kernels' own error, and :class:`DeviceWatch`, a
``TorchFunctionMode`` that looks at the tensors of every torch call. It
applies a GPU's rules: a 0-dim CPU tensor may meet any device, and indexing
with a CPU index or copying between devices is allowed.

Only a real mismatch counts: :func:`placement` runs the call on the CPU
first and lets its errors through (a shape error is a shape error), and a
meta run that fails for another reason (``.item()``, a data-dependent
shape: a meta tensor has no values, a GPU tensor has) is "unchecked".
"""
from __future__ import annotations

from collections.abc import Callable
from types import ModuleType

import torch
from torch import nn
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_leaves

from coursekit.probes import warm
from coursekit.probes.dynamo_deferral import defer_dynamo
from coursekit.probes.modules import devices_after_to

DEVICE = torch.device("meta")
# The meta kernels' own words for a mismatch.
MISMATCH_TEXTS = ("is not on the expected device", "Expected all tensors to be on the same device",
                  "found at least two devices")
# Calls that may mix devices on a GPU too: moves and copies, indexing with
# a CPU index, and the *_as methods that read only the other's size (or,
# for type_as, move to the other's device).
_MIXING_ALLOWED = {torch.Tensor.to, torch.Tensor.copy_, torch.Tensor.__getitem__, torch.Tensor.__setitem__,
                   torch.Tensor.index_put_, torch.Tensor.cpu, torch.Tensor.type, torch.Tensor.type_as,
                   torch.Tensor.expand_as, torch.Tensor.view_as, torch.Tensor.reshape_as, torch.Tensor.new_tensor,
                   torch.Tensor.__repr__, torch.Tensor.__format__}


class DeviceMismatch(RuntimeError):
    """A torch call got non-scalar tensors on two devices."""


class DeviceWatch(TorchFunctionMode):
    """Raise :class:`DeviceMismatch` at the first torch call that mixes a
    ``meta`` tensor with a CPU tensor of one or more dimensions."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func not in _MIXING_ALLOWED:
            devices = {t.device.type for t in tree_leaves((args, kwargs))
                       if isinstance(t, torch.Tensor) and (t.dim() > 0 or t.device.type == DEVICE.type)}
            if len(devices) > 1:
                raise DeviceMismatch(f"{getattr(func, '__name__', 'a call')} got tensors on {sorted(devices)}")
        return func(*args, **kwargs)


def _on_device(value: object) -> object:
    return value.to(DEVICE) if isinstance(value, torch.Tensor) else value


def _classify(exc: BaseException) -> str:
    if isinstance(exc, DeviceMismatch) or any(text in str(exc) for text in MISMATCH_TEXTS):
        return "mismatch"
    return "unchecked"


def placement(build: Callable[[], nn.Module], args: tuple, *, train: bool = False,
              call: Callable[..., object] | None = None) -> dict:
    """``call(build(), *args)`` (default: ``module(*args)``) on the CPU, then
    on a fresh module moved with ``.to("meta")`` and meta copies of ``args``.

    Errors of the CPU run propagate: they are no device problem. Returns
    ``placement``: "ok", "mismatch" (a tensor on another device than the
    inputs', or an output that left the device) or "unchecked" (the meta
    run failed for another reason); ``shape``, the CPU output's shape;
    ``left_behind``, the tensor attributes that ``.to()`` did not move; and
    ``detail``, what went wrong on the meta device (for public tests only:
    the hidden checks never show it).
    """
    call = call or (lambda module, *xs: module(*xs))
    with torch.no_grad():
        output = call(build().train(train), *args)
    shape = list(output.shape) if isinstance(output, torch.Tensor) else None
    defer_dynamo()  # a reference kernel's first call on meta would import torch._dynamo
    module = build().train(train)
    # Tensor attributes that .to() did not move (not registered as buffers):
    # one cause of a mismatch, told apart from tensors made in forward.
    left = sorted(name for name, device in devices_after_to(module, DEVICE).items() if device != DEVICE.type)
    found = {"shape": shape, "left_behind": left}
    try:
        with torch.no_grad(), DeviceWatch():
            on_device = call(module, *(_on_device(a) for a in args))
    except Exception as exc:  # noqa: BLE001 - student code; NotImplementedError too (a missing meta kernel)
        return {**found, "placement": _classify(exc), "detail": f"{type(exc).__name__}: {str(exc)[:300]}"}
    outputs = [t for t in tree_leaves(on_device) if isinstance(t, torch.Tensor)]
    if any(t.device.type != DEVICE.type for t in outputs):
        return {**found, "placement": "mismatch", "detail": "the output is not on the inputs' device"}
    return {**found, "placement": "ok", "detail": ""}


def forward_placement(module: ModuleType, cls: str, config: dict, args: list, init_args: list = ()) -> dict:
    """:func:`placement` of ``module.<cls>(*init_args, **config)`` called on
    ``args`` (tensors or None) in eval mode: the probe that hidden checks
    and public tests of exercises 05, 06 and 08-11 share."""
    return placement(lambda: getattr(module, cls)(*init_args, **config), tuple(args))


# The server imports this module before forking a child that uses it: the
# meta kernels' first-use cost (~1 s) is paid there, once.
warm.meta_kernels()
