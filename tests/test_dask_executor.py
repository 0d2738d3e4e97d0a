"""Grading on a Dask cluster (``--executor dask``) gives the gradebook that
local grading gives, and a worker killed mid-run loses and duplicates
nothing. The class is conftest's ``submissions`` (exercise 01)."""
import os
import signal
import subprocess
import sys

import pytest

from grader.course import REPO_ROOT
from grader.gradebook import Gradebook
from grader.run.grading import grade_class
from grader.sandbox import Limits

distributed = pytest.importorskip("distributed")

from grader.checks.inputs import HiddenInputs  # noqa: E402
from grader.scale.dask_executor import DaskExecutor, local_cluster  # noqa: E402


def _book(db):
    """Every result of the gradebook, keyed, without its timestamp."""
    with Gradebook(db) as book:
        assert book.integrity_problems() == []
        rows = book._db.execute("SELECT student, exercise, content_hash, course_version, points, max_points, "
                                "status, reason, verdicts FROM results").fetchall()
    return {row[:4]: row[4:] for row in rows}


@pytest.fixture(scope="module")
def local_book(submissions, graded_class):
    """The class graded locally (conftest's `graded_class`: `grader grade
    --jobs 2`, threads in one process): what the cluster must match."""
    book = _book(graded_class / "grades.db")
    assert len(book) == len(list(submissions.iterdir())) > 0
    return book


def test_dask_local_cluster_matches_local_grading(submissions, local_book, tmp_path):
    """`grader grade --executor dask` (a 2-worker LocalCluster on loopback)."""
    cmd = [sys.executable, "-m", "grader", "grade", str(submissions), "-e", "01", "--executor", "dask",
           "--db", str(tmp_path / "grades.db"), "--out", str(tmp_path / "out")]
    run = subprocess.run(cmd, cwd=REPO_ROOT, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    assert _book(tmp_path / "grades.db") == local_book
    # Resume: nothing left to grade, nothing duplicated.
    again = subprocess.run(cmd, cwd=REPO_ROOT, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0 and f"graded 0 result(s), {len(local_book)} already in" in again.stderr
    assert _book(tmp_path / "grades.db") == local_book


def test_worker_killed_mid_run_loses_nothing(course, submissions, local_book, tmp_path):
    """SIGKILL of a worker process while it grades (a LocalCluster of
    processes): its batch runs again on the other worker, every submission
    is recorded once, and the gradebook equals local grading's."""
    limits = Limits(**course.grading.model_dump())
    killed = []
    with local_cluster(2) as cluster, distributed.Client(cluster) as client:
        # The grading secret `grader grade` uses (conftest's): the same per-submission inputs as local grading.
        inputs = HiddenInputs(os.environ["GRADER_GRADING_SECRET"].encode())
        executor = DaskExecutor(client, REPO_ROOT / "course.yaml", limits, inputs=inputs, required=frozenset())

        def kill_a_busy_worker(task, record):
            if killed:
                return
            busy = [address for address, keys in client.processing().items() if keys]
            assert busy, "no worker has a task in flight: the kill would not be mid-run"
            pid = client.run(os.getpid, workers=[busy[0]])[busy[0]]
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)

        with Gradebook(tmp_path / "grades.db") as book:
            run = grade_class(course, [course.exercise("01")], submissions, book, None, tmp_path / "work",
                              executor=executor, on_result=kill_a_busy_worker)
    assert killed
    assert run.graded == len(run.keys) == len(local_book)
    assert _book(tmp_path / "grades.db") == local_book


def test_tasks_travel_in_shrinking_batches_of_one_exercise():
    """A Dask task grades a batch of one exercise (each batch ships one
    exercise's references): a quarter per worker of what is left, at most
    max_batch, shrinking to single submissions at the end of each queue, so
    that no worker is left with a long batch while the others idle."""
    from types import SimpleNamespace

    from grader.gradebook import Key
    from grader.run.grading import Task

    class TwoWorkers:
        def scheduler_info(self):
            return {"workers": {"tcp://a": {}, "tcp://b": {}}}

    tasks = [Task(Key(f"s{i:03d}", exercise, "hash", "v"), None, SimpleNamespace())
             for exercise, n in (("01", 200), ("03", 20), ("06", 1)) for i in range(n)]
    executor = DaskExecutor(TwoWorkers(), REPO_ROOT / "course.yaml", Limits(60, 60, 1024, 64, 1), max_batch=16,
                            required=frozenset())
    batches = list(executor._batches(tasks))
    assert [t.key for b in batches for t in b] == [t.key for t in tasks]   # each once, in order
    assert all(len({t.key.exercise for t in b}) == 1 for b in batches)
    sizes = {ex: [len(b) for b in batches if b[0].key.exercise == ex] for ex in ("01", "03", "06")}
    assert sizes["01"][:4] == [16] * 4 and max(max(s) for s in sizes.values()) == 16
    for exercise, ordered in sizes.items():
        assert ordered == sorted(ordered, reverse=True), exercise
        assert ordered[-1] == 1, exercise
    assert sizes["03"] == [2, 2, 2] + [1] * 14 and sizes["06"] == [1]
    # The last batches cost one submission each: the tail one worker runs alone is short.
    assert sum(sizes["01"][-8:]) == 8
