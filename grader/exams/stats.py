"""Per-question and per-exercise statistics of an exam, as plain dicts (for
the class report, JSON exports, or anything else): which questions most
students missed, which wrong choice they picked, which checks failed most.

Rates count the students who submitted something readable; an empty seat
(or an exam the grader could not read) says nothing about a question.
"""
from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Sequence

from grader.course import Course, Text
from grader.course.exam_schema import Exam
from grader.exams.result import ExamResult


def _texts(text: str | Text) -> dict:
    return {"en": text, "zh": text} if isinstance(text, str) else {"en": text.en, "zh": text.zh}


def question_stats(course: Course, exam: Exam, results: Sequence[ExamResult]) -> list[dict]:
    """One dict per question, the most missed first."""
    submitted = [r for r in results if r.submitted and not r.error]
    rows = []
    for question_id in exam.questions:
        question = course.question(question_id)
        verdicts = [v for r in submitted for v in r.questions if v.question_id == question_id]
        n = len(verdicts)
        correct = sum(v.correct for v in verdicts)
        row = {"id": question_id, "kind": question.kind, "text": _texts(question.text), "points": question.points,
               "students": n, "answered": sum(v.answered for v in verdicts), "correct": correct,
               "rate": correct / n if n else 0.0,
               "mean_points": sum(v.points for v in verdicts) / n if n else 0.0,
               "reasons": dict(Counter(v.reason for v in verdicts if not v.correct).most_common())}
        if question.kind == "choice":
            # Letters differ per student; the bank's indices say which choice it was.
            picked = Counter(i for v in verdicts if not v.correct for i in v.picked)
            row["wrong_choices"] = [{"text": _texts(question.choices[i].text), "students": count}
                                    for i, count in picked.most_common()]
        elif question.kind == "short":
            row["wrong_answers"] = [{"answer": a, "students": c} for a, c in
                                    Counter(v.given.casefold() for v in verdicts if v.answered and not v.correct).most_common(5)]
        rows.append(row)
    return sorted(rows, key=lambda row: (row["rate"], row["id"]))


def exercise_stats(course: Course, exam: Exam, results: Sequence[ExamResult]) -> list[dict]:
    """One dict per exam exercise, with its checks' pass rates (hardest first)."""
    submitted = [r for r in results if r.submitted and r.code_graded and not r.error]
    rows = []
    for item in exam.exercises:
        exercise = course.exercise(item.id)
        parts = [r.exercises[item.id] for r in submitted if item.id in r.exercises]
        checks: dict[str, list[bool]] = {}
        messages: dict[str, dict] = {}
        for part in parts:
            for verdict in part["verdicts"]:
                checks.setdefault(verdict["check_id"], []).append(bool(verdict["passed"]))
                messages[verdict["check_id"]] = verdict["message"]
        n = len(parts)
        rows.append({
            "id": item.id, "folder": exercise.folder, "title": exercise.title.model_dump(), "points": item.points,
            "students": n, "mean_points": sum(p["points"] for p in parts) / n if n else 0.0,
            "rate": sum(p["points"] for p in parts) / (n * item.points) if n else 0.0,
            "full_marks": sum(p["points"] >= p["max_points"] - 1e-9 for p in parts),
            "statuses": dict(Counter(p["status"] for p in parts)),
            "checks": sorted(({"id": cid, "message": messages[cid], "students": len(passed),
                               "pass_rate": sum(passed) / len(passed)} for cid, passed in checks.items()),
                             key=lambda c: (c["pass_rate"], c["id"])),
        })
    return rows


def summary(results: Sequence[ExamResult]) -> dict:
    submitted = [r for r in results if r.submitted]
    scores = [r.points / r.max_points for r in submitted if r.max_points]
    return {"students": len(results), "submitted": len(submitted),
            "late": sum(r.lateness.flagged for r in submitted),
            "penalised": sum(r.lateness.factor < 1 for r in submitted),
            "lateness_unknown": sum(not r.lateness.known for r in submitted if not r.error),
            "unreadable": sum(bool(r.error) for r in results),
            "mean_rate": statistics.fmean(scores) if scores else 0.0,
            "median_rate": statistics.median(scores) if scores else 0.0,
            "full_marks": sum(r.points >= r.max_points - 1e-9 for r in submitted if r.max_points)}


def exam_stats(course: Course, exam: Exam, results: Sequence[ExamResult]) -> dict:
    """Everything the class report shows about an exam, as plain data."""
    return {"exam": exam.id, "title": exam.title.model_dump(), "summary": summary(results),
            "questions": question_stats(course, exam, results),
            "exercises": exercise_stats(course, exam, results)}
