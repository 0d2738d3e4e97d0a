"""``grader exam build EXAM ... --nbgrader NBDIR``: the exam as nbgrader
assignments, one per student (nbgrader has no per-student variants of one
assignment: jupyter/nbgrader#1153, #1433)::

    NBDIR/nbgrader_config.py
    NBDIR/source/<exam>-<student>/
        NN_slug.ipynb       one per exam exercise, built as `grader release nbgrader`
                            builds it: the stub, the reference in a solution region
                            (generate_assignment removes it), the exercise's public
                            tests and its test_variant.py, graded with the exam's points
        <module>.py         the modules an exercise ships (working code of earlier exercises)
        README.md           the exam's instructions (time, sizes), English and Chinese
        variant.json        the student's sizes and public seed (no hidden seed)
        questions.md        the questions with the student's numbers
        answers.yaml        the answer template (kept as submitted by autograde)

Assignment names are ``<exam>-<student>`` (:data:`SEPARATOR`): nbgrader
refuses ``+`` in assignment names (its exchange names submissions
``student+assignment+timestamp``), and course.yaml's exam ids and the
roster's student ids (``grader.intake.submissions.STUDENT_ID_RE``) hold only
letters, digits and ``._@-``, which nbgrader's paths and globs take as they are.

The notebooks' test cells hold the student's public variant (sizes and public
seed): they are read-only cells, which nbgrader's autograde restores from the
source, so the autograded tests use the student's real sizes whatever
``variant.json`` says by then. Nothing else of the variant is written:
no hidden seed, no answer, no question parameter beyond what questions.md shows.
"""
from __future__ import annotations

import shutil
from pathlib import Path

from grader.course import Course, Exercise
from grader.course.exam_schema import Exam
from grader.exams.build import (
    VARIANT_TESTS, RosterEntry, deadline_text, sizes_table, variant_tests_template, write_exam_files,
)
from grader.exams.questions import shown_questions
from grader.exams.variants import Variant

SEPARATOR = "-"


def assignment_name(exam_id: str, student: str) -> str:
    """nbgrader's assignment id of a student's exam: ``midterm-s001``."""
    return f"{exam_id}{SEPARATOR}{student}"


def exam_tests(exercise: Exercise, root: Path) -> dict[str, str]:
    """The notebook's tests: the exercise's public tests, then the exam's
    ``test_variant.py`` (file name -> source)."""
    from grader.release.notebooks import exercise_tests

    tests = exercise_tests(exercise, root)
    template = variant_tests_template(root, exercise)
    if template.is_file():
        tests[VARIANT_TESTS] = template.read_text(encoding="utf-8")
    return tests


def intro(exam: Exam, exercise: Exercise, points: float, variant: Variant, entry: RosterEntry) -> str:
    """The first cell of an exam notebook (markdown): which exam, whose, how long, which sizes."""
    return "\n".join([
        f"## {exam.title.en} · {exam.title.zh} — `{exercise.folder}` ({points:g} points / 分)", "",
        f"- student / 学号: `{variant.student}`",
        f"- time / 时间: {deadline_text(exam, entry.extra_time_min)}", "",
        "The tests of `test_variant.py` below (named `..._your_...`) use YOUR sizes; so do the grader's "
        "hidden checks. The questions are in `questions.md`; answer them in `answers.yaml` (see `README.md`).", "",
        "下面 `test_variant.py` 中的测试（名称含 `your`）使用属于你的尺寸，评分时的隐藏测试也是如此。"
        "问答题见 `questions.md`，答案写在 `answers.yaml` 中（见 `README.md`）。", "",
        *sizes_table(variant), "",
    ])


def write_student_assignment(course: Course, exam: Exam, entry: RosterEntry, variant: Variant, out: Path,
                             root: Path) -> Path:
    """``out/source/<exam>-<student>/``, regenerated from scratch."""
    from grader.release.nbgrader import copy_shipped
    from grader.release.notebooks import build_notebook, write_notebook

    folder = out / "source" / assignment_name(exam.id, entry.student)
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    for item in exam.exercises:
        exercise = course.exercise(item.id)
        notebook = build_notebook(course, exercise, root, with_solution=True, tests=exam_tests(exercise, root),
                                  points=item.points, variant=variant.public(),
                                  intro=intro(exam, exercise, item.points, variant, entry), graded_tests=True)
        write_notebook(notebook, folder / f"{exercise.folder}.ipynb")
        copy_shipped(course, exercise, root, folder)
    write_exam_files(folder, course, exam, variant, entry, shown_questions(course, exam, variant), notebooks=True)
    return folder


def write_exam_course(course: Course, exam: Exam, students: list[tuple[RosterEntry, Variant]], out: Path,
                      root: Path, *, exchange: Path | None = None) -> list[Path]:
    """Every student's assignment in the nbgrader course directory ``out``,
    then its ``nbgrader_config.py`` (other assignments in ``out/source`` stay)."""
    from grader.release.nbgrader import write_config

    folders = [write_student_assignment(course, exam, entry, variant, out, root) for entry, variant in students]
    write_config(course, out, exchange, command="grader exam build --nbgrader", root=root)
    return folders
