"""Every change to a score after the checks, as lines a student can read.

The checks give the graded score; then the instructor's adjustment (``grader
adjust``), then the homework late policy, apply in that order (see
grader/gradebook/). Each page that shows a score (the student's page, the
feedback that ``grader watch`` and ``grader feedback`` hand back, the
markdown nbgrader shows, the class report) lists each change as a line:
what, how much, why, and who for an adjustment. A score whose parts do not
add up on the page is a question the student cannot answer.
"""
from __future__ import annotations

from dataclasses import dataclass

from grader.gradebook import Record


@dataclass(frozen=True)
class Deduction:
    """One change to a score: ``points`` is signed (a bonus is positive)."""

    kind: str          # "adjustment" | "late"
    en: str
    zh: str
    points: float
    reason: str = ""   # the instructor's words (adjustments), shown escaped
    by: str = ""


def _round(value: float) -> float:
    return round(value, 2) + 0.0   # no -0.0 on a page


def deductions(record: Record) -> list[Deduction]:
    """The changes from the graded score to ``record.points``, in the order they apply."""
    lines: list[Deduction] = []
    graded = record.points if record.graded_points is None else record.graded_points
    late = record.lateness or {}
    adjusted = late.get("unpenalised_points", record.points) if late else record.points
    if record.adjustment:
        a = record.adjustment
        day = str(a.get("at", ""))[:10]   # the date is enough on a page; exports keep the time
        lines.append(Deduction("adjustment", f"adjusted by the instructor ({a.get('change', '')}), {day}",
                               f"教师调整（{a.get('change', '')}），{day}",
                               _round(adjusted - graded), str(a.get("reason", "")), str(a.get("by", ""))))
    if late and late.get("factor", 1.0) != 1.0:
        factor = float(late["factor"])
        lines.append(Deduction("late", f"late: {late.get('late_min', 0):g} min after the deadline, "
                                       f"score × {factor:g}",
                               f"迟交：截止时间后 {late.get('late_min', 0):g} 分钟，得分 × {factor:g}",
                               _round(record.points - adjusted), str(late.get("note", ""))))
    return lines


def graded_points(record: Record) -> float:
    """The checks' score, before any line of :func:`deductions`."""
    return record.points if record.graded_points is None else record.graded_points
