"""Which pitfall variant, if any, made the submission's mistake.

A variant is the reference with one known mistake. It is *confirmed* on a
failed check only when its outputs there are the submission's own: the same
errors, and numbers equal to float noise (:func:`grader.failures.resemblance`),
not merely "both fail this check" or "both within the check's tolerance".
Booleans and counts (``earlier_unchanged: False``) are shared by every
mistake that breaks the same property, so they confirm nothing by
themselves: there the variant must also reproduce the submission's numbers
or errors on some other check (``agreeing``), or fail exactly the
submission's checks and each alike (``identical``), and fail no check the
submission passes (``consistent``). One mistake, one name: when two
variants qualify, the one that agrees on more checks stays; a tie confirms
neither.

A *possible* pitfall is a guess, said as one (grader/judge.py): declared by
the check, failing it with the same signature (no measure of closeness
picks the right family better than the instructor's declared order: a
wrong scale lies nearer a wrong-dim softmax than another wrong scale).
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from grader.checks import Check
from grader.failures import fails_alike, resemblance
from grader.sandbox import RunResult

# Numbers this close (relative to the variant's own error) are the same mistake.
CONFIRM_RATIO = 0.1


@dataclass(frozen=True)
class Evidence:
    """What the whole run says about one variant."""

    consistent: bool     # it fails no check that the submission passes
    agreeing: int        # failed checks where it has the submission's very numbers or errors
    identical: bool      # it fails exactly the submission's checks, each alike

    @property
    def confirms(self) -> bool:
        return self.consistent and (self.agreeing > 0 or self.identical)


def same_outputs(check: Check, calls: slice, submission: RunResult, variant: RunResult, expected: RunResult,
                 found: Evidence) -> bool:
    """The variant's results on the check's calls are the submission's:
    alike by the check's compare and, where there are numbers, equal to well
    within the variant's own distance from the reference. Where there are
    none (booleans, counts), the run's other checks must vouch for the
    variant (``found.confirms``)."""
    if not fails_alike(check, calls, submission, variant):
        return False
    ratio = resemblance(calls, submission, variant, expected)
    return found.confirms if ratio is None else ratio <= CONFIRM_RATIO


def _raised(calls: slice, run: RunResult) -> bool:
    return any(index < len(run.calls) and not run.calls[index].ok for index in range(calls.start, calls.stop))


def evidence(checks: Iterable[Check], slices: dict[str, slice], submission: RunResult, variant: RunResult,
             expected: RunResult, passed: set[str], variant_fails: Callable[[Check], bool]) -> Evidence:
    """One variant's :class:`Evidence` over every check of the exercise
    (``variant_fails(check)``: whether the variant fails it, cached by the judge)."""
    consistent, agreeing, identical = True, 0, True
    for check in checks:
        if not variant_fails(check):
            identical = identical and check.id in passed
            continue
        if check.id in passed:
            consistent = False
            continue
        calls = slices[check.id]
        ratio = resemblance(calls, submission, variant, expected)
        alike = fails_alike(check, calls, submission, variant)
        identical = identical and alike and (ratio is None or ratio <= CONFIRM_RATIO)
        if alike and (ratio <= CONFIRM_RATIO if ratio is not None else _raised(calls, submission)):
            agreeing += 1
    return Evidence(consistent, agreeing, identical)


def unexplained(checks: Iterable[Check], passed: set[str], found: dict[str, Evidence],
                variant_fails: Callable[[str, Check], bool]) -> set[str]:
    """The checks the submission fails that no confirmed variant fails
    either: a mistake no catalogued one accounts for shows there."""
    confirmed = [p for p, seen in found.items() if seen.confirms]
    return {check.id for check in checks if check.id not in passed
            and not any(variant_fails(p, check) for p in confirmed)}


def guess_fits(pitfall_id: str, checks: Iterable[Check], unexplained_ids: set[str],
               variant_fails: Callable[[str, Check], bool]) -> bool:
    """A guess is offered only if its variant also fails the checks whose
    failure nothing else explains: a softmax that ignores ``dim`` fails
    small random inputs too, which an overflowing softmax passes, so its
    failure on large scores is no hint of overflow. One miss is forgiven
    among many (a mistake of the same kind but larger can also fail a
    training check that the variant's passes)."""
    missed = sum(not variant_fails(pitfall_id, check) for check in checks if check.id in unexplained_ids)
    return missed == 0 or (missed == 1 and 2 * missed < len(unexplained_ids))


def one_per_mistake(confirmed: list[str], found: dict[str, Evidence]) -> tuple[list[str], list[str]]:
    """(confirmed, ambiguous): at most one variant confirmed on a check, the
    one that agrees with the submission on the most checks; variants tied
    for that are only guesses."""
    if len(confirmed) <= 1:
        return confirmed, []
    best = max(found[p].agreeing for p in confirmed)
    top = [p for p in confirmed if found[p].agreeing == best]
    return (top, []) if len(top) == 1 else ([], top)


def explain_by_confirmed(verdicts: list) -> None:
    """A check that one of the exercise's confirmed pitfalls might explain
    keeps only that one as possible: one mistake, named once, not a list."""
    confirmed = {p for v in verdicts for p in v.confirmed}
    for verdict in verdicts:
        if explained := [p for p in verdict.possible if p in confirmed]:
            verdict.possible = explained
            verdict.pitfalls = [*verdict.confirmed, *explained]
