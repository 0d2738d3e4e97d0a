"""``grader exam build EXAM --roster roster.csv --out DIR``: every student's
exam folder (grader/exams/build.py), with ``--nbgrader`` also the nbgrader
course (grader/exams/nbgrader.py), and the instructor's record of the variants.
"""
from __future__ import annotations

import json
from pathlib import Path

from grader.course import Course
from grader.course.exam_schema import Exam
from grader.exams.build import INSTRUCTOR_DIR, RosterEntry, build_student
from grader.exams.nbgrader import write_exam_course
from grader.exams.variants import Variant


def build_exam(course: Course, exam: Exam, roster: list[RosterEntry], secret: bytes, out: Path,
               root: Path, *, nbgrader: Path | None = None, exchange: Path | None = None) -> list[Variant]:
    """Every student's folder, and the instructor's record of the variants;
    with ``nbgrader``, also that nbgrader course directory with one
    assignment per student (``exchange``: its ``Exchange.root``)."""
    out.mkdir(parents=True, exist_ok=True)
    variants = [build_student(course, exam, entry, secret, out, root) for entry in roster]
    if nbgrader is not None:
        write_exam_course(course, exam, list(zip(roster, variants)), nbgrader, root, exchange=exchange)
    instructor = out / INSTRUCTOR_DIR
    instructor.mkdir(exist_ok=True)
    (instructor / "variants.json").write_text(json.dumps([v.to_dict() for v in variants], indent=1), encoding="utf-8")
    (instructor / "README.txt").write_text(
        "Instructor-only: every student's variant (sizes, question parameters, choice orders, seeds).\n"
        "Do not hand this folder out. The answer keys are recomputed at grading time from the exam secret.\n",
        encoding="utf-8")
    return variants
