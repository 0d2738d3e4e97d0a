"""Plain exports: a CSV for the LMS and a JSON of every check."""
from __future__ import annotations

import csv
import json
from pathlib import Path

from grader.gradebook import Record
from grader.intake.names import visible

REASON_CHARS = 300   # grades.csv is for people and LMS imports; results.json has the whole reason


def points_text(value: float) -> str:
    """Points as every page and file of the course writes them: at most two
    decimals, no float noise (64.99999999999996 -> 65, 63.625 -> 63.62)."""
    return f"{round(value, 2):.2f}".rstrip("0").rstrip(".")


_points = points_text


def _cell(text: str) -> str:
    """A reason as one spreadsheet cell: bounded, control bytes shown, and never
    a formula (a spreadsheet runs a cell starting with = + - @)."""
    text = visible(text, REASON_CHARS)
    return "'" + text if text[:1] in ("=", "+", "-", "@") else text


def _adjustment_text(r: Record) -> str:
    """"by prof at 2026-...: +2 (regrade request)" (grades.csv column adjustment), or ""."""
    a = r.adjustment
    return _cell(f"by {a['by']} at {a['at']}: {a['change']} ({a['reason']})") if a else ""


def write_grades_csv(records: list[Record], path: Path) -> None:
    """student, exercise, points, max_points, status, reason (why a result is
    not graded normally, e.g. unreadable), then graded_points (the judge's
    score, before the instructor's adjustment) and the adjustment, then the
    homework late policy's verdict: unpenalised_points (before it), late_min,
    late_factor and lateness (its note; "lateness unknown: ..." when no
    submission time is on record; empty without a due time): one row per result."""
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(["student", "exercise", "points", "max_points", "status", "reason", "graded_points",
                         "adjustment", "unpenalised_points", "late_min", "late_factor", "lateness"])
        for r in sorted(records, key=lambda r: (r.key.student, r.key.exercise)):
            graded = r.points if r.graded_points is None else r.graded_points
            late = r.lateness or {}
            writer.writerow([r.key.student, r.key.exercise, _points(r.points), _points(r.max_points), r.status,
                             _cell(r.reason) if r.status != "graded" else "",
                             _points(graded), _adjustment_text(r),
                             _points(late.get("unpenalised_points", r.points)),
                             _points(late["late_min"]) if late.get("known") else "",
                             f"{late['factor']:g}" if late else "", _cell(late.get("note", ""))])


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
            # the judge's score before the instructor's adjustment (grader adjust), and that adjustment
            "graded_points": r.points if r.graded_points is None else r.graded_points,
            "adjustment": r.adjustment,
            # homework deadlines (grader/run/deadlines.py): submitted_at, deadline, source, late_min, flagged,
            # factor, note, known, unpenalised_points; null when the assignment has no due time
            "lateness": r.lateness,
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
