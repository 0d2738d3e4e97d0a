"""Plain exports: a CSV for the LMS and a JSON of every check."""
from __future__ import annotations

import csv
import json
from pathlib import Path

from grader.gradebook import Record
from grader.intake.names import visible

REASON_CHARS = 300   # grades.csv is for people and LMS imports; results.json has the whole reason


def _points(value: float) -> str:
    return f"{value:.2f}".rstrip("0").rstrip(".")


def _cell(text: str) -> str:
    """A reason as one spreadsheet cell: bounded, control bytes shown, and never
    a formula (a spreadsheet runs a cell starting with = + - @)."""
    text = visible(text, REASON_CHARS)
    return "'" + text if text[:1] in ("=", "+", "-", "@") else text


def write_grades_csv(records: list[Record], path: Path) -> None:
    """student, exercise, points, max_points, status, reason: one row per
    result (the reason says why a result is not graded normally, e.g. unreadable)."""
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(["student", "exercise", "points", "max_points", "status", "reason"])
        for r in sorted(records, key=lambda r: (r.key.student, r.key.exercise)):
            writer.writerow([r.key.student, r.key.exercise, _points(r.points), _points(r.max_points), r.status,
                             _cell(r.reason) if r.status != "graded" else ""])


def write_wide_csv(records: list[Record], path: Path, course) -> None:
    """student, one column per exercise of the course and per exam with
    results (its total after the late policy), total: the shape most LMS
    gradebook imports expect."""
    points: dict[str, dict[str, float]] = {}
    maxima: dict[str, float] = {}
    for r in records:
        points.setdefault(r.key.student, {})[r.key.exercise] = r.points
        maxima[r.key.exercise] = max(maxima.get(r.key.exercise, 0.0), r.max_points)
    exams = [x for x in course.exams if x.id in maxima]
    exercises = [e.id for e in course.exercises] + [x.id for x in exams]
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(["student", *(f"{e.id} {e.slug} ({e.points:g})" for e in course.exercises),
                         *(f"{x.id} ({maxima[x.id]:g})" for x in exams), "total"])
        for student, row in sorted(points.items()):
            writer.writerow([student, *(_points(row.get(e, 0.0)) for e in exercises), _points(sum(row.values()))])


def write_results_json(records: list[Record], path: Path) -> None:
    """Every result with its checks: id, passed, points, message, pitfall ids.

    Fields are listed one by one: a verdict's ``instructor_detail`` (the raw
    error, which may quote hidden inputs) is never exported."""
    data = [
        {
            "student": r.key.student,
            "exercise": r.key.exercise,
            "content_hash": r.key.content_hash,
            "course_version": r.key.course_version,
            "points": r.points,
            "max_points": r.max_points,
            "status": r.status,
            "reason": r.reason,
            "checks": [
                {"id": v["check_id"], "passed": v["passed"], "points": v["points"], "max_points": v["max_points"],
                 "message": v["message"], "reason": v["reason"], "pitfalls": v["pitfalls"],
                 "confirmed": v.get("confirmed", []), "possible": v.get("possible", [])}
                for v in r.verdicts
            ],
        }
        for r in sorted(records, key=lambda r: (r.key.student, r.key.exercise))
    ]
    path.write_text(json.dumps(data, indent=1, ensure_ascii=False), encoding="utf-8")
