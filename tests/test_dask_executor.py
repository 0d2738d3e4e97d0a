"""Grading on a Dask cluster (``--executor dask``) gives the gradebook that
local grading gives, and a worker killed mid-run loses and duplicates
nothing. The class is conftest's ``submissions`` (exercise 01)."""
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from grader.course import REPO_ROOT
from grader.gradebook import Gradebook
from grader.run.grading import grade_class
from grader.sandbox import Limits
from classrun import row_count

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
    exercise's references): a quarter per worker of what is left in the
    run, at most max_batch, shrinking to single submissions at its end, so
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
    sizes = [len(b) for b in batches]
    assert sizes[:4] == [16] * 4 and max(sizes) == 16
    for exercise in ("01", "03"):   # shrinking (an exercise's last batch may be cut short by its end)
        ordered = [len(b) for b in batches if b[0].key.exercise == exercise]
        assert ordered[:-1] == sorted(ordered[:-1], reverse=True), (exercise, ordered)
    # The last batches cost one submission each: the tail one worker runs alone is short.
    assert sizes[-8:] == [1] * 8
    assert [len(b) for b in batches if b[0].key.exercise == "06"] == [1]


# -- a cluster of separate commands on loopback (`dask scheduler`, `dask worker`) --------------------------

DASK = str(Path(sys.executable).parent / "dask")


class LoopbackCluster:
    """`dask scheduler` and `dask worker` started as separate commands on
    127.0.0.1, as an instructor starts them on other machines (README)."""

    def __init__(self, folder: Path):
        self.file = folder / "scheduler.json"
        self.procs: dict[str, subprocess.Popen] = {}
        self.logs = folder

    def _start(self, name: str, cmd: list[str], env: dict | None = None) -> subprocess.Popen:
        log = open(self.logs / f"{name}.log", "w")
        self.procs[name] = subprocess.Popen(cmd, cwd=REPO_ROOT, stdout=log, stderr=subprocess.STDOUT,
                                            env={**os.environ, **(env or {})})
        return self.procs[name]

    def scheduler(self) -> str:
        self.file.unlink(missing_ok=True)   # a lost scheduler's
        self._start("scheduler", [DASK, "scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                                  "--scheduler-file", str(self.file)])
        deadline = time.monotonic() + 60
        while not self.file.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        return json.loads(self.file.read_text())["address"]

    def worker(self, name: str, env: dict | None = None) -> None:
        self._start(name, [DASK, "worker", "--scheduler-file", str(self.file), "--nthreads", "1",
                           "--host", "127.0.0.1", "--no-dashboard", "--name", name,
                           "--preload", "grader.scale.preload"], env)

    def wait_for(self, count: int) -> None:
        with distributed.Client(scheduler_file=str(self.file), timeout=60) as client:
            client.wait_for_workers(count, timeout=120)
            deadline = time.monotonic() + 60
            while len(client.scheduler_info()["workers"]) != count and time.monotonic() < deadline:
                time.sleep(0.2)    # one that was stopped leaves the scheduler's list a moment later
            assert len(client.scheduler_info()["workers"]) == count

    def stop(self, name: str, sig=signal.SIGTERM) -> None:
        proc = self.procs.pop(name)
        proc.send_signal(sig)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def close(self) -> None:
        for name in [n for n in self.procs if n != "scheduler"] + [n for n in self.procs if n == "scheduler"]:
            self.stop(name)


@pytest.fixture
def loopback(tmp_path):
    cluster = LoopbackCluster(tmp_path)
    yield cluster
    cluster.close()


def _grade_on(scheduler: str, submissions: Path, folder: Path) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "grader", "grade", str(submissions), "-e", "01", "--executor", "dask",
           "--scheduler", scheduler, "--db", str(folder / "grades.db"), "--out", str(folder / "out")]
    return subprocess.run(cmd, cwd=REPO_ROOT, capture_output=True, text=True, timeout=600)


def test_separate_commands_on_loopback_refuse_a_weaker_worker_then_grade(submissions, local_book, loopback, tmp_path):
    """A worker whose sandbox lacks Landlock (disabled in that worker's
    process only) is named by `grader doctor --scheduler` and refuses the
    run before anything is graded; without it, the class is graded through
    the separate commands into the gradebook local grading gives."""
    address = loopback.scheduler()
    loopback.worker("full")
    loopback.worker("weak", env={"GRADER_SANDBOX_DISABLE": "landlock"})
    loopback.wait_for(2)

    doctor = subprocess.run([sys.executable, "-m", "grader", "doctor", "--scheduler", address], cwd=REPO_ROOT,
                            capture_output=True, text=True, timeout=300)
    assert doctor.returncode == 1, doctor.stdout + doctor.stderr
    assert doctor.stdout.count("\n  ✓ seccomp: active") == 2       # each worker's layers, proved on that worker
    assert "✗ landlock: missing: disabled by configuration" in doctor.stdout
    assert "landlock: missing: disabled by configuration" in doctor.stderr and "isolates less" in doctor.stderr

    refused = _grade_on(address, submissions, tmp_path)
    assert refused.returncode == 3, refused.stdout + refused.stderr
    said = " ".join(refused.stderr.split())    # the console wraps long lines
    assert "1 of 2 Dask worker(s) refused to grade (nothing was graded)" in said
    assert "landlock: missing: disabled by configuration" in said and "Traceback" not in said
    assert row_count(tmp_path / "grades.db") == 0

    loopback.stop("weak")
    loopback.wait_for(1)
    graded = _grade_on(address, submissions, tmp_path)
    assert graded.returncode == 0, graded.stdout + graded.stderr
    assert _book(tmp_path / "grades.db") == local_book


def test_scheduler_lost_mid_run_says_so_and_a_rerun_resumes(course, submissions, local_book, loopback, tmp_path):
    """The scheduler is SIGKILLed once the first results are in: `grader
    grade` says so and exits 3, keeping what it recorded; on a new
    scheduler the same command grades only the rest, each result once."""
    classroom = tmp_path / "class"
    shutil.copytree(submissions, classroom)
    slow = classroom / "s99" / course.exercise("01").folder   # graded last: the kill lands while it runs
    slow.mkdir(parents=True)
    reference = (REPO_ROOT / "solutions" / course.exercise("01").folder / course.exercise("01").module).read_text()
    (slow / course.exercise("01").module).write_text(f"import time\ntime.sleep(4)\n{reference}")

    address = loopback.scheduler()
    loopback.worker("only")
    loopback.wait_for(1)
    db = tmp_path / "grades.db"
    cmd = [sys.executable, "-m", "grader", "grade", str(classroom), "-e", "01", "--executor", "dask",
           "--scheduler", address, "--db", str(db), "--out", str(tmp_path / "out")]
    run = subprocess.Popen(cmd, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    while row_count(db) == 0 and run.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    loopback.stop("scheduler", signal.SIGKILL)
    out, err = run.communicate(timeout=300)
    recorded = row_count(db)
    assert run.returncode == 3, out + err
    assert 0 < recorded < len(local_book) + 1, recorded
    said = " ".join(err.split())    # the console wraps long lines
    assert "lost the Dask scheduler" in said and "rerun the same command" in said and "Traceback" not in said

    loopback.stop("only")
    address = loopback.scheduler()
    loopback.worker("again")
    loopback.wait_for(1)
    cmd[cmd.index("--scheduler") + 1] = address
    again = subprocess.run(cmd, cwd=REPO_ROOT, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stdout + again.stderr
    assert f"graded {len(local_book) + 1 - recorded} result(s), {recorded} already in" in again.stderr
    book = _book(db)
    assert {k: v for k, v in book.items() if k[0] != "s99"} == local_book
    assert [v[2] for k, v in book.items() if k[0] == "s99"] == ["graded"]


def test_a_worker_is_weaker_when_it_lacks_a_layer_this_machine_has():
    """The comparison behind a refusal: every layer active here must be
    active there; a root machine's uid drop and an ordinary user's dropped
    capabilities are the same guarantee; a layer only logging is missing."""
    from grader.sandbox.layers import active_layers, weaker_than

    here = {"namespaces": "active", "filesystem_view": "active", "landlock": "active", "uid_drop": "active",
            "seccomp": "active", "rlimits": "active"}
    required = active_layers(here)
    assert weaker_than(required, here) == []
    as_user = {**here, "capabilities_dropped": "active"}
    del as_user["uid_drop"]
    assert weaker_than(required, as_user) == []
    assert weaker_than(required, {**here, "landlock": "missing: disabled by configuration"}) == [
        "landlock: missing: disabled by configuration"]
    assert weaker_than(required, {**here, "seccomp": "log only (GRADER_SANDBOX_SECCOMP_LOG=1): ..."}) == [
        "seccomp: log only (GRADER_SANDBOX_SECCOMP_LOG=1): ..."]
    assert weaker_than(required, {k: v for k, v in here.items() if k != "uid_drop"}) == [
        "privilege_drop: not reported"]
    # A machine with fewer layers than a worker asks nothing more of it.
    assert weaker_than(active_layers({"landlock": "active"}), here) == []
