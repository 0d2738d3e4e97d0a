"""The HTML report: ``index.html`` for the class, ``students/<id>.html``
for each student. Templates are Jinja2 with autoescaping on."""
from __future__ import annotations

import hashlib
import re
from collections import Counter, defaultdict
from pathlib import Path

from jinja2 import Environment, PackageLoader, select_autoescape

from grader.course import Course
from grader.feedback import STATUSES, beyond_status, status_text
from grader.gradebook import Record
from grader.report import plots, svg
from grader.report.feedback import exercise_feedback, instructor_details

# Kept for callers that want English words only; the one table is grader.feedback.STATUSES.
STATUS_TEXT = {status: text.en for status, text in STATUSES.items()}


def environment() -> Environment:
    """The report templates (grader/report/templates), autoescaped, with
    their filters: ``pct``, ``pts`` and ``placeholders``."""
    env = Environment(loader=PackageLoader("grader.report", "templates"), autoescape=select_autoescape(["html"]))
    env.filters["pct"] = lambda x: f"{100 * x:.0f}%"
    env.filters["pts"] = lambda x: f"{x:.2f}".rstrip("0").rstrip(".")
    env.filters["beyond_status"] = lambda record: beyond_status(record.status, record.reason)
    # An exam question's {size}: each student saw their own number there.
    env.filters["placeholders"] = lambda text: re.sub(r"\{(\w+)\}", "⟨\\1⟩", text)
    return env


def page_name(student: str) -> str:
    """A file name for a student's page: the id when it is plain, else a
    cleaned id with a hash (ids come from folder names, which students pick)."""
    clean = re.sub(r"[^A-Za-z0-9._@-]", "_", student)
    if clean == student and not student.startswith("."):
        return student
    return f"{clean.strip('.')}-{hashlib.sha256(student.encode()).hexdigest()[:8]}"


def _by_student(records: list[Record]) -> dict[str, dict[str, Record]]:
    table: dict[str, dict[str, Record]] = defaultdict(dict)
    for record in records:
        table[record.key.student][record.key.exercise] = record
    return dict(sorted(table.items()))


def _pitfalls_per_student(rows: dict[str, Record]) -> set[str]:
    return {p for r in rows.values() for v in r.verdicts if not v["passed"] for p in v["pitfalls"][:1]}


def write_html_report(course: Course, records: list[Record], out: Path, *,
                      exam_stats: list[dict] | None = None) -> Path:
    """Write the class overview and the students' pages; return index.html.

    ``records``: exercise results (exam rows are left out: an exam shows in
    the overview through ``exam_stats``, grader/exams/stats.py)."""
    from grader.exams.records import is_exam_row

    out.mkdir(parents=True, exist_ok=True)
    (out / "students").mkdir(exist_ok=True)
    (out / "img").mkdir(exist_ok=True)
    env = environment()
    records = [r for r in records if not is_exam_row(course, r.key.exercise)]
    students = _by_student(records)
    exercise_ids = sorted({r.key.exercise for r in records})
    exercises = [course.exercise(i) for i in exercise_ids]
    max_total = sum(e.points for e in exercises) or 1.0

    totals = {s: sum(r.points for r in rows.values()) for s, rows in students.items()}
    exercise_rate = {
        e.id: sum(rows[e.id].points / rows[e.id].max_points for rows in students.values() if e.id in rows)
        / max(1, sum(e.id in rows for rows in students.values()))
        for e in exercises
    }
    check_stats: dict[str, list[bool]] = defaultdict(list)
    check_text: dict[str, dict] = {}
    for record in records:
        for v in record.verdicts:
            check_stats[v["check_id"]].append(v["passed"])
            check_text[v["check_id"]] = v["message"]
    check_rows = sorted(((cid, sum(p) / len(p), len(p), check_text[cid]) for cid, p in check_stats.items()),
                        key=lambda row: (row[1], row[0]))
    pitfall_students = Counter(p for rows in students.values() for p in _pitfalls_per_student(rows))

    figures = {
        "histogram": plots.score_histogram([100 * t / max_total for t in totals.values()], out / "img" / "scores.png"),
        "exercises": plots.pass_rates([e.folder for e in exercises], [exercise_rate[e.id] for e in exercises],
                                      out / "img" / "exercises.png", "mean score (%)"),
        "pitfalls": plots.pitfall_counts(pitfall_students, out / "img" / "pitfalls.png"),
    } if records else {}
    hints = {p.id: p.hint for p in course.pitfalls}
    index = env.get_template("index.html").render(
        course=course, exercises=exercises, students=students, totals=totals, max_total=max_total,
        check_rows=check_rows, pitfalls=pitfall_students.most_common(), hints=hints, figures=figures,
        status_text=status_text, pages={student: page_name(student) for student in students},
        exam_stats=exam_stats or [], details=instructor_details(records),
    )
    (out / "index.html").write_text(index, encoding="utf-8")
    errors = env.get_template("errors.html").render(course=course, details=instructor_details(records))
    (out / "errors.html").write_text(errors, encoding="utf-8")

    page = env.get_template("student.html")
    for student, rows in students.items():
        figure = svg.score_bars(
            [e.id for e in exercises],
            [rows[e.id].points / rows[e.id].max_points if e.id in rows else 0.0 for e in exercises],
            [exercise_rate[e.id] for e in exercises],
        )
        pictures = {
            exercise_id: [(data["title"], svg.side_by_side(data["student"], data["expected"], data["title"]["en"]))
                          for data in record.figures.values()]
            for exercise_id, record in rows.items() if record.figures
        }
        feedback = {exercise_id: exercise_feedback(record, hints) for exercise_id, record in rows.items()}
        html = page.render(course=course, student=student, exercises=exercises, rows=rows,
                           total=totals[student], max_total=max_total, hints=hints, figure=figure,
                           pictures=pictures, status_text=status_text, feedback=feedback)
        (out / "students" / f"{page_name(student)}.html").write_text(html, encoding="utf-8")
    return out / "index.html"
