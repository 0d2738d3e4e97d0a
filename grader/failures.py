"""Why a check failed, in fixed words, and whether a pitfall variant
failed the same way.

A :class:`Failure` has a *kind*, its signature (compared with the
variants' kinds on the same check: wrong values, NaN, wrong shape, the same
exception, a shape error of the same kind) and a *reason*, the fixed text
a student reads. The error text a call raised is kept in ``detail`` for
the instructor only: it may quote hidden inputs.

:func:`resemblance` weighs whether a variant's numbers are the submission's
own (grader/matching.py decides what is *confirmed* with it).
"""
from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from grader.checks import COULD_NOT_TELL, Check, CheckPlan, CouldNotTell
from grader.course import Exercise
from grader.checks.forbidden import unwrapped, unwrapped_value
from grader.feedback import Phrase, ShapeSymbols, exception_name, input_shapes, memory_limit, shape_detail, shape_error_kind
from grader.sandbox import CallResult, ProbeCall, RunResult

NOT_IMPLEMENTED = "not implemented yet"
NOT_RUN = "could not run (see the exercise's note)"
DETAIL_LIMIT = 300
TAMPERED = "the run tampered with the grader's result channel: nothing it sent back counts"


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


# Fixed inputs (an exam's, a training check's, a judge without a grading
# secret) are the same for every submission: a page must then show nothing the
# submission chose from them, or it reads them out over many submissions
# (a returned shape, an exception's class, which shape error it imitates).
# Per-submission inputs show these (SECURITY.md, "Hidden inputs per submission").
CONCEALED_EXCEPTION = "raised an exception (its type is shown only for inputs drawn for this submission)"


def concealed(reason: str) -> str:
    """A compare's reason without the submission's exception class
    ("raised X", "raised X instead of Y"); others are the grader's words."""
    if reason.startswith("raised "):
        return "raised the wrong exception" if " instead of " in reason else CONCEALED_EXCEPTION
    return reason


# Raised errors whose reason says no more than their kind.
_UNCONCEALED = ("not_implemented", "memory", "protocol")


def first_failure(check: Check, calls: slice, run: RunResult, expected: RunResult,
                   limits: object | None = None, inputs: Sequence[ProbeCall] = (),
                   reveal: bool = True) -> Failure | None:
    """None if ``run`` agrees with ``expected`` on every call of ``check``,
    else the first failure. The error text stays in ``detail``: it may
    quote hidden inputs. ``reveal``: the reason may show the returned shape
    and the exception's class (False on fixed inputs: grader/feedback.py)."""
    for index in range(calls.start, calls.stop):
        call = run.calls[index] if index < len(run.calls) else None
        if call is None:
            return Failure("not_run", NOT_RUN)
        kwargs = unwrapped(inputs[index]).kwargs if index < len(inputs) else {}
        if not call.ok:
            failure = _raised(call, limits)
            if not reveal and failure.kind not in _UNCONCEALED:
                return Failure(failure.kind, CONCEALED_EXCEPTION, failure.detail)
            if failure.kind.startswith("shape error") and (given := _safely(input_shapes, kwargs, ShapeSymbols())):
                return Failure(failure.kind, f"{failure.reason} (inputs {given})", failure.detail)
            return failure
        if (reason := _compare(check, call.value, expected.calls[index].value)) is not None:
            if not reveal:
                return Failure(reason, concealed(reason))
            if reason.startswith("wrong shape") and (shapes := _safely(
                    shape_detail, unwrapped_value(call.value), unwrapped_value(expected.calls[index].value), kwargs)):
                return Failure(reason, f"{reason}: {shapes}")
            return Failure(reason, reason)
    return None


def check_failure(check: Check, calls: slice, run: RunResult, expected: RunResult, source: bytes | None,
                  limits: object | None = None, inputs: Sequence[ProbeCall] = (), reveal: bool = True) -> Failure | None:
    """:func:`first_failure`, then the check's rule on the submitted bytes
    (read by the grader, never by the student's process), then its rule on
    the whole run (``inputs``: every call of the plan). A ``tampered`` run
    fails every check, those without calls and those answered before the
    break too: nothing it sent back is kept (grader/sandbox/runstate.py)."""
    if run.status == "tampered":
        return Failure("tampered", TAMPERED)
    failure = first_failure(check, calls, run, expected, limits, inputs, reveal)
    if failure is None and check.source_rule is not None and source is not None:
        if (reason := check.source_rule(source)) is not None:
            return Failure("source rule", reason)
    if failure is None and check.run_rule is not None:
        try:
            reason = check.run_rule(inputs, run, expected)
        except Exception:  # noqa: BLE001 - plain data of any form comes back from the sandbox
            reason = "returned a result of an unexpected form"
        if isinstance(reason, CouldNotTell):
            return Failure(COULD_NOT_TELL, str(reason), reason.detail)
        if reason is not None:
            return Failure(getattr(reason, "kind", reason), reason)   # a measured figure's words vary, its kind not
    return failure


def measured_failure(check: Check, inputs: Sequence[ProbeCall], variant: RunResult, expected: RunResult) -> Failure | None:
    """A pitfall variant's failure of a measured check's run rule (its work
    or memory, measured as the submission's is), so that its hint can be
    confirmed there; a figure that could not tell is no failure."""
    if not check.measured or check.run_rule is None:
        return None
    try:
        reason = check.run_rule(inputs, variant, expected)
    except Exception:  # noqa: BLE001 - plain data of any form comes back from the sandbox
        return None
    if reason is None or isinstance(reason, CouldNotTell):
        return None
    return Failure(getattr(reason, "kind", reason), reason)


# Wrong numbers and NaN are one kind of failure for a signature: a variant
# that overflows to NaN and a submission whose large-score values are merely
# off both compute the values wrongly on the same check.
_VALUE_KINDS = ("wrong values", "NaN")
# One shape mistake returns a wrong shape on one input and fails to
# broadcast on another (12's positions from arange(context_length): which
# of the two a draw shows depends on its lengths).
_SHAPE_KINDS = ("wrong shape", "shape error")


def same_signature(theirs: str, mine: str) -> bool:
    """Two failure kinds of one check point to the same mistake."""
    return theirs == mine or any(theirs.startswith(family) and mine.startswith(family)
                                 for family in (_VALUE_KINDS, _SHAPE_KINDS))


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


def _leaves(value: object, path: tuple = ()) -> dict[tuple, object]:
    """The tensors of a plain result by where they sit (dict keys, list
    indexes); anything else that is not a container is kept as it is."""
    if isinstance(value, dict):
        return {leaf: v for key, item in value.items() for leaf, v in _leaves(item, (*path, str(key))).items()}
    if isinstance(value, (list, tuple)):
        return {leaf: v for i, item in enumerate(value) for leaf, v in _leaves(item, (*path, i)).items()}
    return {path: value}


def _plain_same(a: object, b: object) -> bool:
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001 - plain data of any form comes back from the sandbox
        return False


def _numbers(value: object) -> torch.Tensor | None:
    return value.detach().double() if isinstance(value, torch.Tensor) else None


def resemblance(calls: slice, submission: RunResult, variant: RunResult, expected: RunResult) -> float | None:
    """How far the submission's numbers on these calls are from a variant's,
    relative to how far the variant's are from the reference's (the tensors
    of the calls where all three returned a value): about 0 when the
    submission makes the variant's very mistake (float noise apart), about
    1 or more when it is wrong in another way. None when there are no
    numbers to weigh (booleans, counts, errors) or the variant's equal the
    reference's. A tensor of another shape, or a non-finite entry where the
    other has another value, makes them unlike (inf).

    A check's own tolerance cannot say this: two different mistakes whose
    errors are both just above it (a loose tolerance on large weights) are
    within it of each other."""
    apart = off = 0.0
    for index in range(calls.start, calls.stop):
        runs = [run.calls[index] if index < len(run.calls) else None for run in (submission, variant, expected)]
        if any(call is None or not call.ok for call in runs):
            continue
        mine, theirs, reference = (_leaves(call.value) for call in runs)
        for where, value in reference.items():
            r, v, m = _numbers(value), _numbers(theirs.get(where)), _numbers(mine.get(where))
            if r is None:
                continue
            if v is None or m is None:
                # No tensor where the reference has one (a missing gradient):
                # like each other only when both lack it alike.
                if v is not None or m is not None or not _plain_same(theirs.get(where), mine.get(where)):
                    return math.inf
                off += 1.0
                continue
            if m.shape != v.shape:
                return math.inf
            same = (m == v) | (torch.isnan(m) & torch.isnan(v))
            if bool((~(torch.isfinite(v) & torch.isfinite(m)) & ~same).any()):
                return math.inf
            finite = torch.isfinite(v) & torch.isfinite(m)
            apart += float(((m - v)[finite] ** 2).sum())
            if r.shape != v.shape:  # both of another shape than the reference's: far from it
                off += float(v.numel()) + 1.0
                continue
            finite = finite & torch.isfinite(r)
            off += float(((v - r)[finite] ** 2).sum()) + float((torch.isfinite(v) != torch.isfinite(r)).sum())
    if off == 0:
        return None if apart == 0 else math.inf
    return math.sqrt(apart / off)


_CALL = re.compile(r"(?:during call|^call) (\d+)")


def run_where(run: RunResult, plan: CheckPlan, exercise: Exercise) -> Phrase:
    """Where in the run it broke: importing, or the check whose call was
    running (by its public id, never the internal probe)."""
    head = run.reason.split(": ", 1)[0]  # the sandbox's own fixed words
    if "while importing" in head or "while starting" in head or run.status == "import_error":
        return Phrase(en=f" while importing {exercise.module}", zh=f"（导入 {exercise.module} 时）")
    match = _CALL.search(head)
    index = int(match.group(1)) - 1 if match else len(run.calls)
    owner = next((check_id for check_id, calls in plan.slices.items() if calls.start <= index < calls.stop), None)
    if owner is None:
        return Phrase(en=" while drawing a feedback figure", zh="（绘制反馈图时）") if index < len(plan.calls) \
            else Phrase(en="", zh="")
    return Phrase(en=f" during call {index + 1} of {len(plan.calls)}, in check {owner}",
                zh=f"（第 {index + 1}/{len(plan.calls)} 次调用，检查 {owner}）")
