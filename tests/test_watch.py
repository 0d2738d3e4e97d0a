"""`grader watch` (issue 19): each submission graded once per content into
the gradebook, feedback where the student fetches it (a plain folder's
feedback/ and nbgrader's `fetch_feedback`), the hourly limit, the fair
queue, and a restart that resumes."""
from __future__ import annotations

import html
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from grader.course import REPO_ROOT, load_course
from grader.gradebook import Gradebook
from grader.watch.state import Pending, WatchState, fair_order
from unix_students import nbgrader_class  # noqa: F401 - a fixture

REFERENCE = (REPO_ROOT / "solutions" / "01_softmax" / "softmax.py").read_text()
STUB = (REPO_ROOT / "exercises" / "01_softmax" / "softmax.py").read_text()


def _text(path: Path) -> str:
    return html.unescape(re.sub(r"<[^>]+>", " ", path.read_text(encoding="utf-8")))


def _watch(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "grader", "watch", "--once", "-e", "01", *args], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=900, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def _hand_in(subs: Path, student: str, source: str) -> None:
    folder = subs / student / "01_softmax"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "softmax.py").write_text(source)


def _graded(db: Path) -> dict[str, float]:
    with Gradebook(db) as book:
        return {r.key.student: r.points for r in book.records(load_course().course.version)}


# -- the queue's order and the hourly limit (no grading) ------------------------------


def test_one_students_flood_does_not_delay_anothers_first():
    flood = [Pending(f"nbgrader:mallory+a+{i:02d}", "mallory", "f", float(i)) for i in range(50)]
    late = Pending("nbgrader:alice+a+99", "alice", "f", 100.0)
    order = fair_order([*flood, late], last_served={"mallory": 10.0}, busy=set())
    assert [p.student for p in order] == ["alice", "mallory"]  # alice, never served, before mallory's 2nd
    assert order[1].source_id == flood[0].source_id            # mallory's oldest first
    assert fair_order([*flood, late], {}, busy={"alice"}) == [flood[0]]


def test_the_hourly_allowance_counts_gradings_across_a_restart(tmp_path):
    state = WatchState(tmp_path / "g.db")
    for i in range(3):
        assert state.seen(f"s{i}", "bob", "v1", now=1000.0 + i)
        assert state.finish(f"s{i}", "v1", counted=i != 1, now=1000.0 + i)
    assert not state.seen("s0", "bob", "v1")  # the same files: nothing new
    state.close()
    again = WatchState(tmp_path / "g.db")
    assert again.graded_in_last_hour("bob", now=1500.0) == [1000.0, 1002.0]
    assert again.graded_in_last_hour("bob", now=1000.0 + 3600.5) == [1002.0]
    assert again.seen("s0", "bob", "v2") and [p.source_id for p in again.pending()] == ["s0"]  # changed files
    # Changed again while it was being graded: it stays pending for another round.
    again.seen("s0", "bob", "v3")
    assert not again.finish("s0", "v2", counted=True)
    assert [p.fingerprint for p in again.pending()] == ["v3"]


# -- a plain folder ----------------------------------------------------------------------


def test_a_plain_folder_is_graded_once_with_feedback_and_the_limit(tmp_path):
    subs, db, feedback = tmp_path / "subs", tmp_path / "grades.db", tmp_path / "feedback"
    _hand_in(subs, "alice", REFERENCE)
    _hand_in(subs, "bob", STUB)
    args = [str(subs), "--db", str(db), "--feedback", str(feedback), "--per-hour", "1"]
    first = _watch(*args)
    assert "2 graded" in first.stderr
    points = _graded(db)
    assert points["alice"] == load_course().exercise("01").points and points["bob"] == 0
    assert "Graded at" in _text(feedback / "alice" / "feedback.html")
    bob = _text(feedback / "bob" / "feedback.html").lower()
    assert "graded at" in bob and ("not started" in bob or "not implemented" in bob)  # the stub's page

    # Run again: nothing new, nothing graded (exactly once).
    assert "0 graded" in _watch(*args).stderr
    # Bob changes his files: he has used his one graded submission this hour, so it waits and says so.
    _hand_in(subs, "bob", REFERENCE)
    held = _watch(*args)
    assert "0 graded" in held.stderr and "1 held" in held.stderr
    page = _text(feedback / "bob" / "feedback.html")
    assert "Queued" in page and "1 graded submission(s) in the last hour" in page
    assert _graded(db)["bob"] == 0
    # With a larger allowance, the waiting one is graded on the next run.
    _watch(*args[:-1], "3")
    assert _graded(db)["bob"] == load_course().exercise("01").points


# -- nbgrader: submit, then fetch_feedback --------------------------------------------------


def test_nbgrader_submit_then_fetch_feedback(nbgrader_class, tmp_path):
    # Each student is a unix user with a HOME of their own, as on a JupyterHub:
    # ownership proves who handed in (grader/intake/identity.py), and
    # nbgrader's submission cache (and so fetch_feedback) is per HOME.
    from grader.course.pitfalls import load_variants

    world, students, hand_in, nbgrader = nbgrader_class
    course = load_course()
    exercise = course.exercise("01")
    variant = load_variants(exercise, REPO_ROOT)["softmax-overflow"].source
    accounts = {"ada": students.user("ada"), "ben": students.user("ben")}
    roster = tmp_path / "roster.csv"
    roster.write_text("student_id,unix_user\n" + "".join(f"{s},{a}\n" for s, a in accounts.items()))
    for student, code in {"ada": REFERENCE, "ben": variant}.items():
        hand_in(accounts[student], code, student=student)

    db = tmp_path / "grades.db"
    watch = ("--exchange", str(world.exchange), "--db", str(db), "--roster", str(roster))
    done = _watch(*watch, env=world.env)
    assert "2 graded" in done.stderr, done.stderr
    assert _graded(db) == {"ada": exercise.points, "ben": pytest.approx(_graded(db)["ben"])}
    assert 0 < _graded(db)["ben"] < exercise.points

    def fetched(student: str) -> list[Path]:
        nbgrader(accounts[student], "fetch_feedback", "attention", student=student)
        folder = students.workdir(accounts[student]) / "attention" / "feedback"
        return list(folder.glob(f"*/{exercise.folder}.html"))

    pages = {student: _text(fetched(student)[0]) for student in accounts}
    assert "Graded at" in pages["ada"] and "[softmax-overflow]" not in pages["ada"]
    assert "[softmax-overflow]" in pages["ben"]
    assert course.pitfall("softmax-overflow").hint.en in pages["ben"]

    # A resubmission of the same files: already graded, nothing is run again, and feedback is there at once.
    hand_in(accounts["ada"], REFERENCE, student="ada")
    again = _watch(*watch, env=world.env)
    assert "0 graded" in again.stderr
    pages_ada = fetched("ada")
    assert len(pages_ada) == 2 and all("Already graded" in _text(p) or "Graded at" in _text(p) for p in pages_ada)


def test_a_watch_killed_mid_run_resumes_and_grades_each_once(tmp_path):
    import signal
    import sqlite3

    subs, db, feedback = tmp_path / "subs", tmp_path / "grades.db", tmp_path / "feedback"
    students = [f"s{i}" for i in range(6)]
    for i, student in enumerate(students):
        _hand_in(subs, student, REFERENCE if i % 2 else STUB)
    args = [str(subs), "--db", str(db), "--feedback", str(feedback), "--jobs", "1"]
    watch = subprocess.Popen([sys.executable, "-m", "grader", "watch", "-e", "01", *args], cwd=REPO_ROOT,
                             stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 600
    try:
        while time.monotonic() < deadline and watch.poll() is None:  # kill -9 once some, not all, are in
            if db.exists():
                try:
                    with sqlite3.connect(db) as con:
                        if con.execute("SELECT COUNT(*) FROM results").fetchone()[0] >= 1:
                            break
                except sqlite3.OperationalError:
                    pass
            time.sleep(0.05)
    finally:
        watch.send_signal(signal.SIGKILL)
        watch.wait()
    _watch(*args)
    with sqlite3.connect(db) as con:
        rows = con.execute("SELECT student, COUNT(*) FROM results GROUP BY student").fetchall()
        gradings = con.execute("SELECT COUNT(*) FROM watch_gradings").fetchone()[0]
        pending = con.execute("SELECT COUNT(*) FROM watch_submissions WHERE status != 'done'").fetchone()[0]
    assert dict(rows) == {s: 1 for s in students}  # every one graded, none twice
    assert gradings <= len(students) and pending == 0
    assert all((feedback / s / "feedback.html").is_file() for s in students)
