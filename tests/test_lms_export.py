"""Exports an LMS accepts (issue 15, item 3): Canvas's gradebook import,
Moodle's CSV grade import and `export csv --wide`, with the exact header
layouts, maxima, weights, and "not handed in" (a blank cell) kept apart
from 0."""
from __future__ import annotations

import csv

import pytest

from grader.course.model import _cross_reference_problems
from grader.gradebook import Gradebook, Key
from grader.report.lms import write_canvas_csv, write_moodle_csv, write_wide_csv

V = "2026.1"


@pytest.fixture
def titles(course):
    """One column per assignment, in course order (the first two: attention, layers)."""
    assert [a.id for a in course.assignments[:2]] == ["attention", "layers"]
    return [f"{a.title.en} ({a.id})" for a in course.assignments]


def _maxima(course) -> list[str]:
    return [f"{sum(course.exercise(e).points for e in a.exercises):g}" for a in course.assignments]


def _homework_max(course) -> float:
    return sum(course.exercise(e).points for a in course.assignments for e in a.exercises)


@pytest.fixture
def records(tmp_path, course):
    """ana: all of assignment 1, 06 of assignment 2 at 0 (the stub) and the midterm;
    ben: 01 only (02-05 not submitted), nothing else; the exam has 70 points."""
    with Gradebook(tmp_path / "grades.db") as book:
        def put(student, exercise, points, status="graded", max_points=None):
            book.record(Key(student, exercise, "missing" if status == "not_submitted" else f"h{exercise}", V),
                        points=points, max_points=max_points or course.exercise(exercise).points, status=status,
                        reason="", verdicts=[])
        for e in ("01", "02", "03", "04", "05"):
            put("ana", e, course.exercise(e).points / 2)
        put("ana", "06", 0.0)
        put("ana", "midterm", 35.0, max_points=70)
        put("ben", "01", 4.0)
        for e in ("02", "03", "04", "05"):
            put("ben", e, 0.0, status="not_submitted")
        return [r for r in book.records(V)]


def _read(path):
    return list(csv.reader(open(path, encoding="utf-8", newline="")))


def test_canvas_layout(records, course, titles, tmp_path):
    assert write_canvas_csv(records, course, tmp_path / "canvas.csv", every_assignment=True) == 2
    header, possible, ana, ben = _read(tmp_path / "canvas.csv")
    later = [""] * (len(titles) - 2)                               # assignments nobody handed in: blank
    assert header == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", *titles, "Midterm: attention (midterm)"]
    assert possible == ["Points Possible", "", "", "", "", *_maxima(course), "70"]
    assert possible[5:7] == ["65", "55"]
    assert ana == ["ana", "", "ana", "", "", "32.5", "0", *later, "35"]        # 06 at 0 is a grade; stacks: missing
    assert ben == ["ben", "", "ben", "", "", "4", "", *later, ""]
    write_canvas_csv(records, course, tmp_path / "login.csv", id_column="sis_login_id")
    assert _read(tmp_path / "login.csv")[2][:5] == ["ana", "", "", "ana", ""]


def test_moodle_layout(records, course, titles, tmp_path):
    assert write_moodle_csv(records, course, tmp_path / "moodle.csv", id_column="email", every_assignment=True) == 2
    rows = _read(tmp_path / "moodle.csv")
    later = [""] * (len(titles) - 2)
    assert rows == [["Email address", *titles, "Midterm: attention (midterm)"],
                    ["ana", "32.5", "0", *later, "35"],
                    ["ben", "4", "", *later, ""]]


def test_assignments_with_no_result_are_left_out_unless_asked_for(records, course, titles, tmp_path):
    """Issue 34, item 9: importing blank columns creates empty assignments in the LMS."""
    write_canvas_csv(records, course, tmp_path / "canvas.csv")
    write_moodle_csv(records, course, tmp_path / "moodle.csv")
    for path, first in ((tmp_path / "canvas.csv", 5), (tmp_path / "moodle.csv", 1)):
        header, *rows = _read(path)
        assert header[first:] == [*titles[:2], "Midterm: attention (midterm)"]     # the later ones: no result yet
        assert all(len(row) == len(header) for row in rows)


def test_an_export_refuses_a_class_partly_graded_under_an_older_version(tmp_path, course):
    """Issue 34, item 3: after a version bump, students not regraded silently vanished from every export."""
    import subprocess
    import sys

    from grader.course import REPO_ROOT

    current = course.course.version
    with Gradebook(tmp_path / "grades.db") as book:
        for student, version in (("ana", current), ("ben", "2025.9")):
            book.record(Key(student, "01", "h", version), points=4.0, max_points=10.0, status="graded", reason="",
                        verdicts=[])
    for kind in ("csv", "canvas", "moodle"):
        def export(*extra: str) -> subprocess.CompletedProcess:
            return subprocess.run([sys.executable, "-m", "grader", "export", kind, str(tmp_path / f"{kind}.csv"),
                                   "--db", str(tmp_path / "grades.db"), *extra], cwd=REPO_ROOT,
                                  capture_output=True, text=True, timeout=300)
        refused = export()
        assert refused.returncode == 2 and "ben: only under course version 2025.9" in refused.stderr
        assert "--allow-partial" in refused.stderr and not (tmp_path / f"{kind}.csv").exists()
        allowed = export("--allow-partial")
        assert allowed.returncode == 0 and "ben" in allowed.stdout + allowed.stderr
        assert "ana" in (tmp_path / f"{kind}.csv").read_text() and "ben" not in (tmp_path / f"{kind}.csv").read_text()


def test_wide_csv_without_weights_has_a_max_and_blank_missing_cells(records, course, tmp_path):
    write_wide_csv(records, tmp_path / "wide.csv", course)
    header, ana, ben = _read(tmp_path / "wide.csv")
    assert header[0] == "student" and header[-3:] == ["midterm (70)", "total", "max"]
    assert header[1] == "01 softmax (10)" and len(header) == 1 + len(course.exercises) + 3
    total_max = f"{_homework_max(course) + 70:g}"
    assert ana[-2:] == ["67.5", total_max]                     # 32.5 + 0 + 35 of every assignment's points + 70
    assert ben[1:3] == ["4", ""] and ben[-3:] == ["", "4", total_max]


def test_wide_csv_with_weights(records, course, tmp_path):
    weights = {"attention": 20, "layers": 20}          # the rest share 30
    rest = [a for a in course.assignments if a.id not in weights]
    weights.update({a.id: 30 / len(rest) for a in rest})
    weighted = course.model_copy(update={
        "assignments": [a.model_copy(update={"weight": weights[a.id]}) for a in course.assignments],
        "exams": [x.model_copy(update={"weight": 30}) for x in course.exams]})
    assert _cross_reference_problems(weighted) == []
    write_wide_csv(records, tmp_path / "wide.csv", weighted)
    header, ana, ben = _read(tmp_path / "wide.csv")
    assert header[1] == "01 softmax (10, weight 3.077)"          # 20 * 10/65
    assert header[-3:] == ["midterm (70, weight 30)", "total", "max"]
    assert ana[-2:] == ["25", "100"]                           # 20 * 32.5/65 + 20 * 0 + 30 * 35/70
    assert ben[-2:] == [f"{20 * 4 / 65:.2f}", "100"]


def test_weights_on_some_items_only_are_refused(course):
    partial = course.model_copy(update={
        "assignments": [course.assignments[0].model_copy(update={"weight": 50}), *course.assignments[1:]]})
    assert any("weight to every assignment and exam" in m for _, m in _cross_reference_problems(partial))


def test_the_commands_write_the_same_layouts(records, course, tmp_path):
    from typer.testing import CliRunner

    from grader.cli import app

    db = str(tmp_path / "grades.db")
    for kind, first in (("canvas", "Student"), ("moodle", "ID number")):
        result = CliRunner().invoke(app, ["export", kind, str(tmp_path / f"{kind}.csv"), "--db", db])
        assert result.exit_code == 0, result.output
        assert _read(tmp_path / f"{kind}.csv")[0][0] == first and "2 students" in result.output
