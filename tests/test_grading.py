"""Grading a class: reruns are identical, and a grader killed with SIGKILL
half-way loses nothing: rerunning completes the same gradebook as a run
that was never interrupted."""
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from classrun import CLASS_SIZE, grade_cli
from classrun import children as _children, results as _results, row_count as _count, state as _state
from grader.course import REPO_ROOT

STUDENTS = CLASS_SIZE  # the `submissions` class lives in conftest.py


def _grade(submissions, db, out, **popen):
    return grade_cli(submissions, db, out, **popen)


@pytest.fixture(scope="module")
def uninterrupted(graded_class):
    """conftest's `graded_class`: the class graded once, never interrupted."""
    return graded_class


def test_grading_twice_gives_identical_results(submissions, uninterrupted, tmp_path):
    run = _grade(submissions, tmp_path / "grades.db", tmp_path / "grading")
    assert run.communicate(timeout=600)[0] and run.returncode == 0
    assert _results(tmp_path / "grades.db") == _results(uninterrupted / "grades.db")
    assert len(_results(tmp_path / "grades.db")) == STUDENTS
    assert (tmp_path / "grading" / "grades.csv").read_text() == (uninterrupted / "grading" / "grades.csv").read_text()


def test_rerun_grades_nothing_twice(submissions, uninterrupted, tmp_path):
    shutil.copytree(uninterrupted, tmp_path / "again")  # the shared run stays as it was
    run = _grade(submissions, tmp_path / "again" / "grades.db", tmp_path / "again" / "grading")
    output = run.communicate(timeout=600)[0]
    assert run.returncode == 0 and f"graded 0 result(s), {STUDENTS} already in" in output


def test_sigkill_half_way_loses_nothing(submissions, uninterrupted, tmp_path):
    db = tmp_path / "grades.db"
    run = _grade(submissions, db, tmp_path / "grading", start_new_session=True)
    deadline = time.monotonic() + 300
    while _count(db) < 3 and run.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert run.poll() is None, "the grader finished before it could be killed"
    servers = _children(run.pid)
    assert servers, "the grader runs its sandbox fork-server as a child"
    os.kill(run.pid, signal.SIGKILL)  # the grader itself, as `kill -9 PID` would
    run.wait()
    recorded = _count(db)
    assert 3 <= recorded < STUDENTS
    # Orphaned, the fork-server sees its control socket close and exits.
    deadline = time.monotonic() + 20
    while any(os.path.exists(f"/proc/{pid}") and _state(pid) != "Z" for pid in servers) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [pid for pid in servers if os.path.exists(f"/proc/{pid}") and _state(pid) != "Z"]
    resumed = _grade(submissions, db, tmp_path / "grading")
    output = resumed.communicate(timeout=600)[0]
    assert resumed.returncode == 0, output
    assert f"{recorded} already in" in output
    assert _results(db) == _results(uninterrupted / "grades.db")


@pytest.fixture(scope="module")
def sample_class(tmp_path_factory):
    """The README's demo class (examples/make_submissions.py): strong,
    pitfalls, half-way, crashing and hanging code, a zipped checkout."""
    subs = tmp_path_factory.mktemp("sample") / "submissions"
    subprocess.run([sys.executable, "examples/make_submissions.py", str(subs)], cwd=REPO_ROOT, check=True,
                   capture_output=True)
    return subs


def _grade_sample(subs, tmp_path, run: str) -> dict:
    cmd = [sys.executable, "-m", "grader", "grade", str(subs), "--jobs", "2", "--timeout", "15",
           "--db", str(tmp_path / f"{run}.db"), "--out", str(tmp_path / run)]
    done = subprocess.run(cmd, cwd=REPO_ROOT, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    return _results(tmp_path / f"{run}.db")


@pytest.mark.slow
def test_the_sample_class_grades_as_the_readme_says(sample_class, tmp_path):
    by_student = {}
    for (student, _, _), (points, status, _, _) in _grade_sample(sample_class, tmp_path, "first").items():
        by_student.setdefault(student, []).append((points, status))
    assert sorted(by_student) == ["alice", "bob", "carol", "dave", "erin"]
    assert all(status == "graded" for _, status in by_student["alice"])
    assert {"import_error", "timeout", "not_submitted"} <= {status for _, status in by_student["dave"]}


@pytest.mark.long  # GRADER_LONG_TESTS=1; in CI, test_grading_twice_gives_identical_results stands for it
def test_the_sample_class_grades_identically_twice(sample_class, tmp_path):
    """Hanging code, a zipped checkout and all, twice: the same gradebook."""
    assert _grade_sample(sample_class, tmp_path, "first") == _grade_sample(sample_class, tmp_path, "second")


def test_grading_keeps_the_start_up_s_objects_out_of_the_collector_and_gives_them_back():
    """Inside, the objects alive at the start are frozen (a full collection
    does not walk torch's import graph); after, nothing stays frozen, so an
    in-process caller (a test, a notebook) keeps its collector as it was."""
    import gc

    from grader.run.grading import settled_heap

    before = gc.get_freeze_count()
    with settled_heap():
        inside = gc.get_freeze_count()
    assert inside > before
    assert gc.get_freeze_count() == before
