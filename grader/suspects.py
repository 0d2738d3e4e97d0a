"""Which catalogued mistake, if any, explains a failed check: the analysis
of one run of the submission against the pitfall variants' runs on the
same input set (grader/matching.py says what confirms).

On a submission's own hidden inputs, that analysis needs every variant that
fails the check alike run on those inputs too: a dozen runs for one failing
exercise, most of a failing class's grading time. So the judge runs the
submission once more, on the fixed inputs, where each variant's results are
made once per class, and analyses there (:class:`Seen` of that run). Only
the variants confirmed there run on the submission's own inputs, where they
must be confirmed again: a hint says "confirmed" only when the submission's
outputs are the variant's on both sets. Points never rest on the fixed run.

In:  a :class:`Seen` run, a failed check, the variants' runs on that run's inputs.
Out: (confirmed, possible) pitfall ids.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from grader.checks import COULD_NOT_TELL, Check
from grader.course import Course
from grader.failures import Failure, same_signature
from grader.matching import Evidence, evidence, guess_fits, one_per_mistake, same_outputs, unexplained
from grader.references import InputSet
from grader.sandbox import RunResult

# At most this many unconfirmed pitfalls are offered per failed check, as
# guesses ("possibly"), beside the check's own words (its reason).
MAX_POSSIBLE = 2


@dataclass
class Seen:
    """One run of the submission on one input set and what it shows:
    each check's failure (None: passed), the checks it passes (whatever
    they require), and each variant's evidence against this run, found once."""

    inputs: InputSet
    run: RunResult
    expected: RunResult
    failures: dict[str, Failure | None]
    passed: set[str]
    found: dict[str, tuple[Evidence, RunResult]] = field(default_factory=dict)

    @property
    def decided(self) -> list[Check]:
        """The checks this run says something about: all but a measured figure
        that could not tell (a busy machine's, neither a pass nor a mistake,
        that no variant is measured to share)."""
        return [check for check in self.inputs.plan.checks
                if (failure := self.failures.get(check.id)) is None or failure.kind != COULD_NOT_TELL]


def error_matches(course: Course, pitfall_id: str, error_text: str) -> bool:
    """Whether the pitfall's known error messages match ``error_text``."""
    try:
        patterns = course.pitfall(pitfall_id).error_patterns
    except KeyError:
        return False
    return any(re.search(pattern, error_text) for pattern in patterns)


def explain(course: Course, pitfalls: list[str], seen: Seen, check: Check, failure: Failure,
            variants: dict[str, RunResult], catalogued: set[str]) -> tuple[list[str], list[str]]:
    """(confirmed, possible) pitfalls of ``check``, failed with ``failure``
    in ``seen``: confirmed, a variant's outputs on the check's calls are the
    submission's (one per mistake); possible, at most :data:`MAX_POSSIBLE`
    guesses. ``variants``: the runs on ``seen``'s inputs of those worth
    comparing; ``pitfalls``: the exercise's pitfall ids; ``catalogued``: those with a variant."""
    inputs, run, expected, passed, found = seen.inputs, seen.run, seen.expected, seen.passed, seen.found
    plan, calls = inputs.plan, inputs.plan.slices[check.id]
    decided = seen.decided   # found once: the loops below ask for it per variant

    def fails(pitfall_id: str, other: Check) -> bool:
        return inputs.variant_failure(other, pitfall_id, found[pitfall_id][1], expected) is not None

    for pitfall_id, variant in variants.items():
        if pitfall_id not in found:
            found[pitfall_id] = (evidence(decided, plan.slices, run, variant, expected, passed,
                                          lambda other, p=pitfall_id, v=variant: inputs.variant_failure(
                                              other, p, v, expected) is not None), variant)
    evidences = {p: e for p, (e, _) in found.items()}
    confirmed = [pitfall_id for pitfall_id, variant in variants.items()
                 if inputs.variant_failure(check, pitfall_id, variant, expected) is not None
                 and same_outputs(check, calls, run, variant, expected, evidences[pitfall_id])]
    confirmed, ambiguous = one_per_mistake(confirmed, evidences)
    if confirmed:  # a confirmed pitfall explains the failure; guesses beside it would be noise
        return confirmed, []
    candidates = [*ambiguous, *check.pitfalls]
    if failure.detail:  # it raised: pitfalls whose known error messages match say something too
        candidates += [p for p in pitfalls if error_matches(course, p, failure.detail)]
    loose = unexplained(decided, passed, evidences, fails)
    possible: list[str] = []
    for pitfall_id in dict.fromkeys(candidates):
        if len(possible) >= MAX_POSSIBLE:
            break
        variant = variants.get(pitfall_id)
        if variant is None:
            if pitfall_id not in catalogued and failure.detail and error_matches(course, pitfall_id, failure.detail):
                possible.append(pitfall_id)
            continue
        theirs = inputs.variant_failure(check, pitfall_id, variant, expected)
        if theirs is not None and same_signature(theirs.kind, failure.kind) \
                and guess_fits(pitfall_id, decided, loose, fails) and consistent(seen, pitfall_id, variant):
            possible.append(pitfall_id)
    return [], possible


def consistent(seen: Seen, pitfall_id: str, variant: RunResult) -> bool:
    """Whether the pitfall's variant passes every check that the
    submission passes and that declares the pitfall (the instructor's
    list of where the mistake shows): a check that does not declare it
    says nothing (a wrong-dim softmax right on the last dim is still a
    wrong dim)."""
    inputs = seen.inputs
    return all(inputs.variant_failure(other, pitfall_id, variant, seen.expected) is None
               for other in inputs.plan.checks
               if other.id in seen.passed and pitfall_id in other.pitfalls)


def reconfirmed(course: Course, pitfalls: list[str], seen: Seen, check: Check, failure: Failure,
                there: list[str], variants: dict[str, RunResult], catalogued: set[str]) -> tuple[list[str], list[str]]:
    """The variants confirmed on the fixed inputs (``there``) that are
    confirmed on ``seen``'s, the submission's own, too (``variants``: their
    runs there). Otherwise the guesses :func:`explain` finds among them, or
    those that could not run there (the budget of seeded runs is spent)."""
    confirmed, possible = explain(course, pitfalls, seen, check, failure, variants, catalogued)
    if confirmed:
        return confirmed, []
    return [], [*possible, *(p for p in there if p not in variants and p not in possible)][:MAX_POSSIBLE]
