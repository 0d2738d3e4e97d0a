"""Grades in the CSV layouts that LMS gradebook imports accept.

One column per graded item: each assignment of course.yaml (the sum of its
exercises' points, after adjustments and late penalties) and each exam with
results (its total). A student who handed in nothing for an item gets a
**blank cell**, never 0: for both LMS a blank cell is "no grade" (nothing is
imported over what is there), while 0 is a grade. A student who handed in
some of an assignment's exercises gets 0 for the others.

Layouts, from the LMS documentation:

- Canvas, Grades > Import: the columns ``Student``, ``ID``, ``SIS User ID``,
  ``SIS Login ID``, ``Section``, then one per assignment (a new name creates
  the assignment); the second row, ``Points Possible``, gives each column's
  maximum, as Canvas's own gradebook export writes it. Only one of the
  student identifiers is needed. See "Import a CSV file to Carmen Grades"
  (Ohio State, https://teaching.resources.osu.edu/toolsets/carmencanvas/guides/calculating-final-grades/import-csv-file-carmen-grades)
  and VCU's notes on the gradebook CSV
  (https://ts.vcu.edu/askit/teaching-and-learning/canvas/faculty/grading-faculty/gradebook-action-menu-faculty/).
- Moodle, Grade administration > Import > CSV file: a header row, one
  identifier column that the import maps to a user field ("Map from" the
  column, "Map to" useridnumber, useremail or username), and one column per
  grade item, mapped to an item at import. See MoodleDocs "Grade import"
  (https://docs.moodle.org/311/en/Grade_import).

Weights (``weight:`` of assignments and exams in course.yaml) are for the
course total of ``grader export csv --wide``: an LMS weighs its own columns.
"""
from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

from grader.course import Course
from grader.gradebook import Record

CANVAS_IDS = {"sis_user_id": "SIS User ID", "sis_login_id": "SIS Login ID", "id": "ID"}
MOODLE_IDS = {"idnumber": "ID number", "email": "Email address", "username": "Username"}
MOODLE_MAP_TO = {"idnumber": "useridnumber", "email": "useremail", "username": "username"}   # the import's "Map to"
NOT_HANDED_IN = {"not_submitted"}


@dataclass(frozen=True)
class Item:
    """One graded item: an assignment (its exercises) or an exam (its total)."""

    id: str
    title: str
    exercises: tuple[str, ...]
    max_points: float
    weight: float | None


def items(course: Course, records: list[Record], every_assignment: bool = True) -> list[Item]:
    """The course's assignments (without ``every_assignment``, only those
    with a result: an LMS import creates a column for each, so one not yet
    released would appear empty), then its exams that have results."""
    graded = {r.key.exercise: r.max_points for r in records}
    found = [Item(a.id, a.title.en, tuple(a.exercises), sum(course.exercise(e).points for e in a.exercises), a.weight)
             for a in course.assignments if every_assignment or graded.keys() & set(a.exercises)]
    found += [Item(x.id, x.title.en, (x.id,), graded[x.id], x.weight) for x in course.exams if x.id in graded]
    return found


def item_points(item: Item, results: dict[str, Record]) -> float | None:
    """The student's points for ``item``, or None when they handed in none of it."""
    handed_in = [results[e] for e in item.exercises if e in results and results[e].status not in NOT_HANDED_IN]
    return sum(r.points for r in handed_in) if handed_in else None


def by_student(records: list[Record]) -> dict[str, dict[str, Record]]:
    table: dict[str, dict[str, Record]] = {}
    for r in records:
        table.setdefault(r.key.student, {})[r.key.exercise] = r
    return table


def _cell(value: float | None) -> str:
    return "" if value is None else f"{value:.2f}".rstrip("0").rstrip(".")


def write_canvas_csv(records: list[Record], course: Course, path: Path, id_column: str = "sis_user_id",
                     every_assignment: bool = False) -> int:
    """Canvas's gradebook import; returns the number of students written.
    Our student id goes in ``id_column`` (and in Student, for reading)."""
    graded = items(course, records, every_assignment)
    header = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", *(f"{i.title} ({i.id})" for i in graded)]
    students = by_student(records)
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(header)
        writer.writerow(["Points Possible", "", "", "", "", *(_cell(i.max_points) for i in graded)])
        for student, results in sorted(students.items()):
            ids = {name: (student if key == id_column else "") for key, name in CANVAS_IDS.items()}
            writer.writerow([student, ids["ID"], ids["SIS User ID"], ids["SIS Login ID"], "",
                             *(_cell(item_points(i, results)) for i in graded)])
    return len(students)


def write_moodle_csv(records: list[Record], course: Course, path: Path, id_column: str = "idnumber",
                     every_assignment: bool = False) -> int:
    """Moodle's CSV grade import; returns the number of students written."""
    graded = items(course, records, every_assignment)
    students = by_student(records)
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow([MOODLE_IDS[id_column], *(f"{i.title} ({i.id})" for i in graded)])
        for student, results in sorted(students.items()):
            writer.writerow([student, *(_cell(item_points(i, results)) for i in graded)])
    return len(students)


def weighted_total(graded: list[Item], results: dict[str, Record]) -> tuple[float, float]:
    """(total, maximum): with weights, each item counts ``weight`` times its
    share of its maximum (the maximum is the sum of the weights); without,
    points as they are. An item not handed in counts 0 in the total."""
    if any(i.weight is not None for i in graded):
        total = sum(i.weight * (item_points(i, results) or 0.0) / i.max_points for i in graded)
        return total, sum(i.weight for i in graded)
    return sum(item_points(i, results) or 0.0 for i in graded), sum(i.max_points for i in graded)


def write_wide_csv(records: list[Record], path: Path, course: Course) -> None:
    """``export csv --wide``: one row per student; a column per exercise and
    per exam (blank when not handed in: missing is not 0), then ``total``
    and ``max``. With weights in course.yaml each header names the column's
    weight on the total (an exercise's: its assignment's weight, split by
    points), and the total is weighted."""
    graded = items(course, records)
    weighted = any(i.weight is not None for i in graded)
    share: dict[str, float] = {}
    for i in graded:
        for e in i.exercises:
            points = course.exercise(e).points if e != i.id else i.max_points
            share[e] = i.weight * points / i.max_points if weighted else points
    suffix = (lambda c: f", weight {share[c]:.4g}" if weighted and c in share else "")
    columns = [(e.id, f"{e.id} {e.slug} ({e.points:g}{suffix(e.id)})") for e in course.exercises]
    columns += [(i.id, f"{i.id} ({i.max_points:g}{suffix(i.id)})") for i in graded if i.exercises == (i.id,)]
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(["student", *(name for _, name in columns), "total", "max"])
        for student, results in sorted(by_student(records).items()):
            cells = [_cell(results[c].points) if c in results and results[c].status not in NOT_HANDED_IN else ""
                     for c, _ in columns]
            total, maximum = weighted_total(graded, results)
            writer.writerow([student, *cells, _cell(total), _cell(maximum)])
