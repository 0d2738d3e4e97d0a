"""Helpers for the hidden checks' own unit tests: run a probe call on a
trusted module in this process, and compare plain-data results exactly."""
from __future__ import annotations

import importlib
from types import ModuleType

import torch

from grader.sandbox import ProbeCall


def run_probe(module: ModuleType, call: ProbeCall) -> object:
    """``call``'s probe on ``module``, here (references only: student code
    runs in the sandbox)."""
    module_name, function = call.probe.split(":")
    return getattr(importlib.import_module(module_name), function)(module, **call.kwargs)


def same(a: object, b: object) -> bool:
    """Exactly equal plain data: tensors of the same dtype and values,
    dicts with the same keys, lists and tuples of the same type and length."""
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b)
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(map(same, a, b))
    return a == b


def selftest_call(name: str, *args: object) -> ProbeCall:
    """A sandboxed call of ``name(*args)`` on the module under test, its
    value returned as is (the sandbox's own tests)."""
    return ProbeCall("coursekit.probes.sandbox_selftest:call", {"name": name, "args": list(args)})


def submission_folder(tmp_path, source: str, module_name: str = "submission", folder_name: str = "submission"):
    """``tmp_path/folder_name/module_name.py`` holding ``source``; the folder."""
    folder = tmp_path / folder_name
    folder.mkdir(exist_ok=True)
    (folder / f"{module_name}.py").write_text(source)
    return folder
