"""Why a check failed, in fixed words, and whether a pitfall variant
failed the same way.

A :class:`Failure` has a *kind*, its signature (compared with the
variants' kinds on the same check: wrong values, NaN, wrong shape, the same
exception, a shape error of the same kind) and a *reason*, the fixed text
a student reads. The error text a call raised is kept in ``detail`` for
the instructor only: it may quote hidden inputs.
"""
from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from grader.checks import Check
from grader.checks.forbidden import unwrapped, unwrapped_value
from grader.feedback import ShapeSymbols, exception_name, input_shapes, memory_limit, shape_detail, shape_error_kind
from grader.sandbox import CallResult, ProbeCall, RunResult

NOT_IMPLEMENTED = "not implemented yet"
NOT_RUN = "could not run (see the exercise's note)"
DETAIL_LIMIT = 300


@dataclass(frozen=True)
class Failure:
    """Why a check failed: ``kind`` is its signature (compared with the
    variants'), ``reason`` the fixed text shown, ``detail`` the raw error."""

    kind: str
    reason: str
    detail: str = ""


_OOM_TEXT = ("can't allocate memory", "DefaultCPUAllocator", "out of memory")


def _raised(call: CallResult, limits: object | None) -> Failure:
    """A call that raised, in fixed words: the exception's name only when it
    is a builtin or torch one; a shape error by its kind; memory by the limit."""
    error_type, error = call.error_type, call.error or ""
    detail = " ".join(f"{error_type}: {error}".split())[:DETAIL_LIMIT]
    if error_type == "NotImplementedError":
        return Failure("not_implemented", NOT_IMPLEMENTED, detail)
    if error_type in ("MemoryError", "OutOfMemoryError") or (
            error_type == "RuntimeError" and any(text in error for text in _OOM_TEXT)):
        return Failure("memory", memory_limit(limits).en, detail)
    if error_type == "ProtocolError":
        return Failure("protocol", "returned something that is not plain data", detail)
    if (shape := shape_error_kind(error_type, error)) is not None:
        return Failure(f"shape error ({shape[0]})", shape[1], detail)
    name = exception_name(error_type)
    return Failure(f"raised {name}", f"raised {name}", detail)


def first_failure(check: Check, calls: slice, run: RunResult, expected: RunResult,
                   limits: object | None = None, inputs: Sequence[ProbeCall] = ()) -> Failure | None:
    """None if ``run`` agrees with ``expected`` on every call of ``check``,
    else the first failure. The error text stays in ``detail``: it may
    quote hidden inputs."""
    for index in range(calls.start, calls.stop):
        call = run.calls[index] if index < len(run.calls) else None
        if call is None:
            return Failure("not_run", NOT_RUN)
        kwargs = unwrapped(inputs[index]).kwargs if index < len(inputs) else {}
        if not call.ok:
            failure = _raised(call, limits)
            if failure.kind.startswith("shape error") and (given := _safely(input_shapes, kwargs, ShapeSymbols())):
                return Failure(failure.kind, f"{failure.reason} (inputs {given})", failure.detail)
            return failure
        if (reason := _compare(check, call.value, expected.calls[index].value)) is not None:
            if reason.startswith("wrong shape") and (shapes := _safely(
                    shape_detail, unwrapped_value(call.value), unwrapped_value(expected.calls[index].value), kwargs)):
                return Failure(reason, f"{reason}: {shapes}")
            return Failure(reason, reason)
    return None


def check_failure(check: Check, calls: slice, run: RunResult, expected: RunResult, source: bytes | None,
                  limits: object | None = None, inputs: Sequence[ProbeCall] = ()) -> Failure | None:
    """:func:`first_failure`, then the check's rule on the submitted bytes
    (read by the grader, never by the student's process), then its rule on
    the whole run (``inputs``: every call of the plan)."""
    failure = first_failure(check, calls, run, expected, limits, inputs)
    if failure is None and check.source_rule is not None and source is not None:
        if (reason := check.source_rule(source)) is not None:
            return Failure("source rule", reason)
    if failure is None and check.run_rule is not None:
        try:
            reason = check.run_rule(inputs, run, expected)
        except Exception:  # noqa: BLE001 - plain data of any form comes back from the sandbox
            reason = "returned a result of an unexpected form"
        if reason is not None:
            return Failure(reason, reason)
    return failure


# Wrong numbers and NaN are one kind of failure for a signature: a variant
# that overflows to NaN and a submission whose large-score values are merely
# off both compute the values wrongly on the same check.
_VALUE_KINDS = ("wrong values", "NaN")


def same_signature(theirs: str, mine: str) -> bool:
    """Two failure kinds of one check point to the same mistake."""
    return theirs == mine or (theirs.startswith(_VALUE_KINDS) and mine.startswith(_VALUE_KINDS))


def _safely(describe, *args) -> str | None:
    """A shape description, or None: plain data of any form comes back from
    the sandbox, and describing it must never take the grader down."""
    try:
        return describe(*args)
    except Exception:  # noqa: BLE001
        return None


_PATH_RE = re.compile(r"(/[^\s'\":]+)+")


def _without_paths(text: str | None) -> str:
    """An error message with file paths blanked (the variant and the
    submission live in different folders)."""
    return _PATH_RE.sub("<path>", text or "")


def _compare(check: Check, submitted: object, expected: object) -> str | None:
    """``check.compare``, which must never take the grader down: a result of
    a shape no compare foresaw is a failed check, not a crash."""
    try:
        return check.compare(submitted, expected)
    except Exception:  # noqa: BLE001 - plain data of any form comes back from the sandbox
        return "returned a result of an unexpected form"


def disagrees(check: Check, calls: slice, run: RunResult, expected: RunResult) -> str | None:
    failure = first_failure(check, calls, run, expected)
    return None if failure is None else failure.kind


def fails_alike(check: Check, calls: slice, submission: RunResult, variant: RunResult) -> bool:
    """The variant's results on this check are indistinguishable from the
    submission's: same errors where either raised, equal values elsewhere."""
    for index in range(calls.start, calls.stop):
        mine = submission.calls[index] if index < len(submission.calls) else None
        theirs = variant.calls[index] if index < len(variant.calls) else None
        if mine is None or theirs is None:
            if (mine is None) != (theirs is None):
                return False
            continue
        if mine.ok != theirs.ok:
            return False
        if not mine.ok:
            # Same hidden inputs, same bug: the same error, message included
            # (an error type alone would confirm unrelated mistakes).
            if (mine.error_type, _without_paths(mine.error)) != (theirs.error_type, _without_paths(theirs.error)):
                return False
        elif _compare(check, mine.value, theirs.value) is not None:
            return False
    return True


# Gaps are sums of squares; a non-finite entry where the other has another
# value counts as this much (far beyond any real difference).
_FAR = 1e30


def _gap(mine: object, theirs: object) -> float | None:
    """The squared distance between the numbers of two plain results (their
    tensors, walked alike; in an integer or bool tensor each entry that
    differs counts one), ``_FAR`` where their forms differ, None when they
    hold no tensor at all."""
    if isinstance(theirs, torch.Tensor) or isinstance(mine, torch.Tensor):
        if not (isinstance(theirs, torch.Tensor) and isinstance(mine, torch.Tensor)) or mine.shape != theirs.shape:
            return _FAR
        if not (theirs.is_floating_point() or theirs.is_complex()):
            # Token ids, counts, flags: each entry that differs counts one.
            return float((mine.to(theirs.dtype) != theirs).sum())
        a, b = mine.detach().double(), theirs.detach().double()
        finite = torch.isfinite(a) & torch.isfinite(b)
        # Non-finite entries must be the very same (NaN where NaN, +inf where +inf).
        odd = ~finite & ~((a == b) | (torch.isnan(a) & torch.isnan(b)))
        return float(((a - b)[finite] ** 2).sum()) + _FAR * int(odd.sum())
    if isinstance(theirs, dict) and isinstance(mine, dict):
        parts = [_gap(mine.get(key), value) for key, value in theirs.items()]
    elif isinstance(theirs, (list, tuple)) and isinstance(mine, (list, tuple)) and len(mine) == len(theirs):
        parts = [_gap(a, b) for a, b in zip(mine, theirs)]
    else:
        return None
    found = [part for part in parts if part is not None]
    return sum(found) if found else None


def resemblance(calls: slice, submission: RunResult, variant: RunResult, expected: RunResult) -> float | None:
    """How far the submission's numbers on these calls are from a variant's,
    relative to how far the variant's are from the reference's: about 0 when
    the submission makes the variant's very mistake (float noise apart),
    about 1 or more when it is merely wrong in another way nearby. None when
    the calls return no numbers to weigh (booleans, counts, errors).

    A check's own tolerance cannot say this: two different mistakes whose
    errors are both just above it (a loose tolerance on large weights) are
    within it of each other."""
    mine_total = theirs_total = 0.0
    weighed = False
    for index in range(calls.start, calls.stop):
        runs = [run.calls[index] if index < len(run.calls) else None for run in (submission, variant, expected)]
        if any(call is None or not call.ok for call in runs):
            continue
        mine, theirs, reference = (call.value for call in runs)
        apart, off = _gap(mine, theirs), _gap(theirs, reference)
        if apart is None or off is None:
            continue
        weighed = True
        mine_total, theirs_total = mine_total + apart, theirs_total + off
    if not weighed or (mine_total == 0 and theirs_total == 0):
        return None
    return math.inf if theirs_total == 0 else math.sqrt(mine_total / theirs_total)
