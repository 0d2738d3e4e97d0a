"""Helpers shared by the tests that run `grader grade` end to end
(tests/test_grading.py, tests/redteam/, tests/test_hardening_*.py)."""
from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

from grader.course import REPO_ROOT, Course
from grader.gradebook import Gradebook
from grader.course.pitfalls import load_variants


CLASS_SIZE = 14  # the exercise-01 class of conftest's `submissions` fixture


def write_class(course: Course, root: Path, students: int) -> Path:
    """A class for exercise 01 under ``root``: correct, stub, broken, each pitfall, in turn."""
    exercise = course.exercise("01")
    sources = [(REPO_ROOT / "solutions" / exercise.folder / exercise.module).read_text(),
               (REPO_ROOT / "exercises" / exercise.folder / exercise.module).read_text(),
               "def softmax(x, dim=-1)\n    return x\n",
               *(v.source for v in load_variants(exercise, REPO_ROOT).values())]
    for i in range(students):
        folder = root / f"s{i:02d}" / exercise.folder
        folder.mkdir(parents=True)
        (folder / exercise.module).write_text(sources[i % len(sources)])
    return root


def grade_cli(submissions: Path, db: Path, out: Path, *extra: str, exercises: tuple[str, ...] = ("01",),
              jobs: int = 2, **popen) -> subprocess.Popen:
    """Start `python -m grader grade` on ``submissions`` (stdout and stderr together, as text)."""
    cmd = [sys.executable, "-m", "grader", "grade", str(submissions), "--jobs", str(jobs),
           "--db", str(db), "--out", str(out), *extra]
    for exercise in exercises:
        cmd += ["-e", exercise]
    return subprocess.Popen(cmd, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **popen)


def book_version(db: Path) -> str:
    return sqlite3.connect(db).execute("SELECT DISTINCT course_version FROM results").fetchone()[0]


def results(db: Path) -> dict:
    """The gradebook's newest results, after asserting its integrity check passes."""
    with Gradebook(db) as book:
        assert book.integrity_problems() == []
        return {(r.key.student, r.key.exercise, r.key.content_hash): (r.points, r.status, r.reason, r.verdicts)
                for r in book.records(book_version(db))}


def row_count(db: Path) -> int:
    """Rows in the results table (0 while the file is missing or being created)."""
    try:
        return sqlite3.connect(db, timeout=1).execute("SELECT COUNT(*) FROM results").fetchone()[0]
    except sqlite3.DatabaseError:
        return 0


def children(pid: int) -> list[int]:
    with open(f"/proc/{pid}/task/{pid}/children") as fh:
        return [int(child) for child in fh.read().split()]


def state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return "gone"
