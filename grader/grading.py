"""Grade a class: collect submissions, judge every (student, exercise) not
yet in the gradebook, record each result as soon as it is known.

The pipeline reads as its data flows: ``collect`` -> ``pending`` ->
``judge`` (in the sandbox, ``jobs`` at a time) -> ``record``. A crash or a
kill of the grader loses nothing already recorded; rerunning resumes.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from grader.course import REPO_ROOT, Course, Exercise
from grader.gradebook import Gradebook, Key, Record
from grader.judge import ExerciseResult, Judge
from grader.submissions import ExerciseSubmission, Submission, collect

MISSING_HASH = "missing"


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
        """Compute the references of these exercises once, before any task."""

    def grade(self, tasks: list[Task]) -> Iterator[tuple[Task, ExerciseResult]]:
        """Each task with its result, in the order they finish."""


class LocalExecutor:
    """``jobs`` threads of this process share one judge and its sandbox."""

    def __init__(self, judge: Judge, workdir: Path, jobs: int = 2):
        self.judge, self.workdir, self.jobs = judge, workdir, max(1, jobs)

    def prepare(self, exercises: list[Exercise]) -> None:
        for exercise in exercises:
            self.judge.expected(exercise, self.workdir / "judge")

    def grade(self, tasks: list[Task]) -> Iterator[tuple[Task, ExerciseResult]]:
        def grade_one(task: Task) -> tuple[Task, ExerciseResult]:
            return task, self.judge.grade(task.part.exercise, task.part.folder, self.workdir / "judge")

        with ThreadPoolExecutor(max_workers=self.jobs) as pool:
            for future in as_completed([pool.submit(grade_one, task) for task in tasks]):
                yield future.result()


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
            if gradebook.has(key) and not force:
                run.resumed += 1
            else:
                tasks.append(Task(key, submission, part))
    return tasks


def grade_class(course: Course, exercises: list[Exercise], submissions_dir: Path, gradebook: Gradebook,
                judge: Judge | None, workdir: Path, *, jobs: int = 2,
                on_result: Callable[[Task, Record | None], None] | None = None,
                on_plan: Callable[[int], None] | None = None, root: Path = REPO_ROOT,
                executor: Executor | None = None, students: set[str] | None = None,
                force: bool = False) -> ClassRun:
    """Grade every submission in ``submissions_dir`` into ``gradebook``.

    ``executor`` runs the judging (default: ``jobs`` threads here, with
    ``judge``); whatever runs it, only this process writes the gradebook.
    ``students``: only these; ``force``: grade again what is already graded."""
    submissions = collect(submissions_dir, course, exercises, workdir, root)
    if students:
        submissions = [s for s in submissions if s.student in students]
    run = ClassRun(submissions)
    tasks = pending(course, submissions, gradebook, run, force)
    if on_plan is not None:
        on_plan(len(tasks))
    if executor is None:
        assert judge is not None, "grade_class needs a judge or an executor"
        executor = LocalExecutor(judge, workdir, jobs)
    # References first, once, before the workers race for them.
    executor.prepare(list({task.part.exercise.id: task.part.exercise for task in tasks}.values()))
    for task, result in executor.grade(tasks):
        gradebook.record(task.key, points=result.points, max_points=result.max_points, status=result.status,
                         reason=task.part.problem or result.reason, verdicts=[v.to_dict() for v in result.verdicts],
                         figures=result.figures)
        run.graded += 1
        if on_result is not None:
            on_result(task, gradebook.get(task.key))
    return run
