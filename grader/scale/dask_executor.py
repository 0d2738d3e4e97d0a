"""Sandboxed grading on a Dask cluster (``grader grade --executor dask``).

The unit of work is (submission, exercise); a Dask task grades a small
batch of them (see ``DaskExecutor``). Each carries the prepared module
folders' files (a few KiB each), so workers need no access to the coordinator's
disk, only to the course files (``course.yaml``, ``solutions/``, the hidden
checks) at the same path. Each worker process keeps one judge and one
sandbox fork-server, created lazily by its first task (``_worker_judge``).

The reference results and pitfall-variant results of an exercise on its
fixed inputs are computed once, by one task, and shipped: every grading task
of the exercise takes that task's future as an argument, so Dask moves the
result to each worker that needs it (and recomputes it if every holder
died). Each submission's own hidden inputs (grader/checks/inputs.py) are
drawn on the worker that grades it, from the grading secret the
coordinator ships with the task, and the reference runs there on them
(cached per input set by the worker's judge); the fixed results shipped
serve the fixed checks' and figures' calls.

Only the coordinating process writes the gradebook (``grade_class``): a
worker lost mid-task is retried by Dask, and the gradebook's key makes a
duplicate result impossible.
"""
from __future__ import annotations

import atexit
import shutil
import tempfile
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from grader.checks.inputs import HiddenInputs
from grader.course import Exercise, load_course
from grader.run.grading import Task
from grader.judge import ExerciseResult, Judge
from grader.sandbox import Limits, RunResult, Sandbox

_STATE: dict[tuple[str, Limits, HiddenInputs | None], tuple[Judge, Path]] = {}
_STATE_LOCK = threading.Lock()


def _worker_judge(course_path: str, limits: Limits, inputs: HiddenInputs | None = None) -> tuple[Judge, Path]:
    """This worker process's judge (one sandbox fork-server per process)."""
    with _STATE_LOCK:
        if (course_path, limits, inputs) not in _STATE:
            course = load_course(Path(course_path))
            sandbox = Sandbox(limits)
            workdir = Path(tempfile.mkdtemp(prefix="grader-worker-"))
            # Why atexit: a worker process has no `with` around its life; a
            # killed one takes its fork-server along (PDEATHSIG) anyway.
            atexit.register(shutil.rmtree, workdir, True)
            atexit.register(sandbox.close)
            _STATE[(course_path, limits, inputs)] = (Judge(course, sandbox, Path(course_path).parent, inputs), workdir)
        return _STATE[(course_path, limits, inputs)]


def reference_task(course_path: str, limits: Limits, exercise_id: str) -> tuple[RunResult, dict[str, RunResult]]:
    """The reference's and the pitfall variants' results of one exercise."""
    judge, workdir = _worker_judge(course_path, limits)
    exercise = judge.course.exercise(exercise_id)
    return judge.expected(exercise, workdir / "judge"), judge.variant_results(exercise, workdir / "judge")


def grade_batch(course_path: str, limits: Limits, exercise_id: str, batch: list[dict[str, bytes] | None],
                references: tuple[RunResult, dict[str, RunResult]],
                inputs: HiddenInputs | None = None) -> list[ExerciseResult]:
    """Grade a few submitted exercises, one after the other (each entry: its
    prepared folder's files; None: not submitted), each on its own hidden inputs."""
    judge, workdir = _worker_judge(course_path, limits, inputs)
    exercise = judge.course.exercise(exercise_id)
    judge.adopt_references(exercise, *references)
    return [_grade_files(judge, exercise, files, workdir) for files in batch]


def _grade_files(judge: Judge, exercise: Exercise, files: dict[str, bytes] | None, workdir: Path) -> ExerciseResult:
    if files is None:
        return judge.grade(exercise, None, workdir / "judge")
    folder = workdir / "tasks" / uuid.uuid4().hex
    folder.mkdir(parents=True)
    try:
        for name, data in files.items():
            (folder / name).write_bytes(data)
        return judge.grade(exercise, folder, workdir / "judge")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _folder_files(folder: Path | None) -> dict[str, bytes] | None:
    if folder is None:
        return None
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file() and not p.is_symlink()}


class DaskExecutor:
    """Runs ``grade_class``'s tasks on the cluster behind ``client``.

    ``retries``: how often a task that raised is run again (a task whose
    worker died is rescheduled by the scheduler on its own, up to its
    ``allowed-failures``).

    Each Dask task grades a batch of up to ``max_batch`` submissions of one
    exercise: per task the scheduler, the worker and this process exchange
    several messages, which on a small machine cost as much as a sandboxed
    run (1000 single-submission tasks on 2 cores: +20-28% over local
    threads). Batches stay small enough that every worker gets several, and
    a worker lost mid-batch costs only that batch's rerun: its results are
    recorded when the batch comes back, so none is lost or recorded twice."""

    def __init__(self, client, course_path: Path, limits: Limits, *, retries: int = 2, max_batch: int = 16,
                 inputs: HiddenInputs | None = None):
        self.client = client
        self.inputs = inputs
        self.course_path = str(Path(course_path).resolve())
        self.limits = limits
        self.retries = retries
        self.max_batch = max(1, max_batch)
        self._run = uuid.uuid4().hex[:8]        # task keys of two runs on one cluster never meet
        self._references: dict[str, object] = {}

    def prepare(self, exercises: list[Exercise]) -> None:
        for exercise in exercises:
            self._references[exercise.id] = self.client.submit(
                reference_task, self.course_path, self.limits, exercise.id,
                key=f"reference-{exercise.id}-{self._run}", retries=self.retries)
        for future in self._references.values():
            future.result()     # a reference that fails its checks stops the run here (GraderError)

    def grade(self, tasks: list[Task]) -> Iterator[tuple[Task, ExerciseResult]]:
        from distributed import as_completed

        futures = {}
        for batch in self._batches(tasks):
            first = batch[0].key
            future = self.client.submit(
                grade_batch, self.course_path, self.limits, first.exercise,
                [_folder_files(task.part.folder) for task in batch], self._references[first.exercise], self.inputs,
                retries=self.retries, key=f"grade-{self._run}-{first.exercise}-{first.student}-{len(batch)}")
            futures[future] = batch
        for future in as_completed(futures):
            yield from zip(futures[future], future.result(), strict=True)
            future.release()

    def _batches(self, tasks: list[Task]) -> Iterator[list[Task]]:
        """The tasks of each exercise in batches, about four per worker."""
        workers = max(1, len(self.client.scheduler_info().get("workers", {})))
        by_exercise: dict[str, list[Task]] = {}
        for task in tasks:
            by_exercise.setdefault(task.key.exercise, []).append(task)
        for group in by_exercise.values():
            size = min(self.max_batch, max(1, -(-len(group) // (4 * workers))))
            for start in range(0, len(group), size):
                yield group[start:start + size]


@contextmanager
def dask_executor(course_path: Path, limits: Limits, scheduler: str | None = None,
                  *, workers: int = 2, inputs: HiddenInputs | None = None) -> Iterator[DaskExecutor]:
    """A :class:`DaskExecutor` on the scheduler at ``scheduler``, or on a
    ``LocalCluster`` of ``workers`` processes (one thread each) on loopback.
    ``inputs``: the grading secret's hidden inputs (None: fixed inputs)."""
    from distributed import Client, LocalCluster

    if scheduler:
        with Client(scheduler) as client:
            yield DaskExecutor(client, course_path, limits, inputs=inputs)
        return
    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=None) as cluster, Client(cluster) as client:
        yield DaskExecutor(client, course_path, limits, inputs=inputs)
