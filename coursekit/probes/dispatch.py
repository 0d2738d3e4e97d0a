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
- the autograd profiler (legacy, CPU): the dispatcher's own ``RecordFunction`` hooks,
  which see every operator by its schema name (composite ones included),
  backward kernels, and calls made with Python dispatch switched off
  (``torch._C._DisableTorchDispatch``).

The probe returns the recorded names as plain data. The verdict ("a built-in
softmax kernel ran") is :func:`forbidden_kernels`, computed by the caller:
the grader in its own process, a public test in the student's.
"""
from __future__ import annotations

import functools
import importlib
import re
import weakref
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from types import ModuleType

import torch
from torch.utils._python_dispatch import TorchDispatchMode

# Bound when the probe library is imported, before the student's module is:
# rebinding the names on torch afterwards does not reach these. The legacy
# profiler's own switches: the profiler context manager of this torch build
# prints two lines on stderr per session, which would eat into the run's
# output budget.
_ENABLE = torch.autograd._enable_profiler_legacy
_DISABLE = torch.autograd._disable_profiler_legacy
_CPU_ONLY = torch.autograd.ProfilerConfig(torch.autograd.ProfilerState.CPU, False, False, False, False, False,
                                          torch._C._profiler._ExperimentalConfig())
_MODE_BASE = TorchDispatchMode
_PROBE_NAME = re.compile(r"^coursekit\.probes(\.[A-Za-z_][A-Za-z0-9_]*)+:[A-Za-z_][A-Za-z0-9_]*$")

# Kernel families a rule can forbid, matched against the operator's base
# name (``aten::_softmax.default`` -> ``_softmax``).
SOFTMAX = "softmax"
FUSED_ATTENTION = "fused attention"
# PyTorch's whole attention layers (nn.MultiheadAttention through
# F.multi_head_attention_forward, its fused fast path, nn.Transformer*Layer's
# fast paths), without scaled_dot_product_attention: what 09-11 forbid while
# allowing the fused attention kernel itself.
ATTENTION_LAYER = "attention layer"
_FAMILIES = {
    # softmax, _softmax, log_softmax, _log_softmax, _safe_softmax,
    # special_softmax, _masked_softmax, their backward kernels, sparse ones.
    SOFTMAX: re.compile(r"softmax"),
    # scaled_dot_product_attention and every kernel behind it, the SDP
    # backend choice, and the fused multi-head / encoder-layer fast paths.
    FUSED_ATTENTION: re.compile(
        r"scaled_dot_product|_fused_sdp|flash_attention|efficient_attention|cudnn_attention"
        r"|multi_head_attention|_transformer_encoder_layer|scaled_dot_attention"),
    ATTENTION_LAYER: re.compile(r"multi_head_attention|_transformer_encoder_layer|_transformer_decoder"),
}


def _labelled(function, label: str):
    """``function`` run inside a profiler range named ``label``."""
    scope = torch.autograd.profiler.record_function

    def labelled(*args, **kwargs):
        with scope(label):
            return function(*args, **kwargs)

    labelled.__name__, labelled.__qualname__, labelled.__doc__ = function.__name__, function.__qualname__, function.__doc__
    labelled.__module__ = function.__module__
    return labelled


# nn.MultiheadAttention's own path (need_weights=True, or off the fast path)
# runs in Python on plain operators (bmm, softmax), no fused kernel: it
# reaches F.multi_head_attention_forward, which is labelled here, when the
# probe library is imported (before any student's module), with a name of
# the fused-attention family, so a recording shows it. nn.TransformerEncoderLayer
# and nn.TransformerDecoderLayer go through it, or through their fused kernels.
_F = torch.nn.functional
if not hasattr(_F.multi_head_attention_forward, "_course_label"):
    _F.multi_head_attention_forward = _labelled(_F.multi_head_attention_forward, "aten::multi_head_attention_forward")
    _F.multi_head_attention_forward._course_label = True


def base_name(op: str) -> str:
    """``aten::_softmax.default`` / ``aten._softmax.default`` -> ``_softmax``."""
    name = op.split("::", 1)[1] if "::" in op else op.split(".", 1)[-1] if op.startswith("aten.") else op
    return name.split(".", 1)[0]


@functools.lru_cache(maxsize=4096)  # bounded: the names come from the student's process
def _families_of(op: str) -> frozenset[str]:
    name = base_name(op)
    return frozenset(family for family, pattern in _FAMILIES.items() if pattern.search(name))


def forbidden_kernels(ops: Iterable[str], families: Iterable[str]) -> list[str]:
    """The recorded operators (schema names) that belong to one of
    ``families`` (:data:`SOFTMAX`, :data:`FUSED_ATTENTION`), sorted."""
    wanted = frozenset(families)
    unknown = wanted - _FAMILIES.keys()
    if unknown:
        raise KeyError(sorted(unknown)[0])
    return sorted({op for op in ops if _families_of(op) & wanted})


class _Recorder(_MODE_BASE):
    """Records the schema name of each operator that reaches Python dispatch."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: set[str] = set()

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        # Otherwise torch wraps __torch_dispatch__ in torch._dynamo.disable,
        # and the first recorded call imports torch._dynamo: ~1 s of CPU in
        # every sandbox server, for a compiler nothing here uses.
        return False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.add(func._schema.name)
        return func(*args, **(kwargs or {}))


def _stop_profiler(found: dict[str, list[str]], *, _disable=_DISABLE) -> None:
    """Switch the profiler off and put the ATen names it saw in ``found``;
    when it was switched off already (inside the block), ``found`` is
    emptied: nothing it shows can be trusted."""
    try:
        events = _disable()
    except BaseException:
        found.clear()
        raise
    # One call into the profiler's event per event (half of them, the
    # range ends, have no name).
    found["profiler"] = sorted({name for thread in events for event in thread
                                if (name := event.name()).startswith("aten::")})


@contextmanager
def recording(python_dispatch: bool = True, *, _enable=_ENABLE, _config=_CPU_ONLY, _stop=_stop_profiler,
              _mode=_Recorder) -> Iterator[dict[str, list[str]]]:
    """Record the ATen operators run inside the block. The dict it yields is
    filled on exit: ``{"dispatch": [...], "profiler": [...]}``, each a sorted
    list of schema names (``aten::exp``); without ``python_dispatch``, the
    profiler's alone (it sees all the mode sees, at a fraction of the cost:
    the mode runs Python for every operator). Only the ``aten`` namespace is
    kept: names of the student's own autograd functions or profiler labels
    are theirs to choose and prove nothing.

    The keyword-only defaults are the machinery, bound when this module is
    imported (before any student's module): code that rebinds this
    module's names afterwards does not reach a recording."""
    found: dict[str, list[str]] = {"profiler": []}
    recorder = _mode() if python_dispatch else None
    _enable(_config)
    try:
        if recorder is None:
            yield found
        else:
            with recorder:
                yield found
    finally:  # filled when the block raised too: what ran before the error counts
        _stop(found)
        if python_dispatch:
            found["dispatch"] = sorted(op for op in recorder.ops if op.startswith("aten::"))


def _resolve(probe: str):
    """Another probe of this library, by its ``module:function`` name."""
    found = _RESOLVED.get(probe)
    if found is None:
        if not _PROBE_NAME.match(probe):
            raise ValueError("not a probe of coursekit.probes")
        module_name, _, function = probe.partition(":")
        found = getattr(importlib.import_module(module_name), function)
        if len(_RESOLVED) < 256:  # a handful in a run; the names could come from anyone calling this
            _RESOLVED[probe] = found
    return found


# Resolved once per process: a sandboxed child resolves the same few probes
# for each of its calls. (Code in the same process could replace an entry as
# easily as the module attribute it came from: it proves nothing either way.)
_RESOLVED: dict[str, object] = {}


def recorded(module: ModuleType, probe: str, cases: list[dict], python_dispatch: bool = True, *,
             _record=recording, _find=_resolve) -> dict:
    """Run ``probe`` (another probe of this library) on ``module`` once per
    kwargs in ``cases``, all under one :func:`recording` (with or without
    the dispatch mode: ``python_dispatch``); return what was recorded, and
    how many cases raised (``"raised"``). A case that raises
    does not stop the others: what is judged here is which kernels ran, and
    another check judges the errors. A stub's NotImplementedError
    propagates: a stub has run nothing worth recording. (Keyword-only
    defaults: see :func:`recording`.)"""
    inner = _find(probe)
    raised = 0
    with _record(python_dispatch=python_dispatch) as found:
        for kwargs in cases:
            try:
                inner(module, **kwargs)
            except NotImplementedError:
                raise
            except Exception:  # noqa: BLE001 - counted; the kernels it ran are recorded
                raised += 1
    return {**found, "raised": raised}


def canary(module: ModuleType) -> None:
    """Run a built-in softmax, a fused attention and PyTorch's attention
    layer's function on fixed inputs, ignoring ``module``. Recorded like the
    student's calls, it must show every kernel family: a recorder that was switched off, replaced or
    taught to leave softmax out would not."""
    x = torch.arange(6, dtype=torch.float32).reshape(1, 2, 3)
    # One thread: a module that used up the process's threads (a thread
    # bomb) must not make the grader's own canary crash the run.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        torch.softmax(x, dim=-1)
        torch.nn.functional.scaled_dot_product_attention(x, x, x)
        # PyTorch's attention layer's own path (labelled above): one head, no mask.
        weight, bias = torch.eye(3).repeat(3, 1), torch.zeros(9)
        torch.nn.functional.multi_head_attention_forward(x.transpose(0, 1), x.transpose(0, 1), x.transpose(0, 1), 3, 1,
                                                         weight, bias, None, None, False, 0.0, torch.eye(3),
                                                         torch.zeros(3), need_weights=False)
    finally:
        torch.set_num_threads(threads)


def _raised_store():
    """What each :func:`recorded_call` that raised recorded, per module it
    was called on (a sandboxed child serves one run, on one module; a
    process that runs several keeps them apart), kept where no module
    attribute reaches it: (keep one, the probe that returns copies)."""
    kept: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    def keep(module: ModuleType, found: dict[str, list[str]]) -> None:
        kept.setdefault(module, []).append({key: list(names) for key, names in found.items()})

    def raised_recordings(module: ModuleType) -> list[dict[str, list[str]]]:
        """What each :func:`recorded_call` on ``module`` that raised
        recorded, in order. A kernel that ran in a call that then failed
        still ran. The grader also checks that there is one per observed
        call that raised."""
        return [{key: list(names) for key, names in found.items()} for found in kept.get(module, [])]

    return keep, raised_recordings


_keep_raised, raised_recordings = _raised_store()


def recorded_call(module: ModuleType, probe: str, kwargs: dict, *, _enable=_ENABLE, _config=_CPU_ONLY,
                  _stop=_stop_profiler, _find=_resolve, _keep=_keep_raised) -> dict:
    """One call of ``probe`` under :func:`recording`: ``{"value": what the
    probe returned, "ops": what was recorded}``. Errors propagate, and what
    the call ran before it raised is kept for :func:`raised_recordings`.
    Checks whose every call is recorded leave no unobserved call in which
    code that notices the recorder could behave otherwise. (Keyword-only
    defaults: see :func:`recording`.)"""
    inner = _find(probe)
    # recording(python_dispatch=False), written out: this runs for every
    # call of every observed check (~60 a run), and the generator-based
    # context manager was a fifth of what recording adds to a call.
    found: dict[str, list[str]] = {}
    try:
        _enable(_config)
        found["profiler"] = []  # only once recording: a call it could not record keeps {}
        try:
            value = inner(module, **kwargs)
        finally:
            _stop(found)
    except BaseException:
        _keep(module, found)
        raise
    return {"value": value, "ops": found}


def all_ops(found: object) -> list[str] | None:
    """Every observer's names together (empty when the call ran no operator,
    as one that only raises an error may), or None when ``found`` is not
    what :func:`recording` fills, or one observer saw operators and another
    none: a sign that the recorder was switched off or replaced."""
    if not isinstance(found, dict) or "profiler" not in found:
        return None
    lists = [found[key] for key in ("dispatch", "profiler") if key in found]
    if not all(isinstance(names, list) and all(type(n) is str for n in names) for names in lists):
        return None
    if any(lists) and not all(lists):
        return None
    return sorted(set().union(*lists))
