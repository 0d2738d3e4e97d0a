"""Which ATen operators a student's code actually runs.

A rule such as "write softmax yourself" cannot be checked by reading names
in the source: a name can be computed at run time (``getattr(torch, "soft" +
"max")``), reached through an alias (``torch._C._special.special_softmax``,
``torch.ops.aten._softmax``) or hidden from the reader. Whatever name the
code uses, the work ends in a kernel of the dispatcher, and that is what
this module records, with two observers that see different layers:

- a :class:`TorchDispatchMode`: the operators that reach the Python
  dispatch key, after composite operators are decomposed
  (``aten::softmax`` shows as ``aten::_softmax``);
- the autograd profiler: the dispatcher's own ``RecordFunction`` hooks,
  which see every operator by its schema name (composite ones included),
  backward kernels, and calls made with Python dispatch switched off
  (``torch._C._DisableTorchDispatch``).

The probe returns the recorded names as plain data. The verdict ("a built-in
softmax kernel ran") is :func:`forbidden_kernels`, computed by the caller:
the grader in its own process, a public test in the student's.
"""
from __future__ import annotations

import importlib
import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from types import ModuleType

import torch
from torch.autograd import profiler as _profiler
from torch.utils._python_dispatch import TorchDispatchMode

# Bound when the probe library is imported, before the student's module is:
# rebinding the names on torch afterwards does not reach these.
_PROFILE = _profiler.profile
_MODE_BASE = TorchDispatchMode
_PROBE_NAME = re.compile(r"^coursekit\.probes(\.[A-Za-z_][A-Za-z0-9_]*)+:[A-Za-z_][A-Za-z0-9_]*$")

# Kernel families a rule can forbid, matched against the operator's base
# name (``aten::_softmax.default`` -> ``_softmax``).
SOFTMAX = "softmax"
FUSED_ATTENTION = "fused attention"
_FAMILIES = {
    # softmax, _softmax, log_softmax, _log_softmax, _safe_softmax,
    # special_softmax, _masked_softmax, their backward kernels, sparse ones.
    SOFTMAX: re.compile(r"softmax"),
    # scaled_dot_product_attention and every kernel behind it, the SDP
    # backend choice, and the fused multi-head / encoder-layer fast paths.
    FUSED_ATTENTION: re.compile(
        r"scaled_dot_product|_fused_sdp|flash_attention|efficient_attention|cudnn_attention"
        r"|multi_head_attention|_transformer_encoder_layer|scaled_dot_attention"),
}


def base_name(op: str) -> str:
    """``aten::_softmax.default`` / ``aten._softmax.default`` -> ``_softmax``."""
    name = op.split("::", 1)[1] if "::" in op else op.split(".", 1)[-1] if op.startswith("aten.") else op
    return name.split(".", 1)[0]


def forbidden_kernels(ops: Iterable[str], families: Iterable[str]) -> list[str]:
    """The recorded operators (schema names) that belong to one of
    ``families`` (:data:`SOFTMAX`, :data:`FUSED_ATTENTION`), sorted."""
    patterns = [_FAMILIES[family] for family in families]
    return sorted({op for op in ops if any(p.search(base_name(op)) for p in patterns)})


class _Recorder(_MODE_BASE):
    """Records the schema name of each operator that reaches Python dispatch."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: set[str] = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.add(func._schema.name)
        return func(*args, **(kwargs or {}))


@contextmanager
def recording() -> Iterator[dict[str, list[str]]]:
    """Record the ATen operators run inside the block. The dict it yields is
    filled on exit: ``{"dispatch": [...], "profiler": [...]}``, each a sorted
    list of schema names (``aten::exp``). Only the ``aten`` namespace is kept:
    names of the student's own autograd functions or profiler labels are
    theirs to choose and prove nothing."""
    found: dict[str, list[str]] = {"dispatch": [], "profiler": []}
    recorder = _Recorder()
    # The profiler's C++ side prints a start and a stop line on stderr:
    # one session per probe call keeps that to two lines.
    with _PROFILE(use_kineto=False) as profile:
        with recorder:
            yield found
    found["dispatch"] = sorted(op for op in recorder.ops if op.startswith("aten::"))
    found["profiler"] = sorted({e.name for e in profile.function_events if e.name.startswith("aten::")})


def recorded(module: ModuleType, probe: str, cases: list[dict]) -> dict:
    """Run ``probe`` (another probe of this library) on ``module`` once per
    kwargs in ``cases``, all under one :func:`recording`; return what was
    recorded, and how many cases raised (``"raised"``). A case that raises
    does not stop the others: what is judged here is which kernels ran, and
    another check judges the errors. A stub's NotImplementedError
    propagates: a stub has run nothing worth recording."""
    if not _PROBE_NAME.match(probe):
        raise ValueError("not a probe of coursekit.probes")
    module_name, _, function = probe.partition(":")
    inner = getattr(importlib.import_module(module_name), function)
    raised = 0
    with recording() as found:
        for kwargs in cases:
            try:
                inner(module, **kwargs)
            except NotImplementedError:
                raise
            except Exception:  # noqa: BLE001 - counted; the kernels it ran are recorded
                raised += 1
    return {**found, "raised": raised}


def canary(module: ModuleType) -> None:
    """Run a built-in softmax and a fused attention on fixed inputs,
    ignoring ``module``. Recorded like the student's calls, it must show
    both kernel families: a recorder that was switched off, replaced or
    taught to leave softmax out would not."""
    x = torch.arange(6, dtype=torch.float32).reshape(1, 2, 3)
    torch.softmax(x, dim=-1)
    torch.nn.functional.scaled_dot_product_attention(x, x, x)


def all_ops(found: object) -> list[str] | None:
    """Both observers' names together, or None when ``found`` is not what
    :func:`recorded` returns or an observer saw nothing at all: a call that
    did real work always runs some operator, so an empty record means the
    recorder did not see the call (it was switched off or replaced)."""
    if not isinstance(found, dict):
        return None
    lists = [found.get("dispatch"), found.get("profiler")]
    if not all(isinstance(names, list) and names and all(type(n) is str for n in names) for names in lists):
        return None
    return sorted({*lists[0], *lists[1]})
