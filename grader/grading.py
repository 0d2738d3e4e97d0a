"""Grade a class: collect submissions, judge every (student, exercise) not
yet in the gradebook, record each result as soon as it is known.

The pipeline reads as its data flows: ``collect`` -> ``pending`` ->
``judge`` (in the sandbox, ``jobs`` at a time) -> ``record``. A crash or a
kill of the grader loses nothing already recorded; rerunning resumes.
"""
from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

from grader.course import REPO_ROOT, Course, Exercise
from grader.gradebook import Gradebook, Key, Record
from grader.judge import Judge
from grader.submissions import ExerciseSubmission, Submission, collect

MISSING_HASH = "missing"
# Reasons of a run killed from outside the submission: its sandbox server
# gone, or SIGKILL (kill -9 by an admin, the OOM killer). Such a result is
# graded once more before it is recorded, so a worker killed by accident
# does not leave a wrong grade that every rerun would keep (same key); a
# submission killed again keeps that result.
KILLED_FROM_OUTSIDE = ("(SIGKILL)", "ended before finishing", "the sandbox failed")


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


def _key(course: Course, submission: Submission, part: ExerciseSubmission) -> Key:
    return Key(submission.student, part.exercise.id, part.content_hash or MISSING_HASH, course.course.version)


def pending(course: Course, submissions: list[Submission], gradebook: Gradebook, run: ClassRun) -> list[Task]:
    """Tasks whose result is not in the gradebook yet."""
    tasks = []
    for submission in submissions:
        for part in submission.exercises.values():
            key = _key(course, submission, part)
            run.keys.append(key)
            if gradebook.has(key):
                run.resumed += 1
            else:
                tasks.append(Task(key, submission, part))
    return tasks


def grade_class(course: Course, exercises: list[Exercise], submissions_dir: Path, gradebook: Gradebook,
                judge: Judge, workdir: Path, *, jobs: int = 2,
                on_result: Callable[[Task, Record | None], None] | None = None,
                on_plan: Callable[[int], None] | None = None, root: Path = REPO_ROOT) -> ClassRun:
    """Grade every submission in ``submissions_dir`` into ``gradebook``."""
    submissions = collect(submissions_dir, course, exercises, workdir, root)
    run = ClassRun(submissions)
    tasks = pending(course, submissions, gradebook, run)
    if on_plan is not None:
        on_plan(len(tasks))
    # References first, once, before the workers race for them.
    for exercise in {task.part.exercise.id: task.part.exercise for task in tasks}.values():
        judge.expected(exercise, workdir / "judge")
    write_lock = threading.Lock()

    def grade_one(task: Task) -> Task:
        result = judge.grade(task.part.exercise, task.part.folder, workdir / "judge")
        if result.status == "crashed" and any(mark in result.reason for mark in KILLED_FROM_OUTSIDE):
            result = judge.grade(task.part.exercise, task.part.folder, workdir / "judge")
        reason = task.part.problem or result.reason
        with write_lock:
            gradebook.record(task.key, points=result.points, max_points=result.max_points, status=result.status,
                             reason=reason, verdicts=[v.to_dict() for v in result.verdicts])
        return task

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        for future in as_completed([pool.submit(grade_one, task) for task in tasks]):
            task = future.result()
            run.graded += 1
            if on_result is not None:
                on_result(task, gradebook.get(task.key))
    return run
