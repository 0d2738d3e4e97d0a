"""Grade a class: collect submissions, judge every (student, exercise) not
yet in the gradebook, record each result as soon as it is known.

The pipeline reads as its data flows: ``collect`` -> ``pending`` ->
``judge`` (in the sandbox, ``jobs`` at a time) -> ``record``. A crash or a
kill of the grader loses nothing already recorded; rerunning resumes.
"""
from __future__ import annotations

import gc
import sys
import traceback
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from grader.course import REPO_ROOT, Course, Exercise
from grader.gradebook import Gradebook, Key, Record
from grader.judge import ExerciseResult, GraderError, Judge
from grader.sandbox import SandboxError
from grader.intake.submissions import UNREADABLE, ExerciseSubmission, Submission, collect

MISSING_HASH = "missing"
GRADER_ERROR = "grader_error"   # judging raised: not the student's doing, graded again on the next run


@dataclass
class Task:
    key: Key
    submission: Submission
    part: ExerciseSubmission


@dataclass
class ClassRun:
    submissions: list[Submission]
    keys: list[Key] = field(default_factory=list)       # every result of this run, graded or resumed
    graded: int = 0
    resumed: int = 0


class Executor(Protocol):
    """Runs the judging of tasks somewhere (threads here, a Dask cluster, ...)
    and hands each result back to the coordinating process, which records it."""

    def prepare(self, exercises: list[Exercise]) -> None:
        """Have the references of these exercises on their fixed inputs
        computed once, before any task's result is compared with them (each
        submission's own inputs are the judge's to run the reference on:
        grader/references.py)."""

    def grade(self, tasks: list[Task]) -> Iterator[tuple[Task, ExerciseResult]]:
        """Each task with its result, in the order they finish."""


class LocalExecutor:
    """``jobs`` threads of this process share one judge and its sandbox."""

    def __init__(self, judge: Judge, workdir: Path, jobs: int = 2):
        self.judge, self.workdir, self.jobs = judge, workdir, max(1, jobs)
        self._exercises: list[Exercise] = []

    def prepare(self, exercises: list[Exercise]) -> None:
        """The references are computed by :meth:`grade`, first in its queue:
        their runs overlap the first submissions' runs (whose judging waits
        for them only to compare)."""
        self._exercises = list(exercises)

    def grade(self, tasks: list[Task]) -> Iterator[tuple[Task, ExerciseResult]]:
        def reference(exercise: Exercise) -> None:
            self.judge.expected(exercise, self.workdir / "judge")

        def grade_one(task: Task) -> tuple[Task, ExerciseResult]:
            try:
                return task, self.judge.grade(task.part.exercise, task.part.folder, self.workdir / "judge")
            except (GraderError, SandboxError):
                raise   # the grader cannot grade anyone: the run stops with its own exit code
            except Exception as exc:  # noqa: BLE001 - one submission's run never stops the class
                return task, grader_error(task.part.exercise, exc)

        with ThreadPoolExecutor(max_workers=self.jobs) as pool:
            futures = [pool.submit(reference, exercise) for exercise in self._exercises if tasks]
            futures += [pool.submit(grade_one, task) for task in tasks]
            try:
                for future in as_completed(futures):
                    if (done := future.result()) is not None:   # a reference's is None
                        yield done
            except BaseException:
                # A reference that fails its own checks (or a broken sandbox)
                # stops the class: what has not started never will.
                pool.shutdown(wait=True, cancel_futures=True)
                raise


def grader_error(exercise: Exercise, exc: BaseException) -> ExerciseResult:
    """The result of a judging that raised: recorded so that the class goes
    on and the report shows it, and graded again on the next run (``pending``)."""
    traceback.print_exception(exc, file=sys.stderr)   # the instructor's; never in a student's result
    return ExerciseResult(exercise.id, GRADER_ERROR, f"the grader failed while judging this submission "
                          f"({type(exc).__name__}); it is graded again on the next run", [], exercise.points)


def _key(course: Course, submission: Submission, part: ExerciseSubmission) -> Key:
    return Key(submission.student, part.exercise.id, part.content_hash or MISSING_HASH, course.course.version)


def pending(course: Course, submissions: list[Submission], gradebook: Gradebook, run: ClassRun,
            force: bool = False) -> list[Task]:
    """Tasks whose result is not in the gradebook yet (every task when
    ``force``: a regrade; the gradebook keeps the result it replaces)."""
    tasks = []
    for submission in submissions:
        for part in submission.exercises.values():
            key = _key(course, submission, part)
            run.keys.append(key)
            recorded = gradebook.get(key)
            if recorded is not None and recorded.status != GRADER_ERROR and not force:
                run.resumed += 1
            else:
                tasks.append(Task(key, submission, part))
    return tasks


def unreadable_verdicts(part: ExerciseSubmission) -> list[dict]:
    """One failed check that carries the exercise's points: totals (ours and
    Gradescope's, which sums its tests) still count what was handed in."""
    return [{"check_id": "readable", "passed": False, "points": 0.0, "max_points": part.exercise.points,
             "message": {"en": "the submission can be read", "zh": "提交的文件可以读取"},
             "reason": part.problem, "pitfalls": [], "confirmed": []}]


def record_unreadable(gradebook: Gradebook, task: Task) -> None:
    """A part handed in but not readable: recorded here, never judged."""
    gradebook.record(task.key, points=0.0, max_points=task.part.exercise.points, status=UNREADABLE,
                     reason=task.part.problem, verdicts=unreadable_verdicts(task.part))


@contextmanager
def settled_heap() -> Iterator[None]:
    """While grading, the objects alive at its start (torch, the course, the
    references' results) are out of the garbage collector's way: a full
    collection walked every one of them while holding the GIL (7 of them
    cost 0.5 s of a 300-submission class here, both grading threads
    stalled). What is allocated inside is collected as before; on exit the
    collector takes the rest back (an in-process caller loses nothing)."""
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def grade_class(course: Course, exercises: list[Exercise], submissions_dir: Path, gradebook: Gradebook,
                judge: Judge | None, workdir: Path, *, jobs: int = 2,
                on_result: Callable[[Task, Record | None], None] | None = None,
                on_plan: Callable[[int], None] | None = None,
                on_collected: Callable[[list[Submission]], None] | None = None, root: Path = REPO_ROOT,
                executor: Executor | None = None, sources: dict[str, Path] | None = None,
                bare_modules: bool = False, students: set[str] | None = None, force: bool = False,
                collected: list[Submission] | None = None) -> ClassRun:
    """Grade every submission in ``submissions_dir`` into ``gradebook``.

    ``executor`` runs the judging (default: ``jobs`` threads here, with
    ``judge``); whatever runs it, only this process writes the gradebook.
    ``sources`` and ``bare_modules``: see :func:`grader.intake.submissions.collect`;
    ``students``: only these; ``force``: grade again what is already graded;
    ``on_collected``: given the collected class before any is judged (their
    folders live as long as ``workdir``); ``collected``: the class, collected
    already (by a caller that had something to do meanwhile)."""
    submissions = collected if collected is not None else collect(
        submissions_dir, course, exercises, workdir, root, sources=sources, bare_modules=bare_modules)
    if on_collected is not None:
        on_collected(submissions)
    if students:
        submissions = [s for s in submissions if s.student in students]
    run = ClassRun(submissions)
    tasks = pending(course, submissions, gradebook, run, force)
    if on_plan is not None:
        on_plan(len(tasks))
    for task in [t for t in tasks if t.part.status == UNREADABLE]:
        record_unreadable(gradebook, task)
        run.graded += 1
        if on_result is not None:
            on_result(task, gradebook.get(task.key))
    tasks = [t for t in tasks if t.part.status != UNREADABLE]
    if executor is None:
        assert judge is not None, "grade_class needs a judge or an executor"
        executor = LocalExecutor(judge, workdir, jobs)
    # References on the fixed inputs once, before any submission is compared with them.
    executor.prepare(list({task.part.exercise.id: task.part.exercise for task in tasks}.values()))
    with settled_heap():
        for task, result in executor.grade(tasks):
            gradebook.record(task.key, points=result.points, max_points=result.max_points, status=result.status,
                             reason=task.part.problem or result.reason,
                             verdicts=[v.to_dict() for v in result.verdicts], figures=result.figures)
            run.graded += 1
            if on_result is not None:
                on_result(task, gradebook.get(task.key))
    return run
