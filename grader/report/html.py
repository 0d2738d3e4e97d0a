"""The HTML report: ``index.html`` for the class, ``students/<id>.html``
for each student. Templates are Jinja2 with autoescaping on."""
from __future__ import annotations

import base64
import hashlib
import re
from collections import Counter, defaultdict
from pathlib import Path

from jinja2 import Environment

from grader.course import Course
from grader.feedback import STATUSES, status_text
from grader.gradebook import Record
from grader.report import plots
from grader.report.feedback import instructor_details, to_review
from grader.report.student_page import render_student_page
from grader.report.templating import environment  # noqa: F401  (callers import it from here)

# Kept for callers that want English words only; the one table is grader.feedback.STATUSES.
STATUS_TEXT = {status: text.en for status, text in STATUSES.items()}


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


# Results that say nothing about how hard a check is: nothing was tried.
NOT_ATTEMPTED = ("not_submitted", "not_started", "unreadable")


def check_difficulty(records: list[Record]) -> list[tuple[str, float, int, dict]]:
    """(check id, pass rate, students, message), hardest first, over the
    students who attempted the exercise: a stub left as it was, a missing or
    unreadable submission says how far a student got, not how hard a check is."""
    outcomes: dict[str, list[bool]] = defaultdict(list)
    text: dict[str, dict] = {}
    for record in records:
        if record.status in NOT_ATTEMPTED:
            continue
        for verdict in record.verdicts:
            outcomes[verdict["check_id"]].append(verdict["passed"])
            text[verdict["check_id"]] = verdict["message"]
    return sorted(((cid, sum(p) / len(p), len(p), text[cid]) for cid, p in outcomes.items()),
                  key=lambda row: (row[1], row[0]))


def exam_rows(course: Course, records: list[Record]) -> dict[str, dict[str, Record]]:
    """student -> exam id -> the exam's total row (grader/exams/records.py)."""
    exam_ids = {exam.id for exam in course.exams}
    table: dict[str, dict[str, Record]] = defaultdict(dict)
    for record in records:
        if record.key.exercise in exam_ids:
            table[record.key.student][record.key.exercise] = record
    return table


def write_html_report(course: Course, records: list[Record], out: Path, *,
                      exam_stats: list[dict] | None = None, students_only: list[str] | None = None,
                      similarity: tuple[list, str] | None = None) -> Path:
    """Write the class overview and the students' pages; return index.html.

    ``records``: exercise results; an exam's total rows, when among them,
    give the exam's column in the class table and its section on each
    student's page (its statistics come through ``exam_stats``,
    grader/exams/stats.py). ``students_only``: write these students' pages
    and nothing else (``grader feedback``, grader/report/handback.py).
    ``similarity``: (grader/report/similarity.py reports, why none) for the
    overview's section on suspiciously alike submissions."""
    from grader.exams.records import is_exam_row

    out.mkdir(parents=True, exist_ok=True)
    (out / "students").mkdir(exist_ok=True)
    env = environment()
    exams = exam_rows(course, records)
    exam_list = [exam for exam in course.exams if any(exam.id in rows for rows in exams.values())]
    records = [r for r in records if not is_exam_row(course, r.key.exercise)]
    students = _by_student(records)
    for student in exams:
        students.setdefault(student, {})
    students = dict(sorted(students.items()))
    exercise_ids = sorted({r.key.exercise for r in records})
    exercises = [course.exercise(i) for i in exercise_ids]
    max_total = sum(e.points for e in exercises) or 1.0

    totals = {s: round(sum(r.points for r in rows.values()), 6) for s, rows in students.items()}
    exercise_rate = {
        e.id: sum(rows[e.id].points / rows[e.id].max_points for rows in students.values() if e.id in rows)
        / max(1, sum(e.id in rows for rows in students.values()))
        for e in exercises
    }
    hints = {p.id: p.hint for p in course.pitfalls}
    if students_only is None:
        _write_overview(env, course, records, out, students=students, exercises=exercises, totals=totals,
                        max_total=max_total, exercise_rate=exercise_rate, hints=hints, exams=exams,
                        exam_list=exam_list, exam_stats=exam_stats or [], similarity=similarity)

    for student, rows in students.items():
        if students_only is not None and student not in students_only:
            continue
        html = render_student_page(course, student, exercises, rows, exercise_rate, env=env,
                                   exams=[(exam, exams.get(student, {}).get(exam.id)) for exam in exam_list],
                                   standalone=students_only is not None)
        (out / "students" / f"{page_name(student)}.html").write_text(html, encoding="utf-8")
    return out / "index.html"


def _data_uri(svg: Path) -> str:
    return "data:image/svg+xml;base64," + base64.b64encode(svg.read_bytes()).decode("ascii")


def _write_overview(env: Environment, course: Course, records: list[Record], out: Path, *, students: dict,
                    exercises: list, totals: dict, max_total: float, exercise_rate: dict, hints: dict,
                    exams: dict, exam_list: list, exam_stats: list[dict],
                    similarity: tuple[list, str] | None) -> None:
    """index.html (the class) and errors.html (instructor only)."""
    (out / "img").mkdir(exist_ok=True)
    pitfall_students: dict[str, list[str]] = defaultdict(list)
    for student, rows in students.items():
        for pitfall_id in sorted(_pitfalls_per_student(rows)):
            pitfall_students[pitfall_id].append(student)
    pitfalls = sorted(pitfall_students.items(), key=lambda item: (-len(item[1]), item[0]))
    counts = Counter({p: len(names) for p, names in pitfall_students.items()})
    figures = {
        "histogram": plots.score_histogram([100 * t / max_total for t in totals.values()], out / "img" / "scores.svg"),
        "exercises": plots.pass_rates([e.folder for e in exercises], [exercise_rate[e.id] for e in exercises],
                                      out / "img" / "exercises.svg", "mean score (%)"),
        "pitfalls": plots.pitfall_counts(counts, out / "img" / "pitfalls.svg"),
    } if records else {}
    # Inline, as data URIs: the page is mailed and uploaded alone, without img/ beside it.
    figures = {name: _data_uri(out / "img" / file) for name, file in figures.items() if file}
    details = instructor_details(records)
    index = env.get_template("index.html").render(
        course=course, exercises=exercises, students=students, totals=totals, max_total=max_total,
        check_rows=check_difficulty(records), pitfalls=pitfalls, hints=hints, figures=figures,
        status_text=status_text, pages={student: page_name(student) for student in students},
        exam_stats=exam_stats, details=details, exams=exams, exam_list=exam_list, to_review=to_review(records),
        similarity=similarity[0] if similarity else None, similarity_note=similarity[1] if similarity else "",
        attempted={e.id: sum(1 for rows in students.values() if e.id in rows and rows[e.id].status not in NOT_ATTEMPTED)
                   for e in exercises},
    )
    (out / "index.html").write_text(index, encoding="utf-8")
    errors = env.get_template("errors.html").render(course=course, details=details)
    (out / "errors.html").write_text(errors, encoding="utf-8")
