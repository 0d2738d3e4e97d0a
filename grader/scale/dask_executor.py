"""Sandboxed grading on a Dask cluster (``grader grade --executor dask``).

The unit of work is (submission, exercise); a Dask task grades a small
batch of them (see ``DaskExecutor``). Each carries the prepared module
folders' files (a few KiB each), so workers need no access to the coordinator's
disk, only to the course files (``course.yaml``, ``solutions/``, the hidden
checks) at the same path. What runs on a worker is in grader/scale/worker.py.

A run starts by vetting every connected worker (one pinned task each, all
at once): each starts its sandbox fork-server (so no worker starts its own
halfway through the class) and reports its layers; a worker whose sandbox
isolates less than this machine's stops the run before anything is graded.

Each worker's judge runs the references it needs itself, once per input
set, as local grading's judge does: the reference on an exercise's fixed
inputs and on each submission's own hidden inputs (grader/checks/inputs.py,
drawn on the worker from the grading secret the task carries), a pitfall
variant only when a check fails with a mistake to explain. So a grading task
depends on no other task: the scheduler hands batches out as workers free
up. (Computed once and shipped, the fixed results made every worker wait for
them, and every grading task was placed on the worker that held them: the
others got work only by stealing it.)

Only the coordinating process writes the gradebook (``grade_class``): a
worker lost mid-task has its batch run again elsewhere by Dask, and the
gradebook's key makes a duplicate result impossible. A lost scheduler, or
workers that keep dying, stop the run with :class:`ClusterLost`: what was
recorded stays, and the same command resumes.
"""
from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

from grader.checks.inputs import HiddenInputs
from grader.course import Exercise
from grader.judge import ExerciseResult, GraderError
from grader.run.grading import Task
from grader.sandbox import Limits, Sandbox, SandboxError
from grader.sandbox.layers import ALL_LAYERS, active_layers
from grader.scale.worker import RunSpec, WeakerSandbox, grade_batch, vet

# A run waits this long for a first worker to join an empty cluster.
WAIT_FOR_WORKERS_S = 60.0


class ClusterLost(GraderError):
    """The scheduler, or every worker able to grade, is gone: rerun to resume."""


class SchedulerUnreachable(ClusterLost):
    """``--scheduler`` names no scheduler that answers (before any grading)."""


def instructor_layers(limits: Limits) -> frozenset[str]:
    """The layers a sandbox on this machine has: what every worker must have.
    A machine that cannot run the sandbox (not Linux) asks for every layer."""
    try:
        with Sandbox(limits) as sandbox:
            return active_layers(sandbox.layers())
    except SandboxError:
        return ALL_LAYERS


def vet_workers(client, spec: RunSpec, workers: list[str]) -> dict[str, dict]:
    """Each worker's :func:`grader.scale.worker.vet` report, run on that
    worker (all at once). A worker that leaves meanwhile is left out: its
    pinned task would otherwise wait for it forever."""
    from distributed import wait

    futures = {address: client.submit(vet, spec, workers=[address], allow_other_workers=False, pure=False,
                                      key=f"vet-{spec.run_id}-{address}") for address in workers}
    while True:
        try:
            wait(list(futures.values()), timeout=2)
            break
        except TimeoutError:
            present = set(client.scheduler_info().get("workers", {}))
            for address in [a for a in futures if a not in present]:
                futures.pop(address).cancel()
    return {address: future.result() for address, future in futures.items()}


def _folder_files(folder: Path | None) -> dict[str, bytes] | None:
    if folder is None:
        return None
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file() and not p.is_symlink()}


class DaskExecutor:
    """Runs ``grade_class``'s tasks on the cluster behind ``client``.

    Each Dask task grades a batch of submissions of one exercise: per task
    the scheduler, the worker and this process exchange several messages,
    which on a small machine cost as much as a sandboxed run (1000
    single-submission tasks on 2 cores: +20-28% over local threads). Batch
    sizes shrink towards the run's end (``_batches``), so that no worker
    is left with a long batch while the others are idle; a
    worker lost mid-batch costs only that batch's rerun: its results are
    recorded when the batch comes back, so none is lost or recorded twice.

    ``required``: the sandbox layers every worker must have (default: this
    machine's, :func:`instructor_layers`)."""

    def __init__(self, client, course_path: Path, limits: Limits, *, max_batch: int = 16,
                 inputs: HiddenInputs | None = None, required: frozenset[str] | None = None):
        self.client = client
        self.max_batch = max(1, max_batch)
        self._spec = RunSpec(uuid.uuid4().hex[:8], str(Path(course_path).resolve()), limits, inputs,
                             frozenset(required) if required is not None else None)
        self._required: Future | None = None
        if required is None:   # a sandbox here starts (torch's import) while the class is collected
            pool = ThreadPoolExecutor(1, thread_name_prefix="instructor-layers")
            self._required = pool.submit(instructor_layers, limits)
            pool.shutdown(wait=False)

    @property
    def scheduler(self) -> str:
        return getattr(getattr(self.client, "scheduler", None), "address", None) or "the scheduler"

    def prepare(self, exercises: list[Exercise]) -> None:
        if not exercises:
            return   # nothing to grade (a resumed run that is complete): no worker is asked anything
        if self._required is not None:
            self._spec = replace(self._spec, required=self._required.result())
        with self._faults():
            self._vet()

    def _vet(self) -> None:
        """Warm every connected worker's sandbox; refuse the run if one is weaker."""
        workers = list(self.client.scheduler_info().get("workers", {}))
        if not workers:
            try:
                self.client.wait_for_workers(1, timeout=WAIT_FOR_WORKERS_S)
            except TimeoutError:
                raise ClusterLost(f"no Dask worker joined {self.scheduler} within {WAIT_FOR_WORKERS_S:.0f} s; "
                                  "start workers (dask worker ADDRESS) and run the same command again") from None
            workers = list(self.client.scheduler_info().get("workers", {}))
        reports = vet_workers(self.client, self._spec, workers)
        refused = [f"  {address}: {report['refused']}" for address, report in reports.items() if report["refused"]]
        if refused:
            raise WeakerSandbox("\n".join([f"{len(refused)} of {len(workers)} Dask worker(s) refused to grade "
                                           "(nothing was graded):", *refused]))

    def grade(self, tasks: list[Task]) -> Iterator[tuple[Task, ExerciseResult]]:
        from distributed import as_completed

        futures = {}
        for batch in self._batches(tasks):
            first = batch[0].key
            future = self.client.submit(
                grade_batch, self._spec, first.exercise, [_folder_files(task.part.folder) for task in batch],
                pure=False,
                key=f"grade-{self._spec.run_id}-{first.exercise}-{first.student}-{len(batch)}")
            futures[future] = batch
        with self._faults():
            # Results come back in bulk, fetched while the previous ones are recorded.
            for done in as_completed(futures, with_results=True).batches():
                for future, results in done:
                    if future.status != "finished":
                        future.result()   # raises: cancelled (the scheduler lost) or the task's error
                    yield from zip(futures.pop(future), results, strict=True)
                    future.release()

    def _batches(self, tasks: list[Task]) -> Iterator[list[Task]]:
        """The tasks of each exercise in batches of one exercise: a share of
        what is left in the whole run (about a quarter per worker, at most
        ``max_batch``), shrinking to single submissions at the run's end."""
        workers = max(1, len(self.client.scheduler_info().get("workers", {})))
        by_exercise: dict[str, list[Task]] = {}
        for task in tasks:
            by_exercise.setdefault(task.key.exercise, []).append(task)
        left = len(tasks)
        for group in by_exercise.values():
            start = 0
            while start < len(group):
                batch = group[start:start + min(self.max_batch, max(1, left // (4 * workers)))]
                yield batch
                start += len(batch)
                left -= len(batch)

    @contextmanager
    def _faults(self) -> Iterator[None]:
        """The cluster's failures as the instructor reads them."""
        from distributed.client import FutureCancelledError
        from distributed.scheduler import KilledWorker

        try:
            yield
        except FutureCancelledError as exc:
            _quiet_reconnects()
            raise ClusterLost(f"lost the Dask scheduler {self.scheduler} mid-run ({exc.reason or 'cancelled'}): "
                              "every result received so far is in the gradebook; start the scheduler again and "
                              "rerun the same command to grade the rest") from None
        except KilledWorker as exc:
            raise ClusterLost(f"Dask workers kept dying while grading ({exc}): every result received so far is in "
                              "the gradebook; check the workers' memory and logs, then rerun the same command "
                              "to grade the rest") from None


def _quiet_reconnects() -> None:
    """The client goes on trying to reach a lost scheduler in the background
    and logs each failure with a traceback: the run has said what happened."""
    for name in ("distributed.client", "distributed.core", "distributed.comm"):
        logging.getLogger(name).setLevel(logging.CRITICAL)


@contextmanager
def dask_executor(course_path: Path, limits: Limits, scheduler: str | None = None,
                  *, workers: int = 2, inputs: HiddenInputs | None = None) -> Iterator[DaskExecutor]:
    """A :class:`DaskExecutor` on the scheduler at ``scheduler``, or on a
    ``LocalCluster`` of ``workers`` processes (one thread each) on loopback.
    ``inputs``: the grading secret's hidden inputs (None: fixed inputs)."""
    from distributed import Client

    if scheduler:
        try:
            client = Client(scheduler, timeout=30)
        except (OSError, TimeoutError) as exc:
            raise SchedulerUnreachable(f"cannot reach the Dask scheduler at {scheduler}: {exc}") from None
        with client:
            yield DaskExecutor(client, course_path, limits, inputs=inputs)
        return
    with local_cluster(workers) as cluster, Client(cluster) as client:
        # The workers are this machine, with this environment: a sandbox here
        # would have their layers (grader.judge still refuses one that cannot
        # hide the course's files), so none is started only to compare.
        yield DaskExecutor(client, course_path, limits, inputs=inputs, required=frozenset())


def local_cluster(workers: int = 2, **options):
    """A LocalCluster of ``workers`` processes (one thread each) on loopback,
    each importing the grader and starting its fork-server as it starts."""
    from distributed import LocalCluster

    return LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, host="127.0.0.1",
                        dashboard_address=None, preload=["grader.scale.preload"], **options)
