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

import functools
import importlib
from collections.abc import Callable, Sequence
from dataclasses import replace

import torch

from coursekit.probes.dispatch import ATTENTION_LAYER, FUSED_ATTENTION, SOFTMAX, all_ops, forbidden_kernels
from coursekit.probes.source import scan
from grader.checks import Check, text
from grader.sandbox import ProbeCall, RunResult

RECORDED = "coursekit.probes.dispatch:recorded"
RECORDED_CALL = "coursekit.probes.dispatch:recorded_call"
RAISED_RECORDINGS = "coursekit.probes.dispatch:raised_recordings"
CANARY = "coursekit.probes.dispatch:canary"
# Cases per probe of its source check that the no-forbidden-calls check
# records again with the second observer, the dispatch mode (whose Python
# hook on every operator made all 24 of 01's cases a quarter of a child's
# time). Every call of every observed check is recorded by the profiler
# already, and the check judges those recordings (kernels_in_observed_calls).
_MODE_CASES = 2
_FAMILY_WORDS = {SOFTMAX: "softmax", FUSED_ATTENTION: "fused attention (scaled_dot_product_attention)",
                 ATTENTION_LAYER: "attention layer (nn.MultiheadAttention, nn.Transformer*Layer)"}

__all__ = ["no_forbidden_calls", "observed", "observing", "unwrapped", "source_rule", "kernel_rule",
           "kernels_in_observed_calls", "failed_calls_rule", "ATTENTION_LAYER", "FUSED_ATTENTION", "SOFTMAX"]


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


def _kernel_ran(families: tuple[str, ...]) -> str:
    words = " or ".join(_FAMILY_WORDS[f] for f in families)
    return f"a built-in {words} kernel ran inside your code"


_UNRECORDED = "the operators your code ran could not be recorded"
_CACHED_CHARS = 16_384


def _kernels_recorded(found: object, families: tuple[str, ...]) -> tuple[bool, frozenset[str]] | None:
    """(whether any operator was recorded, the recorded kernels of
    ``families``), or None where :func:`all_ops` finds ``found`` malformed
    or inconsistent. Calls of one check record the same names again and
    again: each distinct recording is judged once (bounded cache)."""
    if not isinstance(found, dict) or "profiler" not in found:
        return None
    lists = tuple(found[key] for key in ("dispatch", "profiler") if key in found)
    size = 0
    try:
        for names in lists:
            if type(names) is not list:
                return None
            size += len("".join(names))  # TypeError unless every name is a str (at C speed)
    except TypeError:
        return None
    key = tuple(map(tuple, lists))
    # Names come from the student's process: a large recording is judged
    # without being kept.
    return _judged_recording(key, families) if size <= _CACHED_CHARS else _judged_recording.__wrapped__(key, families)


@functools.lru_cache(maxsize=2048)
def _judged_recording(lists: tuple[tuple[str, ...], ...], families: tuple[str, ...]) -> tuple[bool, frozenset[str]] | None:
    ops = all_ops({"profiler": list(lists[-1]), **({"dispatch": list(lists[0])} if len(lists) == 2 else {})})
    if ops is None:
        return None
    return bool(ops), frozenset(forbidden_kernels(ops, families))


def kernel_rule(families: tuple[str, ...]) -> Callable[[object, object], str | None]:
    """The observed half, as a compare: the kernels of ``families`` in the
    submission's recording are those in the reference's. The reference runs
    none in the student's calls, and both run all of them in the canary
    call (:func:`coursekit.probes.dispatch.canary`), whose recording proves
    that the recorder saw what ran."""
    ran = _kernel_ran(families)

    def compare(submitted: object, expected: object) -> str | None:
        recorded, reference = _kernels_recorded(submitted, families), _kernels_recorded(expected, families)
        # None: malformed or inconsistent. Empty where the reference ran
        # operators: the recorder did not see the call.
        if recorded is None or reference is None or (reference[0] and not recorded[0]):
            return _UNRECORDED
        mine, theirs = recorded[1], reference[1]
        if mine - theirs:
            # Which kernel is not said: the names came back from the
            # student's process, so they are not repeated to anyone.
            return ran
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


def failed_calls_rule(families: tuple[str, ...]) -> Callable[[object, object], str | None]:
    """The no-forbidden-calls check's compare: :func:`kernel_rule` for its
    recorded cases and the canary; for :data:`RAISED_RECORDINGS` (what the
    observed calls that raised had run, a list: the reference's is empty),
    no kernel of ``families`` in any of them."""
    kernels, ran = kernel_rule(families), _kernel_ran(families)

    def compare(submitted: object, expected: object) -> str | None:
        if not isinstance(expected, list):
            return kernels(submitted, expected)
        if not isinstance(submitted, list):
            return _UNRECORDED
        for found in submitted:
            recorded = _kernels_recorded(found, families)
            if recorded is None:
                return _UNRECORDED
            if recorded[1]:
                return ran
        return None

    return compare


def kernels_in_observed_calls(families: tuple[str, ...]) -> Callable[[Sequence[ProbeCall], RunResult, RunResult], str | None]:
    """A run rule: no call of any :func:`observed` check (whatever check
    made it, whatever its inputs) ran a kernel of ``families`` that the
    reference's same call did not. A call that raised has its recording
    judged through :data:`RAISED_RECORDINGS` instead."""
    kernels = kernel_rule(families)

    def judge(inputs: Sequence[ProbeCall], run: RunResult, expected: RunResult) -> str | None:
        raised = 0
        for index, call in enumerate(inputs):
            if index >= len(run.calls):
                break
            if call.probe == RAISED_RECORDINGS and run.calls[index].ok:
                # One recording per observed call that raised before it: none
                # dropped (code that cleared or trimmed the store) and none added.
                if not isinstance(run.calls[index].value, list) or len(run.calls[index].value) != raised:
                    return _UNRECORDED
            if call.probe != RECORDED_CALL:
                continue
            if not run.calls[index].ok:
                if run.calls[index].error_type == "ProtocolError":
                    # A result that is not plain data fails in the child's
                    # encoding, after the probe returned: its recording came
                    # back with nothing and was kept nowhere.
                    return _UNRECORDED
                raised += 1
                continue
            mine, theirs = run.calls[index].value, expected.calls[index].value
            if (reason := kernels(mine.get("ops") if isinstance(mine, dict) else None,
                                  theirs.get("ops") if isinstance(theirs, dict) else None)) is not None:
                return reason
        return None

    return judge


def _recorded_calls(exercise_id: str, source_check: str) -> Callable[[torch.Generator], list[ProbeCall]]:
    """A few calls of ``source_check`` (a check of the same exercise) per
    probe, recorded by both observers; the canary; and, last, what the
    observed calls that raised had recorded."""

    def calls(gen: torch.Generator) -> list[ProbeCall]:
        from grader.course import load_course

        slug = load_course(check_files=False).exercise(exercise_id).slug
        checks = importlib.import_module(f"grader.checks.{slug}").CHECKS
        (check,) = [c for c in checks if c.id == source_check]
        grouped: dict[str, list[dict]] = {}
        for call in map(unwrapped, check.calls(gen)):  # an observed() check's call: record what it wraps
            grouped.setdefault(call.probe, []).append(call.kwargs)
        return [*(ProbeCall(RECORDED, {"probe": probe, "cases": cases[:_MODE_CASES]})
                  for probe, cases in grouped.items()),
                ProbeCall(RECORDED, {"probe": CANARY, "cases": [{}]}),
                ProbeCall(RAISED_RECORDINGS, {})]

    return calls


def no_forbidden_calls(exercise_id: str, *, requires: tuple[str, ...], weight: float = 0.5,
                       kernels: tuple[str, ...] = ()) -> Check:
    """The exercise's module uses none of the names its ``forbidden`` list
    in course.yaml names (read from the submitted bytes), and, with
    ``kernels``, runs no kernel of those families in any call of the
    exercise's :func:`observed` checks, nor in a few of its first required
    check's calls recorded by both observers (seen at the dispatcher)."""
    return Check(
        id=f"{exercise_id}-no-forbidden-calls",
        weight=weight,
        message=text("uses none of the built-ins this exercise asks you to write yourself",
                     "没有使用本练习要求你亲自实现的内置函数"),
        calls=_recorded_calls(exercise_id, requires[0]) if kernels else (lambda gen: []),
        compare=failed_calls_rule(kernels) if kernels else (lambda submitted, expected: None),
        requires=requires,
        source_rule=source_rule(exercise_id),
        run_rule=kernels_in_observed_calls(kernels) if kernels else None,
    )
