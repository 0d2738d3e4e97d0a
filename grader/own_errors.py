"""A submission's own exception on a hidden check, told without the hidden
inputs: where it was raised (the student's file and line), on what kind of
input (the check's own words), and its message.

The hidden run's exception may carry anything the hidden inputs hold (its
message, its class's name, even its line: code can raise from a line it
picks by a value). So the message and the place shown come from a *replay*:
the same call of the check built from a generator of its own
(:data:`REPLAY_SALT`), inputs of the same kind that grade nobody, run once
more on the submission in a fresh child. When that replay raises the same
exception, its file, line and message are shown: they can only say what the
replay's inputs hold. When it does not, the error depends on the hidden
values, and only the kind of input is said.

What the child says about its exception (message, file, line) shapes
feedback text only, bounded and escaped where it is shown, never points: the
failure's kind (its signature, what pitfalls are matched on) is unchanged.
Only where a page may show the exception's type at all (inputs drawn per
submission, grader/failures.py) is a replay run.

In:  the plan, the submission's run and failures, a sandbox.
Out: the failures whose reason now says where, on what, and the message.
"""
from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

import torch

from grader.checks import Check, CheckPlan
from grader.checks.forbidden import unwrapped
from grader.checks.input_words import attention_inputs
from grader.checks.inputs import check_seed
from grader.course import Text
from grader.failures import Failure
from grader.feedback import ShapeSymbols, exception_name, input_shapes
from grader.sandbox import CallResult, ProbeCall

# Any fixed number: replay inputs are drawn from it and grade no submission
# (a submission's inputs come from the grading secret, grader/checks/inputs.py).
REPLAY_SALT = 0x0E11_0B5E
MAX_EXPLAINED = 8       # checks replayed per submission: one short run, whatever it raised
REPLAY_DRAWS = 512      # replay inputs drawn per check to find one of the graded call's kind,
REPLAY_SEARCH_S = 0.5   # for at most this long
MESSAGE_LIMIT = 200
_EXPLAINED_KINDS = ("raised ", "shape error")


def describe(check: Check, call: ProbeCall) -> Text:
    """The kind of input ``call`` is, in the check's words (its ``inputs``),
    else an attention call's by role, else its tensors' shapes in letters."""
    try:
        own = check.inputs(call) if check.inputs is not None else None
    except Exception:  # noqa: BLE001 - a describer must never take the grader down
        own = None
    if own is not None:
        return own
    if (words := attention_inputs(call)) is not None:
        return words
    try:
        shapes = input_shapes(unwrapped(call).kwargs, ShapeSymbols())
    except Exception:  # noqa: BLE001
        shapes = ""
    return Text(en=f"inputs {shapes}", zh=f"输入 {shapes}") if shapes else Text(en="its inputs", zh="它的输入")


def _same_inputs(a: ProbeCall, b: ProbeCall) -> bool:
    """Whether two calls hold the same inputs (a hand-picked case the builder
    makes for every seed): its replay would be the graded input itself."""
    def flat(value: object) -> list:
        if isinstance(value, dict):
            return [k for key, item in value.items() for k in (key, *flat(item))]
        if isinstance(value, (list, tuple)):
            return [k for item in value for k in flat(item)]
        return [value]
    left, right = flat(a.kwargs), flat(b.kwargs)
    if len(left) != len(right):
        return False
    for x, y in zip(left, right):
        if isinstance(x, torch.Tensor) or isinstance(y, torch.Tensor):
            if not (isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor) and x.shape == y.shape
                    and x.dtype == y.dtype and bool(torch.equal(x, y))):
                return False
        elif not _plain_same(x, y):
            return False
    return True


def _plain_same(x: object, y: object) -> bool:
    try:
        return bool(x == y)
    except Exception:  # noqa: BLE001
        return False


def replay_call(check: Check, offset: int, graded: ProbeCall) -> ProbeCall | None:
    """A call of the check on replay inputs of the graded call's kind (the
    same words, :func:`describe`; the same offset first), never equal to it."""
    kind, started = describe(check, graded), time.monotonic()
    for attempt in range(REPLAY_DRAWS):
        if attempt and time.monotonic() - started > REPLAY_SEARCH_S:
            break
        calls = check.calls(torch.Generator().manual_seed(check_seed(REPLAY_SALT + attempt, check.id, check.seed)))
        for call in ([calls[offset]] if offset < len(calls) else []) + calls:
            if call.probe == graded.probe and describe(check, call) == kind and not _same_inputs(call, graded):
                return call
    return None


def shown_message(call: CallResult) -> str:
    """The replay's message: one line, printable, bounded; its exception's
    class named only when builtin or torch (grader/feedback.py), as everywhere."""
    text = " ".join((call.error or "").split())
    own = str(call.error_type or "")
    message = text[len(own) + 2:] if own and text.startswith(own + ": ") else ("" if text == own else text)
    text = "".join(c for c in f"{exception_name(own)}: {message}".rstrip(": ") if c.isprintable())
    return text if len(text) <= MESSAGE_LIMIT else text[: MESSAGE_LIMIT - 1] + "…"


def _raising(plan: CheckPlan, run, failures: dict[str, Failure | None], per_submission: bool) -> dict[str, int]:
    """Each failed check whose failure is an exception its page may name,
    and the index of its first call that raised."""
    found: dict[str, int] = {}
    if not per_submission:
        return found
    for check in plan.checks:
        failure = failures.get(check.id)
        if failure is None or not failure.kind.startswith(_EXPLAINED_KINDS) or check.fixed_inputs or check.anchored:
            continue
        calls = plan.slices[check.id]
        index = next((i for i in range(calls.start, min(calls.stop, len(run.calls))) if not run.calls[i].ok), None)
        if index is not None:
            found[check.id] = index
    return found


def told(failure: Failure, kind: Text, replayed: CallResult | None, error_type: str | None) -> Failure:
    """The failure with its reason saying on what, and where and the message
    when the replay (None: none ran) raised the same exception."""
    if replayed is None:
        reason = f"{failure.reason}, on {kind.en} · 在{kind.zh}上出错"
    elif not replayed.ok and replayed.error_type == error_type:
        place = f" in {replayed.where[0]}, line {replayed.where[1]}" if replayed.where else ""
        zh_place = f"（{replayed.where[0]} 第 {replayed.where[1]} 行）" if replayed.where else ""
        message = shown_message(replayed)
        reason = (f"{failure.reason}{place}, on {kind.en}; on an ungraded input of that kind it says: {message}"
                  f" · 在{kind.zh}上出错{zh_place}；在同类、不计分的输入上，它的信息是：{message}")
    else:
        reason = (f"{failure.reason}, on {kind.en} (an ungraded input of that kind does not raise it: the error "
                  f"depends on the hidden values, so its message and line stay hidden)"
                  f" · 在{kind.zh}上出错（同类、不计分的输入上不出错：错误取决于隐藏的数值，故不显示其信息与行号）")
    return replace(failure, reason=reason)


def explain(sandbox, folder: Path, module_name: str, plan: CheckPlan, run, failures: dict[str, Failure | None],
            per_submission: bool) -> dict[str, Failure | None]:
    """``failures`` with each raised one told (see the module's docstring):
    one more short run of the submission, on replay inputs, when any raised."""
    raising = _raising(plan, run, failures, per_submission)
    if not raising:
        return failures
    checks = {check.id: check for check in plan.checks}
    replays = {check_id: replay_call(checks[check_id], index - plan.slices[check_id].start, plan.calls[index])
               for check_id, index in list(raising.items())[:MAX_EXPLAINED]}
    sent = [check_id for check_id, call in replays.items() if call is not None]
    results: dict[str, CallResult] = {}
    if sent:
        try:
            replayed = sandbox.run(folder, module_name, [replays[check_id] for check_id in sent])
            results = {check_id: call for check_id, call in zip(sent, replayed.calls)}
        except Exception:  # noqa: BLE001 - words for a page: never a reason to lose the grade
            results = {}
    told_failures = dict(failures)
    for check_id, index in raising.items():
        told_failures[check_id] = told(failures[check_id], describe(checks[check_id], plan.calls[index]),
                                       results.get(check_id), run.calls[index].error_type)
    return told_failures
