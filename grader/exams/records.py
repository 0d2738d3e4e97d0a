"""Exam results in the gradebook (``grades.db``), beside the exercises'.

Per student, an exam writes:

- one row per exam exercise, ``exercise = "<exam>/<exercise id>"``: the
  hidden checks of the student's variant, as class grading records them. Its
  content hash covers the module's bytes and the variant, so a rerun after a
  crash or a kill grades only the parts not recorded yet, and a changed
  submission (or a new exam secret) is graded again;
- one row for the whole exam, ``exercise = "<exam>"``: the total after the
  late policy, ``status`` ``graded``, ``late``, ``not_submitted`` or
  ``unreadable`` (the student's files could not be read: the reason says
  why), the lateness note (``lateness unknown: ...`` when no usable
  submission time was on record) as ``reason``, and the question verdicts
  as ``verdicts``.

Exam rows are told apart from exercise rows by :func:`is_exam_row`; the class
report and the CSV exports use it. ``exam_results`` rebuilds the
``ExamResult``s the statistics need from these rows alone.
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable

from grader.course import Course
from grader.course.exam_schema import Exam
from grader.exams.answers import QuestionVerdict
from grader.exams.result import UNREADABLE, ExamResult
from grader.exams.timing import UNKNOWN_NOTE, Lateness
from grader.exams.variants import Variant
from grader.gradebook import Gradebook, Key, Record

SEPARATOR = "/"
NOT_SUBMITTED = "missing"


def _digest(*parts: object) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


def variant_digest(variant: Variant) -> str:
    return _digest(variant.to_dict())


def part_key(course: Course, exam: Exam, exercise_id: str, variant: Variant, content_hash: str | None) -> Key:
    """The gradebook key of one exam exercise of one student."""
    content = _digest(content_hash or NOT_SUBMITTED, variant_digest(variant))
    return Key(variant.student, f"{exam.id}{SEPARATOR}{exercise_id}", content, course.course.version)


def total_key(course: Course, exam: Exam, result: ExamResult, variant: Variant) -> Key:
    """The key of a student's exam total: it changes with anything the total depends on."""
    content = _digest(variant_digest(variant), result.to_dict())
    return Key(result.student, exam.id, content, course.course.version)


def part_from_record(record: Record) -> dict:
    """An exam exercise's result as ``ExamResult.exercises`` holds it."""
    return {"points": record.points, "max_points": record.max_points, "status": record.status,
            "reason": record.reason, "verdicts": record.verdicts}


def record_part(book: Gradebook, key: Key, part: dict) -> None:
    book.record(key, points=part["points"], max_points=part["max_points"], status=part["status"],
                reason=part["reason"], verdicts=part["verdicts"])


def record_total(book: Gradebook, course: Course, exam: Exam, result: ExamResult, variant: Variant) -> None:
    key = total_key(course, exam, result, variant)
    if book.has(key):
        return
    status = result.status
    if result.error:
        reason = "; ".join([result.error, *result.problems])
    elif result.submitted:
        reason = "; ".join([result.lateness.note, *result.problems])
    else:
        reason = "; ".join(result.problems) or "nothing submitted"
    book.record(key, points=result.points, max_points=result.max_points, status=status, reason=reason,
                verdicts=[v.to_dict() for v in result.questions])


def is_exam_row(course: Course, exercise: str) -> bool:
    """Whether a gradebook row's ``exercise`` is an exam's (total or part)."""
    return any(exercise == exam.id or exercise.startswith(exam.id + SEPARATOR) for exam in course.exams)


def is_exam_part(course: Course, exercise: str) -> bool:
    """Whether a row is one exercise of an exam (its total has its own row)."""
    return any(exercise.startswith(exam.id + SEPARATOR) for exam in course.exams)


def exam_results(course: Course, exam: Exam, records: Iterable[Record]) -> list[ExamResult]:
    """The exam's results as recorded (newest rows), for its statistics."""
    totals: dict[str, Record] = {}
    parts: dict[str, dict[str, dict]] = {}
    for record in records:
        if record.key.exercise == exam.id:
            totals[record.key.student] = record
        elif record.key.exercise.startswith(exam.id + SEPARATOR):
            exercise_id = record.key.exercise.removeprefix(exam.id + SEPARATOR)
            parts.setdefault(record.key.student, {})[exercise_id] = part_from_record(record)
    code_max = sum(item.points for item in exam.exercises)
    results = []
    for student, total in sorted(totals.items()):
        exercises = parts.get(student, {})
        questions = [QuestionVerdict(**v) for v in total.verdicts]
        raw = sum(v.points for v in questions) + sum(p["points"] for p in exercises.values())
        factor = total.points / raw if raw > 0 else 1.0
        lateness = Lateness(None, None, "gradebook", 0.0, total.status == "late", round(factor, 6), total.reason,
                            known=UNKNOWN_NOTE not in total.reason)
        results.append(ExamResult(student, {}, questions, exercises, lateness, code_graded=bool(exercises),
                                  code_max=code_max, submitted=total.status != "not_submitted",
                                  error=total.reason if total.status == UNREADABLE else ""))
    return results


def exam_record_ids(course: Course) -> Callable[[str], bool]:
    """Whether a gradebook row's exercise id is an exam's (its total, or one
    of its code parts): what :func:`recorded_exam_stats` reads."""
    totals = {exam.id for exam in course.exams}
    parts = tuple(exam.id + SEPARATOR for exam in course.exams)
    return lambda exercise_id: exercise_id in totals or exercise_id.startswith(parts)


def recorded_exam_stats(course: Course, records: list[Record]) -> list[dict]:
    """The statistics of every exam with results among ``records``."""
    from grader.exams.stats import exam_stats

    stats = []
    for exam in course.exams:
        results = exam_results(course, exam, records)
        if results:
            stats.append(exam_stats(course, exam, results))
    return stats
