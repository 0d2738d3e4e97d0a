"""A whole term in one test (issue 15): the students' release, two
assignments with due times, one late student and one with an extension,
an adjustment, a regrade, the exports an LMS takes, the similarity list
and the feedback handed back to each student.

Three students clone the release and hand in exercise 01 (assignment
`attention`) and 07 (assignment `layers`):

- ana: both on time, both correct;
- ben: `attention` two hours late (penalty), both correct; later regraded;
- cy:  `layers` a day late, but with a two-day extension; hands in the
  untouched stub for 07, which the instructor then adjusts to 3 points.
"""
from __future__ import annotations

import csv
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from grader.course import REPO_ROOT
from grader.gradebook import Gradebook

POLICY = {"action": "penalty", "grace_min": 0, "penalty_per_min": 0.001}
DUE = {"attention": "2026-03-20T23:59:00+08:00", "layers": "2026-04-03T23:59:00+08:00"}


def _grader(*args, cwd: Path = REPO_ROOT) -> subprocess.CompletedProcess:
    run = subprocess.run([sys.executable, "-m", "grader", *map(str, args)], cwd=cwd, capture_output=True, text=True,
                         timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    return run


def _rows(path: Path) -> list[list[str]]:
    return list(csv.reader(open(path, encoding="utf-8", newline="")))


def _course(tmp_path: Path) -> Path:
    """course.yaml with due times on the first two assignments (exams left out),
    beside links to the repository's exercises, solutions and grader."""
    data = yaml.safe_load((REPO_ROOT / "course.yaml").read_text(encoding="utf-8"))
    data.pop("exams", None), data.pop("exam_settings", None)
    for assignment in data["assignments"]:
        if assignment["id"] in DUE:
            assignment.update(due=DUE[assignment["id"]], late_policy=POLICY)
    root = tmp_path / "course"
    root.mkdir()
    for name in ("exercises", "solutions", "grader"):
        (root / name).symlink_to(REPO_ROOT / name)
    (root / "course.yaml").write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    return root / "course.yaml"


@pytest.mark.skipif(shutil.which("git") is None, reason="the release step needs git")
def test_a_whole_term(course, tmp_path):
    release = tmp_path / "release"
    _grader("release", "student", release, "--through", "layers", "--no-notebooks")
    softmax, pe = course.exercise("01"), course.exercise("07")
    klass = tmp_path / "class"
    for student in ("ana", "ben", "cy"):       # each clones the release and fills in the stubs
        shutil.copytree(release / "exercises", klass / student / "exercises", ignore=shutil.ignore_patterns(".git"))
        for exercise in (softmax, pe):
            if (student, exercise.id) != ("cy", "07"):
                shutil.copyfile(REPO_ROOT / "solutions" / exercise.folder / exercise.module,
                                klass / student / "exercises" / exercise.folder / exercise.module)
    stamps = tmp_path / "stamps.csv"
    stamps.write_text("student_id,assignment,submitted_at\n"
                      "ana,attention,2026-03-20T20:00:00+08:00\nana,layers,2026-04-03T20:00:00+08:00\n"
                      "ben,attention,2026-03-21T01:59:00+08:00\nben,layers,2026-04-03T22:00:00+08:00\n"
                      "cy,attention,2026-03-20T12:00:00+08:00\ncy,layers,2026-04-04T23:59:00+08:00\n")
    extensions = tmp_path / "extensions.csv"
    extensions.write_text("student_id,assignment,extra_min\ncy,layers,2880\n")
    course_file, db, out = _course(tmp_path), tmp_path / "grades.db", tmp_path / "grading"
    common = ["--course", course_file, "--db", db, "--out", out, "-e", "01", "-e", "07", "-j", "1",
              "--timestamps", stamps, "--extensions", extensions]
    graded = _grader("grade", klass, *common)
    assert "graded 6 result(s)" in graded.stderr and "1 late student(s)" in graded.stderr

    # The instructor gives cy 3 points for 07 by hand, then regrades ben.
    _grader("adjust", "cy", "07", "--points", "3", "--reason", "the idea is right", "--by", "prof", "--db", db,
            "--course", course_file)
    regraded = _grader("grade", klass, *common, "--student", "ben", "--force")
    assert "graded 2 result(s)" in regraded.stderr
    with Gradebook(db) as book:
        assert sorted(old.key.student for old, _ in book.superseded()) == ["ben", "ben"]

    grades = {(r["student"], r["exercise"]): r for r in csv.DictReader(open(out / "grades.csv", encoding="utf-8"))}
    assert len(grades) == 6                                         # the whole class after the regrade
    ben01, cy07 = grades[("ben", "01")], grades[("cy", "07")]
    assert ben01["points"] == f"{softmax.points * 0.88:g}"          # 120 min late: -12 %
    assert ben01["unpenalised_points"] == f"{softmax.points:g}" and ben01["late_min"] == "120"
    assert cy07["points"] == "3" and cy07["graded_points"] == "0"   # adjusted by hand; the judge gave 0
    assert cy07["lateness"] == "on time (extended deadline)" and "by prof" in cy07["adjustment"]

    _grader("export", "canvas", tmp_path / "canvas.csv", "--db", db, "--course", course_file)
    _grader("export", "moodle", tmp_path / "moodle.csv", "--db", db, "--course", course_file)
    canvas, moodle = _rows(tmp_path / "canvas.csv"), _rows(tmp_path / "moodle.csv")
    assert canvas[0][:7] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section",
                             "Assignment 1: attention (attention)",
                             "Assignment 2: multi-head attention and the Transformer's layers (layers)"]
    assert canvas[1][:7] == ["Points Possible", "", "", "", "", "65", "55"]
    by_student = {row[0]: row for row in canvas[2:]}
    assert by_student["ben"][5:7] == [f"{softmax.points * 0.88:g}", f"{pe.points:g}"]
    assert len(canvas[0]) == 7      # no column for the assignments with no result yet (issue 34, item 9)
    assert by_student["cy"][5:7] == [f"{softmax.points:g}", "3"]
    assert {row[0]: row[1:3] for row in moodle[1:]} == {s: row[5:7] for s, row in by_student.items()}

    # ana and ben handed in the same 01 (the reference, here): the similarity list says so.
    alike = _grader("similarity", klass, "-e", "01", "--course", course_file)
    assert "'ana' ~ 'ben'" in alike.stdout

    # One folder per student to hand back, holding only that student's results.
    _grader("feedback", tmp_path / "handback", "--db", db, "--course", course_file)
    for student in ("ana", "ben", "cy"):
        folder = tmp_path / "handback" / student
        assert (folder / "index.html").is_file() and (folder / "feedback.md").is_file()
        others = {"ana", "ben", "cy"} - {student}
        text = (folder / "index.html").read_text(encoding="utf-8") + (folder / "feedback.md").read_text(encoding="utf-8")
        assert not any(f">{other}<" in text or f" {other} " in text for other in others), student
