"""What runs inside a Dask worker process for ``grader grade --executor dask``.

Each worker process keeps one sandbox fork-server per set of limits for its
whole life, and the judge of the run it grades for now (a new
run gets a fresh judge: the course may have changed in between).

Before a worker grades anything, its sandbox's layers are compared with the
instructor's machine's (``RunSpec.required``): a worker that would isolate
less refuses with the reason (:class:`WeakerSandbox`), every time it is
asked, and grades nothing.

Workers started with ``--preload grader.scale.preload`` start their
fork-server as they start, not when the first run vets them.
"""
from __future__ import annotations

import atexit
import os
import shutil
import socket
import tempfile
import threading
import uuid
from dataclasses import dataclass
from pathlib import Path

from grader.checks.inputs import HiddenInputs
from grader.course import Exercise, load_course
from grader.judge import ExerciseResult, GraderError, Judge
from grader.run.grading import grader_error
from grader.sandbox import Limits, Sandbox, SandboxError
from grader.sandbox.layers import weaker_than


class WeakerSandbox(GraderError):
    """This worker's sandbox lacks a layer the instructor's machine has."""


@dataclass(frozen=True)
class RunSpec:
    """What every task of one run carries (a few hundred bytes)."""

    run_id: str
    course_path: str
    limits: Limits
    inputs: HiddenInputs | None
    required: frozenset[str]   # the instructor's machine's active layers (grader.sandbox.layers)


_SANDBOXES: dict[Limits, Sandbox] = {}
_JUDGE: dict[str, tuple[Judge, Path]] = {}   # the current run's only
_LOCK = threading.Lock()


def worker_sandbox(limits: Limits) -> Sandbox:
    """This process's fork-server for ``limits``, started on first use."""
    with _LOCK:
        if limits not in _SANDBOXES:
            sandbox = _SANDBOXES[limits] = Sandbox(limits)
            # Why atexit: a worker process has no `with` around its life; a
            # killed one takes its fork-server along (PDEATHSIG) anyway.
            atexit.register(sandbox.close)
        sandbox = _SANDBOXES[limits]
    sandbox.layers()   # starts the fork-server (its torch import) outside the lock
    return sandbox


def where() -> str:
    return f"{socket.gethostname()} (pid {os.getpid()})"


def refusal(spec: RunSpec, sandbox: Sandbox) -> str | None:
    """Why this worker must not grade for ``spec`` (None: it may)."""
    missing = weaker_than(spec.required, sandbox.layers())
    if not missing:
        return None
    return (f"the Dask worker on {where()} isolates less than the instructor's machine and grades nothing: "
            f"{'; '.join(missing)}. Fix that machine (grader doctor on it) or take it out of the cluster; "
            f"grader doctor --scheduler ADDRESS lists every worker's layers")


def vet(spec: RunSpec) -> dict:
    """Start this worker's sandbox and report its layers and any refusal."""
    try:
        sandbox = worker_sandbox(spec.limits)
    except SandboxError as exc:
        return {"where": where(), "layers": {}, "refused": f"the sandbox does not start on {where()}: {exc}"}
    return {"where": where(), "layers": sandbox.layers(), "refused": refusal(spec, sandbox)}


def worker_judge(spec: RunSpec) -> tuple[Judge, Path]:
    """The judge of ``spec``'s run in this process, after the layer check."""
    sandbox = worker_sandbox(spec.limits)
    if (reason := refusal(spec, sandbox)) is not None:
        raise WeakerSandbox(reason)
    with _LOCK:
        if spec.run_id not in _JUDGE:
            for _, old_workdir in _JUDGE.values():
                shutil.rmtree(old_workdir, ignore_errors=True)
            _JUDGE.clear()
            workdir = Path(tempfile.mkdtemp(prefix="grader-worker-"))
            atexit.register(shutil.rmtree, workdir, True)
            course_path = Path(spec.course_path)
            _JUDGE[spec.run_id] = (Judge(load_course(course_path), sandbox, course_path.parent, spec.inputs), workdir)
        return _JUDGE[spec.run_id]


def grade_batch(spec: RunSpec, exercise_id: str, batch: list[dict[str, bytes] | None]) -> list[ExerciseResult]:
    """Grade a few submitted exercises, one after the other (each entry: its
    prepared folder's files; None: not submitted), each on its own hidden
    inputs. A judging that raises is that submission's grader error, as
    with local grading; a broken grader or sandbox (or reference) stops the run."""
    judge, workdir = worker_judge(spec)
    exercise = judge.course.exercise(exercise_id)
    results = []
    for files in batch:
        try:
            results.append(_grade_files(judge, exercise, files, workdir))
        except (GraderError, SandboxError):
            raise
        except Exception as exc:  # noqa: BLE001 - one submission's run never stops the class
            results.append(grader_error(exercise, exc))
    return results


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
