"""The "write it yourself" check: an exercise's module must not call the
built-ins it asks the student to implement.

Two signals, both judged in the grader's own process:

- **observed**: the calls of the exercise's core check run again in the
  sandbox under :func:`coursekit.probes.dispatch.recorded`, which returns
  the ATen operators they ran as plain data; any kernel of a forbidden
  family (softmax, fused attention) fails the check, whatever name the code
  used to reach it;
- **read**: the submitted bytes, as the grader collected them, decoded as
  Python decodes them and scanned for the names course.yaml forbids
  (:func:`coursekit.probes.source.scan`). The student's process never sees
  this scan, so neither ``__file__`` nor the scanner's code can be changed
  under it.
"""
from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import replace

import torch

from coursekit.probes.dispatch import FUSED_ATTENTION, SOFTMAX, all_ops, forbidden_kernels
from coursekit.probes.source import scan
from grader.checks import Check, text
from grader.sandbox import ProbeCall

RECORDED = "coursekit.probes.dispatch:recorded"
RECORDED_CALL = "coursekit.probes.dispatch:recorded_call"
CANARY = "coursekit.probes.dispatch:canary"
# Cases per probe that the no-forbidden-calls check also records with the
# second observer, the dispatch mode: its Python hook on every operator made
# all 24 of 01's cases a quarter of a child's time. Every case is recorded
# by the profiler, so the check still sees each one its source check runs
# (and the checks that require it count nothing when one runs a built-in).
_MODE_CASES = 2
_FAMILY_WORDS = {SOFTMAX: "softmax", FUSED_ATTENTION: "fused attention (scaled_dot_product_attention)"}

__all__ = ["no_forbidden_calls", "observed", "observing", "unwrapped", "source_rule", "kernel_rule", "FUSED_ATTENTION", "SOFTMAX"]


def _lines(uses: list[dict]) -> str:
    lines = sorted({use["line"] for use in uses})
    return ("line " if len(lines) == 1 else "lines ") + ", ".join(map(str, lines[:5]))


def source_rule(exercise_id: str) -> Callable[[bytes], str | None]:
    """The static half: None when the submitted bytes use none of the names
    the exercise forbids, else a fixed reason (the student's text never goes
    into it)."""

    names: list[str] = []  # read from course.yaml once, on first use

    def inspect(data: bytes) -> str | None:
        from grader.course import load_course

        if not names:
            names.extend(load_course(check_files=False).exercise(exercise_id).forbidden)
        found = scan(data, names)
        if found.refused is not None:
            return f"the module {found.refused}"
        if found.uses:
            return f"uses a forbidden built-in on {_lines(found.uses)} (see the exercise README)"
        if found.reaching_in:
            return f"reaches into the grader's probes or Python's innards on {_lines(found.reaching_in)}"
        return None

    return inspect


def kernel_rule(families: tuple[str, ...]) -> Callable[[object, object], str | None]:
    """The observed half, as a compare: the kernels of ``families`` in the
    submission's recording are those in the reference's. The reference runs
    none in the student's calls, and both run all of them in the canary
    call (:func:`coursekit.probes.dispatch.canary`), whose recording proves
    that the recorder saw what ran."""
    words = " or ".join(_FAMILY_WORDS[f] for f in families)

    def compare(submitted: object, expected: object) -> str | None:
        ops, reference_ops = all_ops(submitted), all_ops(expected)
        # None: malformed or inconsistent. Empty where the reference ran
        # operators: the recorder did not see the call.
        if ops is None or reference_ops is None or (reference_ops and not ops):
            return "the operators your code ran could not be recorded"
        mine, theirs = set(forbidden_kernels(ops, families)), set(forbidden_kernels(reference_ops, families))
        if mine - theirs:
            # Which kernel is not said: the names came back from the
            # student's process, so they are not repeated to anyone.
            return f"a built-in {words} kernel ran inside your code"
        if theirs - mine:
            return "the operators your code ran could not be recorded (the recorder was changed)"
        return None

    return compare


def observed(check: Check, families: tuple[str, ...]) -> Check:
    """``check`` with each of its calls recorded (:func:`recorded_call`):
    the values are compared as before, and no kernel of ``families`` may
    run in any of them. Code that notices the recorder cannot run a
    built-in in the calls that are not recorded: there are none."""
    kernels, values = kernel_rule(families), check.compare

    def wrap(built: list[ProbeCall]) -> list[ProbeCall]:
        return [ProbeCall(RECORDED_CALL, {"probe": c.probe, "kwargs": c.kwargs}) for c in built]

    def compare(submitted: object, expected: object) -> str | None:
        if not isinstance(submitted, dict) or not isinstance(expected, dict):
            return "returned a result of an unexpected form"
        return values(submitted.get("value"), expected.get("value")) or kernels(submitted.get("ops"), expected.get("ops"))

    variant_calls = check.variant_calls
    return replace(check, calls=lambda gen: wrap(check.calls(gen)), compare=compare,
                   variant_calls=None if variant_calls is None else lambda gen, sizes: wrap(variant_calls(gen, sizes)))


def unwrapped_value(value: object) -> object:
    """The probe's own result inside a recorded call's ``{"value", "ops"}``
    (any other result as it is): what shape descriptions look at."""
    if isinstance(value, dict) and set(value) == {"value", "ops"}:
        return value["value"]
    return value


def unwrapped(call: ProbeCall) -> ProbeCall:
    """The probe call an :func:`observed` check's call records (the call
    itself for any other): what tests that look at hidden inputs want."""
    if call.probe == RECORDED_CALL:
        return ProbeCall(call.kwargs["probe"], call.kwargs["kwargs"])
    return call


def observing(checks: list[Check], families: tuple[str, ...]) -> list[Check]:
    """Every check but the no-forbidden-calls one :func:`observed`: an
    exercise whose every call must run no kernel of ``families``."""
    return [check if check.id.endswith("-no-forbidden-calls") else observed(check, families) for check in checks]


def _recorded_calls(exercise_id: str, source_check: str) -> Callable[[torch.Generator], list[ProbeCall]]:
    """The calls of ``source_check`` (a check of the same exercise), each
    probe's calls grouped into one recorded call."""

    def calls(gen: torch.Generator) -> list[ProbeCall]:
        from grader.course import load_course

        slug = load_course(check_files=False).exercise(exercise_id).slug
        checks = importlib.import_module(f"grader.checks.{slug}").CHECKS
        (check,) = [c for c in checks if c.id == source_check]
        grouped: dict[str, list[dict]] = {}
        for call in map(unwrapped, check.calls(gen)):  # an observed() check's call: record what it wraps
            grouped.setdefault(call.probe, []).append(call.kwargs)
        return [*(ProbeCall(RECORDED, {"probe": probe, "cases": cases, "python_dispatch": False})
                  for probe, cases in grouped.items()),
                *(ProbeCall(RECORDED, {"probe": probe, "cases": cases[:_MODE_CASES]})
                  for probe, cases in grouped.items()),
                ProbeCall(RECORDED, {"probe": CANARY, "cases": [{}]})]

    return calls


def no_forbidden_calls(exercise_id: str, *, requires: tuple[str, ...], weight: float = 0.5,
                       kernels: tuple[str, ...] = ()) -> Check:
    """The exercise's module uses none of the names its ``forbidden`` list
    in course.yaml names (read from the submitted bytes), and, with
    ``kernels``, runs no kernel of those families while doing what its
    first required check asks (observed at the dispatcher)."""
    return Check(
        id=f"{exercise_id}-no-forbidden-calls",
        weight=weight,
        message=text("uses none of the built-ins this exercise asks you to write yourself",
                     "没有使用本练习要求你亲自实现的内置函数"),
        calls=_recorded_calls(exercise_id, requires[0]) if kernels else (lambda gen: []),
        compare=kernel_rule(kernels) if kernels else (lambda submitted, expected: None),
        requires=requires,
        source_rule=source_rule(exercise_id),
    )
