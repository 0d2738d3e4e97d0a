"""A measured check that could not tell, measured once more.

A check on work or memory measured from outside (grader/checks/work.py,
grader/checks/memory.py) compares the submission's figure with the
reference's, each from its own run. Those runs can be minutes apart, under
different loads: on a busy machine the reference's own code once read as
too near its threshold to decide on. So a figure that could not tell is
measured again: the calls of the measured checks, the submission's and
then the reference's, back to back in fresh children, so that both figures
come from one moment of the machine. All of them, in plan order, because a
measured call can go on from another's state (14's chunks go on from the
cache its single steps left). The check that could not tell is judged
again on that pair, its outputs as well as its figure; the other checks
keep the first run's verdicts. The reference's outputs there must be its
first run's, or the replay was not faithful and counts for nothing.

A second measurement grants nothing that the first did not measure: the
same calls on the same inputs, compared with the reference's, timed from
outside. A run that breaks or comes back short keeps the first verdict
(could not tell: the instructor reviews it); one that tampers voids the
grade, as the first run's would.

In:  the plan, the first runs (submission's and reference's), the checks that could not tell.
Out: the runs with the measured calls replaced, and the submission's new run; what
     follows the verdicts reads the new calls of the checks judged again only (:func:`taking`).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from grader.checks import COULD_NOT_TELL, CheckPlan
from grader.failures import Failure, first_failure
from grader.references import check_batches
from grader.sandbox import RunResult

Runner = Callable[[list, list[int]], RunResult]


def undecided(failures: dict[str, Failure | None]) -> list[str]:
    """The checks whose figure could not tell, in plan order."""
    return [check_id for check_id, failure in failures.items()
            if failure is not None and failure.kind == COULD_NOT_TELL]


@dataclass
class Remeasured:
    """The submission's and the reference's runs with the measured calls
    made again (``whole``: every one of them came back, and the reference's
    outputs are its first run's), and the submission's run of those calls
    alone (its status: tampered or not)."""

    run: RunResult
    expected: RunResult
    again: RunResult
    whole: bool


def measure_again(plan: CheckPlan, check_ids: list[str], run: RunResult, expected: RunResult,
                  submission: Runner, reference: Runner) -> Remeasured:
    """The calls of every measured check (and of ``check_ids``) made again
    by ``submission`` and then by ``reference`` (each ``(calls, batches) ->
    RunResult``), spliced into copies of ``run`` and ``expected`` where
    both came back whole and the reference's outputs are its first run's."""
    replayed = [check for check in plan.checks if check.measured or check.id in check_ids]
    ordered = sorted(i for check in replayed for i in range(plan.slices[check.id].start, plan.slices[check.id].stop))
    calls, batches = [plan.calls[i] for i in ordered], check_batches(plan, ordered)
    again = submission(calls, batches)
    if again.status != "ok" or len(again.calls) != len(ordered) or len(run.calls) <= ordered[-1]:
        return Remeasured(run, expected, again, whole=False)
    theirs = reference(calls, batches)
    if theirs.status != "ok" or len(theirs.calls) != len(ordered):
        return Remeasured(run, expected, again, whole=False)
    remeasured = _spliced(expected, ordered, theirs.calls)
    if any(first_failure(check, plan.slices[check.id], remeasured, expected) is not None for check in replayed):
        return Remeasured(run, expected, again, whole=False)   # not a faithful replay of the first run
    return Remeasured(_spliced(run, ordered, again.calls), remeasured, again, whole=True)


def judged_again(first: Failure, again: Failure | None) -> Failure | None:
    """The check's verdict on the figures measured again; still undecided,
    its detail keeps both pairs of figures, for the instructor's review."""
    if again is None or again.kind != COULD_NOT_TELL:
        return again
    return replace(again, detail=f"measured twice: {first.detail} | again: {again.detail}")


def taking(plan: CheckPlan, check_ids: list[str], first: RunResult, again: RunResult) -> RunResult:
    """``first`` with the calls of ``check_ids`` taken from ``again`` (a
    whole plan's run): the checks judged again read their new calls, every
    other check the first run's, which its verdict came from."""
    ordered = [i for check_id in check_ids for i in range(plan.slices[check_id].start, plan.slices[check_id].stop)]
    return _spliced(first, ordered, [again.calls[i] for i in ordered])


def _spliced(run: RunResult, ordered: list[int], results: list) -> RunResult:
    """``run`` with its calls at ``ordered`` replaced by ``results``, in that order."""
    calls = list(run.calls)
    for index, result in zip(ordered, results):
        calls[index] = result
    return replace(run, calls=calls)
