"""Judge a submission's exercise: run the hidden checks' probe calls on the
submission and on the reference (each in its own sandboxed child), compare
the plain data that comes back, and turn each check into a :class:`Verdict`.

Verdicts are computed here, in the trusted process, from decoded results
only: nothing the child prints, writes or exits with can change them.

When a check fails, the same calls' results of every pitfall variant of the
exercise (the reference with one known mistake, run once and cached) are
compared with the submission's: a variant that fails in exactly the same way
*confirms* its pitfall, and that hint is shown first.
"""
from __future__ import annotations

import re
import threading

import torch
from dataclasses import asdict, dataclass, field
from pathlib import Path

from coursekit.loader import missing_name
from grader.checks import Check, CheckPlan, checks_for, figures_for, pick
from grader.course import REPO_ROOT, Course, Exercise, Text
from grader.pitfalls import load_variants
from grader.sandbox import CallResult, RunResult, Sandbox
from grader.submissions import assemble


NOT_IMPLEMENTED = "not implemented yet"


class GraderError(Exception):
    """The grader cannot do its job (e.g. the reference fails its own checks)."""


@dataclass
class Verdict:
    check_id: str
    passed: bool
    points: float
    max_points: float
    message: Text          # what was checked (no hidden value)
    reason: str = ""       # why it failed (no hidden value)
    pitfalls: list[str] = field(default_factory=list)   # hints to show, confirmed ones first
    confirmed: list[str] = field(default_factory=list)  # variants that fail exactly like this

    def to_dict(self) -> dict:
        data = asdict(self)
        data["message"] = self.message.model_dump()
        return data


@dataclass
class ExerciseResult:
    exercise_id: str
    status: str            # "graded", "not_submitted", or the sandbox's status when the run broke
    reason: str
    verdicts: list[Verdict]
    max_points: float
    # Feedback figures: name -> {"title", "student", "expected"} (2-D lists).
    figures: dict = field(default_factory=dict)

    @property
    def points(self) -> float:
        return round(sum(v.points for v in self.verdicts), 6)

    @property
    def pitfalls(self) -> list[str]:
        return list(dict.fromkeys(p for v in self.verdicts if not v.passed for p in v.pitfalls))


def _check_points(exercise: Exercise, checks: list[Check]) -> dict[str, float]:
    total = sum(c.weight for c in checks)
    return {c.id: exercise.points * c.weight / total for c in checks}


def _call_reason(call: CallResult | None, run: RunResult) -> str | None:
    """Why a submission's call has no usable value, or None if it has one."""
    if call is None:
        return run.reason or f"did not finish ({run.status})"
    if not call.ok:
        if call.error_type == "NotImplementedError":
            return NOT_IMPLEMENTED
        if call.error_type == "AttributeError" and (missing := missing_name(call.error or "")):
            module, name = missing  # the probe asked the module for a public name: nothing hidden
            return f"{module}.py defines no {name!r} at its top level (check the name's spelling)"
        # The error type only: the message could quote hidden inputs.
        return f"raised {call.error_type}" if call.error_type else "failed"
    return None


def _first_failure(check: Check, calls: slice, run: RunResult, expected: RunResult) -> tuple[str, str] | None:
    """None if ``run`` agrees with ``expected`` on every call of ``check``,
    else (the first reason it does not, the error's text if a call raised).
    The error text stays in the grader: it may quote hidden inputs."""
    for index in range(calls.start, calls.stop):
        call = run.calls[index] if index < len(run.calls) else None
        if (reason := _call_reason(call, run)) is not None:
            return reason, (f"{call.error_type}: {call.error}" if call is not None and not call.ok else "")
        if (reason := _compare(check, call.value, expected.calls[index].value)) is not None:
            return reason, ""
    return None


_PATH_RE = re.compile(r"(/[^\s'\":]+)+")


def _without_paths(text: str | None) -> str:
    """An error message with file paths blanked (the variant and the
    submission live in different folders)."""
    return _PATH_RE.sub("<path>", text or "")


def _check_failure(check: Check, calls: slice, run: RunResult, expected: RunResult,
                   source: bytes) -> tuple[str, str] | None:
    """:func:`_first_failure`, then the check's rule on the submitted bytes."""
    failure = _first_failure(check, calls, run, expected)
    if failure is None and check.source_rule is not None and (reason := check.source_rule(source)) is not None:
        return reason, ""
    return failure


def _compare(check: Check, submitted: object, expected: object) -> str | None:
    """``check.compare``, which must never take the grader down: a result of
    a shape no compare foresaw is a failed check, not a crash."""
    try:
        return check.compare(submitted, expected)
    except Exception:  # noqa: BLE001 - plain data of any form comes back from the sandbox
        return "returned a result of an unexpected form"


def _agrees(check: Check, calls: slice, run: RunResult, expected: RunResult) -> str | None:
    failure = _first_failure(check, calls, run, expected)
    return None if failure is None else failure[0]


def _fails_alike(check: Check, calls: slice, submission: RunResult, variant: RunResult) -> bool:
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


# At least one of these must hold, or a submission could read the references
# and hidden checks: grading without them would be grading on trust.
FILESYSTEM_LAYERS = ("landlock", "filesystem_view")


def require_isolation(sandbox: Sandbox) -> None:
    """Raise :class:`GraderError` unless the sandbox hides the instructor's files."""
    layers = sandbox.layers()
    if not any(layers.get(name) == "active" for name in FILESYSTEM_LAYERS):
        missing = "; ".join(f"{name}: {layers.get(name, 'unknown')}" for name in FILESYSTEM_LAYERS)
        raise GraderError(f"the sandbox cannot hide solutions/ and the hidden checks here ({missing}); "
                          "run `grader doctor` for details")


# Reasons of a run killed from outside the submission (see Judge.grade).
KILLED_FROM_OUTSIDE = ("(SIGKILL)", "ended before finishing", "the sandbox failed")
MAX_FIGURE_CELLS = 64 * 64


def _matrix(call: CallResult | None, path: tuple) -> list | None:
    """The small 2-D tensor a figure shows, as plain lists, or None."""
    if call is None or not call.ok:
        return None
    try:
        value = pick(call.value, path)
    except (KeyError, IndexError, TypeError):
        return None
    if type(value) is not torch.Tensor or value.dim() != 2 or value.numel() > MAX_FIGURE_CELLS:
        return None
    return value.detach().to(torch.float64).tolist()


def _figures(plan: CheckPlan, run: RunResult, expected: RunResult) -> dict:
    """Figures of the submission's run next to the reference's: public inputs only."""
    figures = {}
    for name, (figure, index) in plan.figures.items():
        mine = _matrix(run.calls[index] if index < len(run.calls) else None, figure.path)
        theirs = _matrix(expected.calls[index], figure.path)
        if theirs is not None:
            figures[name] = {"title": figure.title.model_dump(), "student": mine, "expected": theirs}
    return figures


class Judge:
    """Grades exercises of one course with one sandbox; reference and variant
    results are computed once per exercise and shared between threads."""

    def __init__(self, course: Course, sandbox: Sandbox, root: Path = REPO_ROOT):
        require_isolation(sandbox)
        self.course = course
        self.sandbox = sandbox
        self.root = root
        self._cache: dict[tuple[str, str], object] = {}
        self._key_locks: dict[tuple[str, str], threading.Lock] = {}
        self._lock = threading.Lock()

    def _once(self, key: tuple[str, str], compute):
        """``compute()`` once per key, even when several threads ask at once."""
        with self._lock:
            key_lock = self._key_locks.setdefault(key, threading.Lock())
        with key_lock:
            if key not in self._cache:
                self._cache[key] = compute()
            return self._cache[key]

    def _error_matches(self, pitfall_id: str, error_text: str) -> bool:
        try:
            patterns = self.course.pitfall(pitfall_id).error_patterns
        except KeyError:
            return False
        return any(re.search(pattern, error_text) for pattern in patterns)

    def plan(self, exercise: Exercise) -> CheckPlan:
        """The exercise's checks and their hidden probe calls (built once)."""
        return self._once(("plan", exercise.id),
                          lambda: CheckPlan.build(checks_for(exercise), figures=figures_for(exercise)))

    def expected(self, exercise: Exercise, workdir: Path) -> RunResult:
        """The reference's results on the hidden calls (computed once)."""
        return self._once(("expected", exercise.id), lambda: self._run_reference(exercise, workdir))

    def _run_reference(self, exercise: Exercise, workdir: Path) -> RunResult:
        plan = self.plan(exercise)
        reference = (self.root / "solutions" / exercise.folder / exercise.module).read_bytes()
        folder = assemble(exercise, reference, workdir / f"reference-{exercise.id}", self.course, self.root)
        run = self.sandbox.run(folder, exercise.module_name, plan.calls)
        broken = [i for i, call in enumerate(run.calls) if not call.ok]
        if run.status != "ok" or len(run.calls) != len(plan.calls) or broken:
            detail = run.calls[broken[0]].error if broken else run.reason
            raise GraderError(f"the reference of {exercise.folder} fails its own hidden checks: {run.status}, {detail}")
        return run

    def adopt_references(self, exercise: Exercise, expected: RunResult, variants: dict[str, RunResult]) -> None:
        """Use reference and variant results computed elsewhere (a Dask
        worker gets them shipped instead of running them again)."""
        with self._lock:
            self._cache.setdefault(("expected", exercise.id), expected)
            self._cache.setdefault(("variants", exercise.id), variants)

    def variant_results(self, exercise: Exercise, workdir: Path) -> dict[str, RunResult]:
        """Each pitfall variant's results on the hidden calls (computed once)."""
        return self._once(("variants", exercise.id), lambda: self._run_variants(exercise, workdir))

    def _run_variants(self, exercise: Exercise, workdir: Path) -> dict[str, RunResult]:
        plan = self.plan(exercise)
        results = {}
        for pitfall_id, variant in load_variants(exercise, self.root).items():
            folder = assemble(exercise, variant.source.encode(), workdir / f"variant-{exercise.id}-{pitfall_id}",
                              self.course, self.root)
            results[pitfall_id] = self.sandbox.run(folder, exercise.module_name, plan.calls)
        return results

    def grade(self, exercise: Exercise, folder: Path | None, workdir: Path) -> ExerciseResult:
        """Grade the exercise module in ``folder`` (None: not submitted).

        A run killed from outside the submission (its sandbox server gone, or
        SIGKILL: an admin's kill -9, the OOM killer) is graded once more:
        results are keyed by content, so an accidental kill would otherwise
        leave a wrong grade that every rerun keeps. A submission killed again
        keeps that result."""
        result = self._grade_once(exercise, folder, workdir)
        if result.status == "crashed" and any(mark in result.reason for mark in KILLED_FROM_OUTSIDE):
            result = self._grade_once(exercise, folder, workdir)
        return result

    def _grade_once(self, exercise: Exercise, folder: Path | None, workdir: Path) -> ExerciseResult:
        plan = self.plan(exercise)
        if not plan.checks:
            raise GraderError(f"{exercise.folder} has no hidden checks (grader/checks/{exercise.slug}.py)")
        points = _check_points(exercise, plan.checks)
        if folder is None or not (folder / exercise.module).is_file():
            verdicts = [Verdict(c.id, False, 0.0, points[c.id], c.message, "not submitted") for c in plan.checks]
            return ExerciseResult(exercise.id, "not_submitted", f"{exercise.module} was not submitted",
                                  verdicts, exercise.points)
        expected = self.expected(exercise, workdir)
        # Read before the run: source rules judge the bytes as collected.
        source = (folder / exercise.module).read_bytes()
        run = self.sandbox.run(folder, exercise.module_name, plan.calls)
        verdicts: list[Verdict] = []
        failures = {check.id: _check_failure(check, plan.slices[check.id], run, expected, source)
                    for check in plan.checks}
        # A check counts when it passes and so does every check it requires
        # (in any order: the requirement is that behaviour, not its points).
        passed = {check_id for check_id, failure in failures.items() if failure is None}
        for check in plan.checks:
            calls = plan.slices[check.id]
            failure = failures[check.id]
            reason, error_text = failure if failure is not None else (None, "")
            unmet = [r for r in check.requires if r not in passed]
            if reason is None and unmet:
                verdicts.append(Verdict(check.id, False, 0.0, points[check.id], check.message,
                                        f"counts once {', '.join(unmet)} passes"))
                continue
            if reason is None:
                verdicts.append(Verdict(check.id, True, points[check.id], points[check.id], check.message))
                continue
            ran = calls.stop <= len(run.calls)
            if reason == NOT_IMPLEMENTED or not ran:  # a stub, or the run broke first: no mistake to explain
                verdicts.append(Verdict(check.id, False, 0.0, points[check.id], check.message, reason))
                continue
            confirmed = [
                pitfall_id for pitfall_id, variant in self.variant_results(exercise, workdir).items()
                if _agrees(check, calls, variant, expected) is not None
                and _fails_alike(check, calls, run, variant)
            ]
            if error_text:
                # It raised: the declared pitfalls are about wrong values; only
                # those whose known error messages match say something here.
                candidates = [*check.pitfalls, *(p.id for p in exercise.pitfalls)]
                suspects = [p for p in candidates if self._error_matches(p, error_text)]
            else:
                suspects = list(check.pitfalls)
            # A confirmed pitfall explains the failure; the others would be noise.
            hints = list(dict.fromkeys(confirmed or suspects))
            verdicts.append(Verdict(check.id, False, 0.0, points[check.id], check.message, reason, hints, confirmed))
        figures = _figures(plan, run, expected)
        if run.status == "ok":
            return ExerciseResult(exercise.id, "graded", "", verdicts, exercise.points, figures)
        return ExerciseResult(exercise.id, run.status, run.reason, verdicts, exercise.points, figures)
