"""Probes for exercise 07 (sinusoidal positional encoding).

Each probe builds what it needs from plain arguments, runs one thing on the
student's module and returns plain data. Errors other than the stub's
NotImplementedError come back as data (see :func:`error_of`), so a caller can
check *which* error was raised without the probe asserting anything.
"""
from __future__ import annotations

from collections.abc import Callable
from types import ModuleType

import torch

from coursekit.probes import modules


def error_of(call: Callable[[], object]) -> dict | None:
    """Run ``call``; None if it returns, else the exception's type name and
    message. NotImplementedError (an untouched stub) is re-raised."""
    try:
        call()
    except NotImplementedError:
        raise
    except Exception as exc:  # student code: any exception is an answer
        return {"type": type(exc).__name__, "message": str(exc)}
    return None


def table(module: ModuleType, max_len: int, d_model: int) -> torch.Tensor:
    """``module.sinusoidal_table(max_len, d_model)``."""
    return module.sinusoidal_table(max_len, d_model)


def encoding_structure(module: ModuleType, d_model: int, max_len: int, dropout: float = 0.0) -> dict:
    """What ``PositionalEncoding(d_model, dropout, max_len)`` registers, its
    plain tensor attributes, its ``pe`` (whatever it is), and the dtypes
    after ``.to(torch.float64)``."""
    encoder = module.PositionalEncoding(d_model, dropout=dropout, max_len=max_len)
    found = modules.registered(encoder)
    found["tensor_attributes"] = modules.tensor_attributes(encoder)
    pe = getattr(encoder, "pe", None)
    found["pe"] = pe.detach().clone() if isinstance(pe, torch.Tensor) else None
    found["dtypes_after_to_float64"] = modules.dtypes_after_to(encoder, torch.float64)
    return found


def encoding_output(module: ModuleType, x: torch.Tensor, d_model: int, max_len: int = 5000,
                    dropout: float = 0.0, train: bool = False, seed: int = 0) -> dict:
    """``PositionalEncoding(d_model, dropout, max_len)(x)`` in train or eval
    mode (the global RNG seeded with ``seed`` first), the module's ``pe``
    (whatever it is), whether ``x`` came back unchanged, and d(sum(output))/dx."""
    encoder = module.PositionalEncoding(d_model, dropout=dropout, max_len=max_len)
    encoder.train(train)
    before = x.detach().clone()
    leaf = x.detach().clone().requires_grad_(True)
    # A non-leaf copy goes in: an in-place edit by the module is then allowed
    # (and visible), instead of failing with autograd's leaf-variable error.
    x_in = leaf.clone()
    torch.manual_seed(seed)
    output = encoder(x_in)
    unchanged = bool(torch.equal(x_in.detach(), before))
    grad = None
    if isinstance(output, torch.Tensor) and output.requires_grad:
        output.sum().backward()
        grad = leaf.grad
    pe = getattr(encoder, "pe", None)
    return {"output": output.detach() if isinstance(output, torch.Tensor) else output,
            "pe": pe.detach().clone() if isinstance(pe, torch.Tensor) else None,
            "input_unchanged": unchanged, "input_grad": grad}


def train_eval_outputs(module: ModuleType, x: torch.Tensor, d_model: int, dropout: float,
                       max_len: int = 64) -> dict:
    """Outputs of one ``PositionalEncoding`` in train and eval mode under two
    seeds (see :func:`coursekit.probes.modules.train_eval_outputs`), and its
    ``pe`` under the key ``"pe"``."""
    encoder = module.PositionalEncoding(d_model, dropout=dropout, max_len=max_len)
    outputs = modules.train_eval_outputs(encoder, lambda m: m(x))
    pe = getattr(encoder, "pe", None)
    outputs["pe"] = pe.detach().clone() if isinstance(pe, torch.Tensor) else None
    return outputs


def too_long_error(module: ModuleType, d_model: int, max_len: int, n: int) -> dict | None:
    """The error (if any) of a length-``n`` input to
    ``PositionalEncoding(d_model, max_len=max_len)``."""
    encoder = module.PositionalEncoding(d_model, max_len=max_len)
    return error_of(lambda: encoder(torch.zeros(1, n, d_model)))


def shift_matrix(module: ModuleType, delta: int, d_model: int) -> torch.Tensor:
    """``module.relative_shift(delta, d_model)``."""
    return module.relative_shift(delta, d_model)


def shift_error(module: ModuleType, delta: int, d_model: int) -> dict | None:
    """The error (if any) of ``module.relative_shift(delta, d_model)``."""
    return error_of(lambda: module.relative_shift(delta, d_model))


# --- used by the hidden checks (grader/checks/positional_encoding.py) ---------

def encoding_on_device(module: ModuleType, d_model: int, max_len: int, device: str = "meta") -> dict:
    """``PositionalEncoding(d_model, max_len=max_len).to(device)``: the
    device of ``pe`` and the devices of all its tensors (parameters, buffers,
    plain tensor attributes). With ``device="meta"`` this shows on a CPU-only
    machine, without computing anything, what ``.to("cuda")`` would leave
    behind: a table kept as a plain attribute stays on the CPU, and the
    forward then fails with a device mismatch."""
    encoder = module.PositionalEncoding(d_model, max_len=max_len)
    devices = modules.devices_after_to(encoder, device)
    return {"pe_device": devices.get("pe"), "devices": sorted(set(devices.values()))}


def encoding_output_as(module: ModuleType, x: torch.Tensor, d_model: int, max_len: int,
                       dtype: torch.dtype) -> dict:
    """``PositionalEncoding(d_model, max_len=max_len).to(dtype)`` in eval
    mode applied to ``x``: the output and the dtype of ``pe`` afterwards."""
    encoder = module.PositionalEncoding(d_model, max_len=max_len).to(dtype)
    encoder.eval()
    with torch.no_grad():
        output = encoder(x)
    pe = getattr(encoder, "pe", None)
    return {"output": output, "pe_dtype": str(pe.dtype) if isinstance(pe, torch.Tensor) else None}


def default_encoding(module: ModuleType, d_model: int) -> dict:
    """``PositionalEncoding(d_model)`` with the default ``max_len``: the
    shape of ``pe`` and the error (if any) of an input one row too long for
    the README's default of 5000."""
    encoder = module.PositionalEncoding(d_model)
    pe = getattr(encoder, "pe", None)
    return {"pe_shape": list(pe.shape) if isinstance(pe, torch.Tensor) else None,
            "error_5001": error_of(lambda: encoder(torch.zeros(1, 5001, d_model)))}
