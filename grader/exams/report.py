"""What ``grader exam grade`` writes: ``results.json`` (every verdict),
``grades.csv`` (one row per student), ``review.csv`` (the answers the
grader could not read, with their text, for the instructor to read and
regrade by hand), ``stats.json`` (grader/exams/stats.py) and ``report.html`` (the exam's class overview: scores, lateness, questions
most missed, checks most failed).

Answer keys appear in results.json (the instructor's file) but the HTML
shows questions and rates only. The HTML's "Signs of copying"
(grader/exams/copying.py) names students: it is the instructor's, like the
scores.
"""
from __future__ import annotations

import csv
import json
from pathlib import Path

from grader.course import Course
from grader.exams.grading import ExamRun
from grader.exams.result import ExamResult
from grader.exams.stats import exam_stats
from grader.report.exports import points_text


def write_results_json(run: ExamRun, path: Path) -> None:
    data = {"exam": run.exam.id, "code_graded": run.code_graded, "problems": run.problems,
            "copying": run.copying.to_dict(), "results": [r.to_dict() for r in run.results]}
    path.write_text(json.dumps(data, indent=1, ensure_ascii=False), encoding="utf-8")


def lateness_label(result: ExamResult) -> str:
    """``on time``, ``late``, ``unknown`` (no usable submission time on
    record) or "" (nothing to time: not handed in, or unreadable)."""
    if not result.submitted or result.error:
        return ""
    return "unknown" if not result.lateness.known else "late" if result.lateness.flagged else "on time"


def write_grades_csv(run: ExamRun, path: Path) -> None:
    """One row per student. ``status``: graded, late, not_submitted or
    unreadable (``late_note`` then says why); ``lateness``: see
    :func:`lateness_label` (``late_min`` is empty when it is unknown)."""
    exercise_ids = [item.id for item in run.exam.exercises] if run.code_graded else []
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(["student", "submitted", "status", "questions", "questions_max", *exercise_ids, "raw_points",
                         "lateness", "late_min", "late_factor", "points", "max_points", "time_source", "late_note"])
        for r in run.results:
            label = lateness_label(r)
            # Points as the report shows them (two decimals at most): 63.625 is 63.62 in both.
            writer.writerow([r.student, int(r.submitted), r.status, points_text(r.question_points),
                             points_text(r.question_max),
                             *(points_text(r.exercises[i]['points']) if i in r.exercises else "" for i in exercise_ids),
                             points_text(r.raw_points), label,
                             f"{r.lateness.late_min:g}" if label in ("on time", "late") else "",
                             f"{r.lateness.factor:g}", points_text(r.points), points_text(r.max_points), r.lateness.source,
                             r.error or (r.lateness.note if r.submitted else "not handed in")])


def review_rows(run: ExamRun) -> list[dict]:
    """Every answer the grader could not read: who, which question, what
    they wrote, the key and why."""
    return [{"student": r.student, "question": v.question_id, "kind": v.kind, "given": v.given,
             "expected": v.expected, "reason": v.reason, "points": f"{v.max_points:g}"}
            for r in run.results for v in r.questions if getattr(v, "review", False)]


def write_review_csv(run: ExamRun, path: Path) -> None:
    """``review.csv``: :func:`review_rows`, with a header even when empty."""
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, ["student", "question", "kind", "given", "expected", "reason", "points"])
        writer.writeheader()
        writer.writerows(review_rows(run))


def write_html(course: Course, run: ExamRun, stats: dict, path: Path) -> None:
    # The class report's templates and filters (grader/report/templates: base.html, exam*.html).
    from grader.report.html import environment

    html = environment().get_template("exam.html").render(course=course, run=run, stats=stats)
    path.write_text(html, encoding="utf-8")


def write_exam_outputs(course: Course, run: ExamRun, out: Path) -> dict[str, Path]:
    """All of the above into ``out``; returns the paths by kind."""
    out.mkdir(parents=True, exist_ok=True)
    stats = exam_stats(course, run.exam, run.results)
    paths = {"results": out / "results.json", "grades": out / "grades.csv", "stats": out / "stats.json",
             "report": out / "report.html", "review": out / "review.csv"}
    write_results_json(run, paths["results"])
    write_grades_csv(run, paths["grades"])
    write_review_csv(run, paths["review"])
    paths["stats"].write_text(json.dumps(stats, indent=1, ensure_ascii=False), encoding="utf-8")
    write_html(course, run, stats, paths["report"])
    return paths
