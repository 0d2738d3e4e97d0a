"""What every release needs: which exercises exist, their public tests, the
students' view of ``course.yaml``, and the names of notebook cells (shared
by the notebook builder, the extraction in ``grader.intake.notebooks`` and the
gradebook push, so that they can never disagree)."""
from __future__ import annotations

import ast
from pathlib import Path

from grader.course import Course, Exercise


class ReleaseError(Exception):
    """The release cannot be built; the message says what to fix."""


def answer_cell_id(exercise: Exercise) -> str:
    """nbgrader ``grade_id`` of the cell that holds the exercise's module."""
    return f"ex{exercise.id}_answer"


def definitions_cell_id(exercise: Exercise) -> str:
    """nbgrader ``grade_id`` of the read-only cell defining the public tests."""
    return f"ex{exercise.id}_tests"


def graded_cell_id(exercise: Exercise, test_name: str) -> str:
    """nbgrader ``grade_id`` of the graded cell running one public test."""
    return f"ex{exercise.id}_{test_name}"


def grade_cell_id(exercise: Exercise) -> str:
    """nbgrader ``grade_id`` of the task cell holding the course grader's score."""
    return f"ex{exercise.id}_grade"


def notebook_name(exercise: Exercise) -> str:
    """``NN_slug``: the notebook's file name without ``.ipynb``."""
    return exercise.folder


def available_exercises(course: Course, root: Path, ids: list[str] | None = None) -> list[Exercise]:
    """The exercises (all, or those in ``ids``) whose stub exists under
    ``root/exercises``: the course lists exercises before they are written."""
    chosen = [course.exercise(i) for i in ids] if ids else course.exercises
    return [e for e in chosen if (root / "exercises" / e.folder / e.module).is_file()]


def public_test_files(exercise: Exercise, root: Path) -> list[Path]:
    """The exercise's public test files, sorted by name."""
    return sorted((root / "exercises" / exercise.folder).glob("test_*.py"))


def public_test_functions(path: Path) -> list[str]:
    """Names of the top-level test functions of a test file, in file order
    (pytest's default: functions named ``test*``)."""
    return named_tests(path.read_text(encoding="utf-8"), str(path))


def named_tests(source: str, filename: str) -> list[str]:
    """:func:`public_test_functions` of a test file's source."""
    tree = ast.parse(source, filename=filename)
    classes = [n.name for n in tree.body if isinstance(n, ast.ClassDef) and n.name.startswith("Test")]
    if classes:
        raise ReleaseError(f"{filename}: test classes ({', '.join(classes)}) cannot become notebook cells; "
                           "write plain test functions")
    return [n.name for n in tree.body if isinstance(n, ast.FunctionDef) and n.name.startswith("test")]


def split_points(total: float, n: int) -> list[float]:
    """``total`` points over ``n`` cells in hundredths, summing exactly to
    ``total`` (the first cells take the remainder)."""
    if n <= 0:
        return []
    cents = round(total * 100)
    base, extra = divmod(cents, n)
    return [(base + (1 if i < extra else 0)) / 100 for i in range(n)]


def student_course_data(course: Course, exercises: list[Exercise] | None = None) -> dict:
    """The parts of ``course.yaml`` students' tools read (the hint plugin,
    the notebook test runner): exercises' ids, slugs, modules, titles,
    points, forbidden names (the READMEs name them too) and pitfall ids, and
    the whole catalogue's hints and error patterns (a public test may point
    to a pitfall listed under another exercise).

    Deliberately absent: assignments, exams, grading limits, release
    settings, ``hidden_only`` reasons (they describe the hidden checks) and
    the pitfalls' ``source`` notes."""
    exercises = course.exercises if exercises is None else exercises
    pitfalls = []
    for pitfall in course.pitfalls:
        entry = {"id": pitfall.id, "hint": {"en": pitfall.hint.en, "zh": pitfall.hint.zh}}
        if pitfall.error_patterns:
            entry["error_patterns"] = list(pitfall.error_patterns)
        pitfalls.append(entry)
    return {
        "schema_version": 1,
        "course": {"id": course.course.id, "version": course.course.version,
                   "title": {"en": course.course.title.en, "zh": course.course.title.zh}},
        "pitfalls": pitfalls,
        "exercises": [
            {"id": e.id, "slug": e.slug, "part": e.part, "module": e.module, "symbols": list(e.symbols),
             "points": e.points, "title": {"en": e.title.en, "zh": e.title.zh}, "forbidden": list(e.forbidden),
             "pitfalls": [{"id": p.id} for p in e.pitfalls]}
            for e in exercises
        ],
    }
