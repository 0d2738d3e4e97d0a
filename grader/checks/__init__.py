"""Hidden checks: probes from ``coursekit.probes`` run on hidden inputs,
compared between the submission and the reference.

A :class:`Check` says which probe calls to make (built from a seeded
generator, so every run and every machine sees the same hidden inputs), how
to compare the submission's result with the reference's, how many points it
is worth, and which pitfalls its failure points to. Check modules live
beside this file, one per exercise (``grader/checks/<slug>.py``), each with
a ``CHECKS`` list.

Messages are what students see: they say what was checked, never the
hidden inputs or the expected values.

In:  an exercise (course.yaml) and its probes (coursekit/probes).
Out: its ``CHECKS``: seeded probe calls on hidden inputs, how to compare the
     submission's results with the reference's, points and pitfalls.
"""
from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import torch

from coursekit.compare import compare_tensors
from grader.checks.inputs import check_seed
from grader.course import Exercise, Text
from grader.feedback import exception_name
from grader.sandbox import ProbeCall, RunResult

# compare(submission_value, reference_value) -> None when they agree,
# else a short reason that reveals no value ("wrong values", "wrong shape").
Compare = Callable[[object, object], str | None]
CallBuilder = Callable[[torch.Generator], list[ProbeCall]]
# run_rule(every call of the plan, the submission's run, the reference's run)
RunRule = Callable[[Sequence[ProbeCall], RunResult, RunResult], str | None]
# Exams: (generator, the student's variant sizes) -> calls. See grader/exams/checks.py.
VariantCallBuilder = Callable[[torch.Generator, Mapping[str, Any]], list[ProbeCall]]


class VariantLike(Protocol):
    """A student's exam variant, as far as checks care (grader.exams.variants.Variant)."""

    seed: int
    sizes: Mapping[str, Any]


@dataclass(frozen=True)
class Check:
    """One hidden check of an exercise."""

    id: str
    message: Text
    calls: CallBuilder
    compare: Compare
    weight: float = 1.0
    pitfalls: tuple[str, ...] = ()
    seed: int = 0
    # Checks that must pass for this one to count (in any order; what is
    # required is that behaviour, not its points): a static check ("no
    # built-in softmax") means nothing for code that does not work yet, an
    # untouched stub must score zero, and decoding, devices, dropout or
    # structure pay only when the exercise's core behaviour works.
    requires: tuple[str, ...] = ()
    # A rule on the submitted bytes, judged in the grader's process (never
    # in the student's): None when they pass, else a fixed reason. The
    # check fails when either its calls or this rule fail.
    source_rule: Callable[[bytes], str | None] | None = None
    # A rule on the whole run (every check's calls and results, the
    # submission's and the reference's), judged in the grader's process:
    # None when it passes, else a fixed reason. The check fails when its
    # calls, its source rule or this rule fail; its calls are made after
    # every other check's, so what they run can see what those did.
    run_rule: RunRule | None = None
    # Exams: builds the calls with the variant's sizes. Checks without one
    # still get the variant's seed in an exam: other random inputs per student.
    variant_calls: VariantCallBuilder | None = None
    # Each call sent to the child in a batch of its own, so that the CPU
    # time the sandbox measures from outside (CallResult.cpu_s) covers that
    # call alone: for checks of how much work a call does.
    measured: bool = False
    # Its calls run first in the child, right after the submission is
    # imported and before every other check's: a peak memory measured there
    # cannot hide in heap that earlier calls freed (grader/checks/memory.py).
    runs_first: bool = False
    # Keeps its own seed's inputs for every submission (grader/checks/inputs.py):
    # only for a check whose verdict is a threshold the reference reaches, never
    # a comparison of values (a copy task's training), and whose failure shows
    # no shape or exception the submission chose (grader/failures.py).
    fixed_inputs: bool = False
    # Its own seed's calls (cases picked by hand to cover what random draws may
    # miss) run too, after the submission's: a fixed part that no page
    # describes (grader/failures.py), beside a drawn part that keeps it honest.
    anchored: bool = False
    # What kind of input a call is, in the check's own words ("a (1, n) padding
    # mask that broadcasts"): public, shown beside a student's own exception
    # (grader/own_errors.py). None: the inputs' shapes in letters.
    inputs: Callable[[ProbeCall], Text | None] | None = None

    def build_calls(self, variant: VariantLike | None = None, seed: int | None = None) -> list[ProbeCall]:
        """The check's probe calls: on its own seed's inputs, on a
        submission's (``seed``: grader/checks/inputs.py) or on an exam
        variant's."""
        if variant is None:
            own = self.calls(torch.Generator().manual_seed(self.seed))
            if seed is None or self.fixed_inputs:
                return own
            drawn = self.calls(torch.Generator().manual_seed(check_seed(seed, self.id, self.seed)))
            return [*drawn, *own] if self.anchored else drawn
        # Mixed with the check's own seed, so two checks of one student differ.
        gen = torch.Generator().manual_seed((variant.seed * 1_000_003 + self.seed) % 2**62)
        if self.variant_calls is not None:
            return self.variant_calls(gen, variant.sizes)
        return self.calls(gen)


# A failure kind of its own: a measured figure (CPU time, memory) too near
# its threshold to decide on (within 2x of it). Such a check scores no
# points for now, says so, and goes to the instructor's review list
# (grader/report: "To review"); it never reads as a mistake, and no
# pitfall is offered for it.
COULD_NOT_TELL = "could not tell"


class CouldNotTell(str):
    """A run rule's answer, instead of a reason, when its figure was too
    near the threshold to decide on: the words say why, in both languages;
    ``detail`` holds the figures, for the instructor's review only."""

    detail: str

    def __new__(cls, words: str, detail: str = "") -> "CouldNotTell":
        answer = super().__new__(cls, words)
        answer.detail = detail
        return answer


def counting(checks: Sequence[Check], passed: set[str]) -> set[str]:
    """The checks in ``passed`` whose requirements count too, through every link."""
    counts = set(passed)
    while dropped := {c.id for c in checks if c.id in counts and any(r not in counts for r in c.requires)}:
        counts -= dropped
    return counts


def requiring(checks: list[Check], requires: Mapping[str, tuple[str, ...]]) -> list[Check]:
    """``checks`` with ``requires[check.id]`` added to each check's own
    requirements: a checks module declares in one place which checks pay
    only when its core behaviour works (structure, devices, dropout, errors
    raised: each can be got right by code that does not do the work)."""
    named = set(requires).union(*requires.values())
    if unknown := named - {c.id for c in checks}:
        raise ValueError(f"requirements name unknown checks: {sorted(unknown)}")
    return [replace(c, requires=(*c.requires, *requires.get(c.id, ()))) for c in checks]


def text(en: str, zh: str) -> Text:
    return Text(en=en, zh=zh)


_MISMATCH_REASONS = {
    "type": "returned the wrong type",
    "shape": "wrong shape",
    "dtype": "wrong dtype",
    "nan": "NaN where none was expected (or none where one was)",
    "values": "wrong values",
}


# Default tolerances by the reference's dtype: float64 results must agree
# to ~1e-10; float16 rounds differently in any two correct implementations.
TOLERANCES = {torch.float64: (1e-10, 1e-9), torch.float32: (1e-5, 1e-4), torch.float16: (3e-3, 1e-2),
              torch.bfloat16: (2e-2, 2e-2)}


def tensors_close(*path: str | int, atol: float | None = None, rtol: float | None = None,
                  check_dtype: bool = True) -> Compare:
    """Compare the tensors found at ``path`` in both results (``()`` for the
    result itself; a str picks a dict key, an int a list index). Tolerances
    default to the reference's dtype (:data:`TOLERANCES`). A reference
    value that is not a tensor (a pitfall variant's None) must match exactly."""

    def compare(submitted: object, expected: object) -> str | None:
        try:
            submitted_t, expected_t = pick(submitted, path), pick(expected, path)
        except (KeyError, IndexError, TypeError):
            return "the result is missing a part"
        if type(expected_t) is not torch.Tensor:
            same = type(submitted_t) is type(expected_t) and submitted_t == expected_t
            return None if same else "returned the wrong type"
        default_atol, default_rtol = TOLERANCES.get(expected_t.dtype, (1e-5, 1e-4))
        mismatch = compare_tensors(submitted_t, expected_t, atol=default_atol if atol is None else atol,
                                   rtol=default_rtol if rtol is None else rtol, check_dtype=check_dtype)
        return None if mismatch is None else _MISMATCH_REASONS[mismatch.kind]

    return compare


def tensor_dicts_close(*path: str | int, atol: float | None = None, rtol: float | None = None) -> Compare:
    """The dicts of tensors at ``path`` (e.g. gradients by parameter name)
    have the same keys and close tensors; a missing one (None) is a mismatch."""
    close = tensors_close(atol=atol, rtol=rtol)

    def compare(submitted: object, expected: object) -> str | None:
        try:
            submitted_d, expected_d = pick(submitted, path), pick(expected, path)
        except (KeyError, IndexError, TypeError):
            return "the result is missing a part"
        if not isinstance(submitted_d, dict) or not isinstance(expected_d, dict) \
                or sorted(submitted_d) != sorted(expected_d):
            return "wrong set of parameters"
        for name in expected_d:
            if (reason := close(submitted_d[name], expected_d[name])) is not None:
                return reason
        return None

    return compare


def all_of(*comparisons: Compare) -> Compare:
    """Every comparison must agree; the first reason is reported."""

    def compare(submitted: object, expected: object) -> str | None:
        for one in comparisons:
            if (reason := one(submitted, expected)) is not None:
                return reason
        return None

    return compare


def plain_equal(*path: str, reason: str = "wrong result") -> Compare:
    """Plain data (bools, ints, strings, lists, dicts without tensors) equal."""

    def compare(submitted: object, expected: object) -> str | None:
        try:
            same = pick(submitted, path) == pick(expected, path)
        except (KeyError, IndexError, TypeError):
            return "the result is missing a part"
        return None if same is True else reason

    return compare


def _error_type(value: object) -> str | None:
    return value.get("type") if isinstance(value, dict) else None


def error_type_equal(*path: str) -> Compare:
    """The same exception type (or none) at ``path``: messages may differ."""

    def compare(submitted: object, expected: object) -> str | None:
        for key in path:
            submitted = submitted.get(key) if isinstance(submitted, dict) else None
            expected = expected.get(key) if isinstance(expected, dict) else None
        mine, theirs = _error_type(submitted), _error_type(expected)
        if mine == theirs:
            return None
        # The submission's class name only when it is a builtin or torch one:
        # a class it defines could carry any text (grader/feedback.py).
        mine = None if mine is None else exception_name(str(mine))
        if theirs is None:
            return f"raised {mine}"
        return f"did not raise {theirs}" if mine is None else f"raised {mine} instead of {theirs}"

    return compare


def pick(value: object, path: Sequence[str | int]) -> object:
    """The part of a result at ``path`` (dict keys and list indexes)."""
    for key in path:
        if isinstance(value, dict):
            value = value[key]
        elif isinstance(value, (list, tuple)) and isinstance(key, int):
            value = value[key]
        else:
            raise TypeError(f"cannot index {type(value).__name__} with {key!r}")
    return value


@dataclass(frozen=True)
class Figure:
    """A picture for the student's feedback page, never scored: the 2-D
    tensor at ``path`` in the result of one probe call on a PUBLIC input (one
    the exercise README shows), drawn next to the reference's.

    The call is the figure's own (``call``), or the single call of the check
    named by ``check``, whose probe returns the picture as an extra part of
    its result (that check's compare must ignore the part): a figure of a
    model the check has already trained costs no second training."""

    name: str
    title: Text
    call: ProbeCall | None = None
    path: tuple[str | int, ...] = ()
    # An attention map's fixed token labels (queries, keys): drawn with them
    # by grader/report/attention_figures.py instead of as a plain heat map.
    axes: tuple[tuple[str, ...], tuple[str, ...]] | None = None
    check: str | None = None

    def __post_init__(self) -> None:
        if (self.call is None) == (self.check is None):
            raise ValueError(f"figure {self.name!r}: give either its own call or the check it draws from, not both")


def _checks_module(exercise: Exercise):
    try:
        return importlib.import_module(f"grader.checks.{exercise.slug}")
    except ModuleNotFoundError as exc:
        if exc.name == f"grader.checks.{exercise.slug}":
            return None
        raise


def checks_for(exercise: Exercise) -> list[Check]:
    """The hidden checks of an exercise (``grader/checks/<slug>.py``)."""
    module = _checks_module(exercise)
    return list(module.CHECKS) if module else []


def figures_for(exercise: Exercise) -> list[Figure]:
    """The exercise's feedback figures (``FIGURES`` in its checks module)."""
    module = _checks_module(exercise)
    return list(getattr(module, "FIGURES", [])) if module else []


@dataclass
class CheckPlan:
    """All probe calls of an exercise's checks, flattened for one sandbox run,
    and which slice of them belongs to which check."""

    checks: list[Check]
    calls: list[ProbeCall] = field(default_factory=list)
    slices: dict[str, slice] = field(default_factory=dict)
    # name -> (figure, call index): the named check's single call, or the
    # figure's own call, placed after every check's.
    figures: dict[str, tuple[Figure, int]] = field(default_factory=dict)

    @classmethod
    def build(cls, checks: list[Check], variant: VariantLike | None = None,
              figures: list[Figure] = (), seed: int | None = None) -> "CheckPlan":
        """``seed``: a submission's inputs (grader/checks/inputs.py); None: each check's own."""
        plan = cls(checks)
        # Stable: checks that run first (a peak measured on a fresh heap), then the
        # others, then those with a run rule (what they run can see what the others did).
        for check in sorted(checks, key=lambda c: (not c.runs_first, c.run_rule is not None)):
            start = len(plan.calls)
            plan.calls += check.build_calls(variant, seed)
            plan.slices[check.id] = slice(start, len(plan.calls))
        for figure in figures:
            if figure.check is None:
                plan.figures[figure.name] = (figure, len(plan.calls))
                plan.calls.append(figure.call)
                continue
            calls = plan.slices.get(figure.check)
            if calls is None:
                raise ValueError(f"figure {figure.name!r} draws from check {figure.check!r}, "
                                 "which is not among the exercise's checks")
            if calls.stop - calls.start != 1:
                raise ValueError(f"figure {figure.name!r} draws from check {figure.check!r}, which makes "
                                 f"{calls.stop - calls.start} probe calls instead of one")
            if seed is not None and not next(c for c in checks if c.id == figure.check).fixed_inputs:
                # A figure shows its call's result: drawn on a submission's hidden inputs, it would show them.
                raise ValueError(f"figure {figure.name!r} draws from check {figure.check!r}, whose inputs are "
                                 "hidden and drawn per submission (give the check fixed_inputs=True)")
            plan.figures[figure.name] = (figure, calls.start)
        return plan


# Last: they build on Check.
from grader.checks.deep import deep_close, facts_equal  # noqa: E402,F401
from grader.checks.forbidden import ATTENTION_LAYER, FUSED_ATTENTION, no_forbidden_calls, observed, observing  # noqa: E402,F401
