"""Faults, end to end through `grader grade`: kill -9 of the grader or of
its sandbox (the fork-server or one sandboxed child) at seeded random
points, a full disk under the output folder, and a corrupted or locked
gradebook. Nothing recorded is lost or duplicated, the gradebook's
integrity check passes, and what is finally recorded is identical to an
uninterrupted run."""
from __future__ import annotations

import os
import random
import shutil
import signal
import sqlite3
import subprocess
import time

import pytest

from classrun import children, grade_cli, results, row_count, write_class

STUDENTS = 6
# Three seeds each in CI; FAULT_SEEDS=N runs N of each (a longer soak, by hand).
_SEEDS = int(os.environ.get("FAULT_SEEDS", "3"))
GRADER_SEEDS = [11 + i for i in range(_SEEDS)]
WORKER_SEEDS = [21 + i for i in range(_SEEDS)]


@pytest.fixture(scope="module")
def submissions(course, tmp_path_factory):
    return write_class(course, tmp_path_factory.mktemp("faults-class"), STUDENTS)


@pytest.fixture(scope="module")
def uninterrupted(submissions, tmp_path_factory):
    root = tmp_path_factory.mktemp("faults-clean")
    run = grade_cli(submissions, root / "grades.db", root / "out")
    output = run.communicate(timeout=600)[0]
    assert run.returncode == 0, output
    return results(root / "grades.db")


@pytest.fixture(scope="module")
def uninterrupted_db(uninterrupted, tmp_path_factory):
    """The uninterrupted run's gradebook file (the CLI checkpointed it on close)."""
    return next(tmp_path_factory.getbasetemp().glob("faults-clean*/grades.db"))


def _no_duplicates(db) -> None:
    if not db.exists() or row_count(db) == 0:  # killed before its first result (or while creating the file)
        return
    rows = sqlite3.connect(db).execute("SELECT student, exercise, COUNT(*) FROM results GROUP BY 1, 2").fetchall()
    assert all(count == 1 for _, _, count in rows), rows


def _wait_for_rows(run: subprocess.Popen, db, rows: int) -> None:
    while row_count(db) < rows and run.poll() is None:
        time.sleep(0.02)


@pytest.mark.parametrize("seed", GRADER_SEEDS)
def test_kill_9_of_the_grader_then_rerun_is_identical(submissions, uninterrupted, tmp_path, seed):
    rng = random.Random(seed)
    db = tmp_path / "grades.db"
    run = grade_cli(submissions, db, tmp_path / "out", start_new_session=True)
    _wait_for_rows(run, db, rng.randrange(0, STUDENTS - 2))
    time.sleep(rng.uniform(0, 0.5))  # anywhere: collecting, judging, recording
    os.kill(run.pid, signal.SIGKILL)
    run.wait()
    recorded = results(db) if db.exists() and row_count(db) else {}
    assert all(uninterrupted[key] == value for key, value in recorded.items())  # nothing half-written
    _no_duplicates(db)
    rerun = grade_cli(submissions, db, tmp_path / "out")
    output = rerun.communicate(timeout=600)[0]
    assert rerun.returncode == 0, output
    assert results(db) == uninterrupted
    _no_duplicates(db)


@pytest.mark.parametrize("seed", WORKER_SEEDS)
def test_kill_9_of_a_sandbox_worker_changes_no_grade(submissions, uninterrupted, tmp_path, seed):
    rng = random.Random(seed)
    db = tmp_path / "grades.db"
    run = grade_cli(submissions, db, tmp_path / "out", start_new_session=True)
    _wait_for_rows(run, db, rng.randrange(0, STUDENTS - 2))
    kill_server, killed = rng.random() < 0.5, False
    while run.poll() is None and not killed:  # the grader's child is the fork-server; its children are the sandboxed runs
        servers = children(run.pid)
        victims = servers if kill_server else [pid for server in servers for pid in children(server)]
        if victims:
            os.kill(victims[0], signal.SIGKILL)
            killed = True
        time.sleep(0.002)
    output = run.communicate(timeout=600)[0]
    assert killed, "the grader finished before a sandbox process could be killed"
    assert run.returncode == 0, output
    assert results(db) == uninterrupted  # the killed run was graded again, not recorded as a crash
    _no_duplicates(db)


def test_full_disk_under_the_output_folder(submissions, uninterrupted, tmp_path):
    if os.geteuid() != 0:
        pytest.skip("mounting a tiny tmpfs needs root")
    out = tmp_path / "out"
    out.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(out)], check=True)
    try:
        run = grade_cli(submissions, tmp_path / "grades.db", out)
        output = run.communicate(timeout=600)[0]
    finally:
        subprocess.run(["umount", str(out)], check=True)
    assert run.returncode == 4, output
    assert "cannot write the reports" in output and "No space left on device" in " ".join(output.split())
    assert results(tmp_path / "grades.db") == uninterrupted  # every grade is in the gradebook


def test_corrupted_gradebook_is_an_error_and_is_not_overwritten(submissions, tmp_path):
    db = tmp_path / "grades.db"
    garbage = b"this is not an SQLite database, do not overwrite me\n" * 100
    db.write_bytes(garbage)
    run = grade_cli(submissions, db, tmp_path / "out")
    output = run.communicate(timeout=600)[0]
    assert run.returncode == 4, output
    assert "gradebook error" in output and "not a database" in output
    assert db.read_bytes() == garbage
    assert not (tmp_path / "out").exists()


def test_locked_gradebook_is_an_error_and_keeps_its_rows(submissions, uninterrupted_db, tmp_path):
    db = tmp_path / "grades.db"
    shutil.copy(uninterrupted_db, db)
    before = results(db)
    with sqlite3.connect(db) as editor:  # one result to grade again, so the run must write
        editor.execute("DELETE FROM results WHERE student = 's00'")
    editor.close()
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")  # another tool holds the gradebook's write lock for the whole run
    try:
        run = grade_cli(submissions, db, tmp_path / "out")
        output = run.communicate(timeout=600)[0]
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert run.returncode == 4, output
    assert "gradebook error" in output and "locked" in output
    after = results(db)
    assert len(after) == STUDENTS - 1 and all(before[key] == value for key, value in after.items())
