"""Helpers for the hidden checks' own unit tests: run a probe call on a
trusted module in this process, and compare plain-data results exactly."""
from __future__ import annotations

import importlib
from pathlib import Path
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


def exercise_module(exercise_id: str, source: str, folder: Path) -> ModuleType:
    """``source`` as exercise ``exercise_id``'s module, assembled in
    ``folder`` with the modules the exercise ships, and loaded here
    (references and trusted test code only: student code runs in the sandbox)."""
    from coursekit.loader import load_module
    from grader.course import REPO_ROOT, load_course
    from grader.intake.submissions import assemble

    course = load_course(check_files=False)
    exercise = course.exercise(exercise_id)
    return load_module(assemble(exercise, source.encode(), folder, course, REPO_ROOT), exercise.module)


def plan_values(plan, module: ModuleType, check_id: str) -> list[object]:
    """The results of ``check_id``'s calls of ``plan`` on ``module``, here;
    an exception a wrong solution raises is kept as its result."""
    values: list[object] = []
    for call in plan.calls[plan.slices[check_id]]:
        try:
            values.append(run_probe(module, call))
        except Exception as exc:  # noqa: BLE001 - a wrong solution may raise: that is its result
            values.append(exc)
    return values


def all_pass(check, got: list[object], want: list[object]) -> bool:
    """Whether every call's result passes ``check``'s comparison with the expected one."""
    return all(not isinstance(g, Exception) and check.compare(g, w) is None for g, w in zip(got, want, strict=True))
