"""One student's exam folder, and the roster it is built for. ``grader exam
build EXAM --roster roster.csv --out DIR`` (grader/exams/build_class.py)
writes one per student:

    DIR/<student>/
        README.md            the exam: time limit, what to do (English, 中文), the sizes
        questions.md         the questions with this student's numbers and choice order
        answers.yaml         the answer template (one line per question)
        variant.json         the student's sizes and public seed (no hidden seed)
        course.yaml          the students' view: the exam's exercises and their hints
        conftest.py, pytest.ini   the hint plugin and the `variant` fixture
        NN_slug/             each exam exercise: README, stub, shipped modules,
                             the exercise's public tests and test_variant.py
                             (exams/public_tests/NN_slug.py: tests with the variant's sizes)
    DIR/_instructor/variants.json   every student's full variant (keep it, never hand it out)

With ``--nbgrader NBDIR`` the same exam is also written as nbgrader
assignments, one per student (grader/exams/nbgrader.py, from the files here).

Nothing secret goes into a student's folder: no answers, no hidden seed, no
reference code. The answer keys are recomputed at grading time from the secret.
"""
from __future__ import annotations

import csv
import json
import shutil
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import yaml

from grader.course import Course, Exercise
from grader.course.exam_schema import Exam
from grader.exams.questions import ShownQuestion, shown_questions
from grader.exams.variants import Variant, make_variant
from grader.intake.submissions import STUDENT_ID_RE

ID_COLUMNS = ("student_id", "student", "id")
INSTRUCTOR_DIR = "_instructor"
VARIANT_TESTS = "test_variant.py"     # the exam's tests of an exercise, in the exercise's folder

CONFTEST = '''\
# The course's pytest plugin (hints, progress) and your exam variant.
import json
from pathlib import Path

import pytest

from coursekit.pytest_plugin import *  # noqa: F401,F403


@pytest.fixture(scope="session")
def variant() -> dict:
    """Your exam's sizes and seed (variant.json): the exam tests use them."""
    return json.loads((Path(__file__).parent / "variant.json").read_text(encoding="utf-8"))
'''

PYTEST_INI = "[pytest]\naddopts = --import-mode=importlib\n"


class RosterError(Exception):
    """The roster cannot be used; the message names the line."""


@dataclass(frozen=True)
class RosterEntry:
    student: str
    name: str = ""
    extra_time_min: float = 0.0      # accommodations: added to this student's time limit


def read_roster(path: Path) -> list[RosterEntry]:
    """A CSV with a header: ``student_id`` (or ``student``/``id``), optional
    ``name`` and ``extra_time_min``."""
    try:
        with open(path, newline="", encoding="utf-8-sig") as fh:
            rows = list(csv.DictReader(fh))
    except OSError as exc:
        raise RosterError(f"{path}: cannot read: {exc.strerror}") from exc
    if not rows:
        raise RosterError(f"{path}: no students")
    column = next((c for c in ID_COLUMNS if c in rows[0]), None)
    if column is None:
        raise RosterError(f"{path}: no column named {' or '.join(ID_COLUMNS)} (found: {', '.join(rows[0])})")
    entries, seen = [], set()
    for line, row in enumerate(rows, start=2):
        student = (row.get(column) or "").strip()
        if not STUDENT_ID_RE.match(student):
            raise RosterError(f"{path}, line {line}: {student!r} is not a usable student id")
        if student in seen:
            raise RosterError(f"{path}, line {line}: {student!r} appears twice")
        seen.add(student)
        try:
            extra = float(row.get("extra_time_min") or 0)
        except ValueError as exc:
            raise RosterError(f"{path}, line {line}: extra_time_min {row.get('extra_time_min')!r} is not a number") from exc
        if extra < 0:
            raise RosterError(f"{path}, line {line}: extra_time_min is negative")
        entries.append(RosterEntry(student, (row.get("name") or "").strip(), extra))
    return entries


def student_course_data(course: Course, exam: Exam) -> dict:
    """The students' view of course.yaml (exercises and hints only, as in the
    students' repository), for the exam's exercises, with the exam's points."""
    from grader.release.common import student_course_data as release_view

    data = release_view(course, [course.exercise(item.id) for item in exam.exercises])
    for entry, item in zip(data["exercises"], exam.exercises):
        entry["points"] = item.points
    return data


def deadline_text(exam: Exam, extra_min: float) -> str:
    limit = exam.time_limit_min + extra_min
    if exam.starts_at is None:
        return f"{limit:g} minutes from the start / 开始后 {limit:g} 分钟"
    end = exam.starts_at + timedelta(minutes=limit)
    return f"{exam.starts_at.isoformat()} → {end.isoformat()} ({limit:g} min)"


HOW_FOLDERS = [
    "Fill in the stubs and run the tests from this folder: `pytest` (all) or `pytest 03_masking` (one).",
    "`test_variant.py` in each folder uses YOUR sizes below; the grader's hidden checks do too.", "",
    "补全各文件夹中的代码，并在本文件夹中运行测试：`pytest`（全部）或 `pytest 03_masking`（单个）。",
    "每个文件夹中的 `test_variant.py` 使用下面属于你的尺寸；评分时的隐藏测试也使用这些尺寸。"]
HOW_NOTEBOOKS = [
    "Open each notebook, write your code in its answer cell, run it, then run the test cells.",
    "The tests of `test_variant.py` (named `..._your_...`) use YOUR sizes below, also in `variant.json`;",
    "the grader's hidden checks use them too. Keep every file of this folder where it is.", "",
    "打开每个笔记本，在答案单元格中编写代码并运行，然后运行各测试单元格。",
    "`test_variant.py` 中的测试（名称含 `your`）使用下面属于你的尺寸（也在 `variant.json` 中）；",
    "评分时的隐藏测试也使用这些尺寸。请不要移动或删除本文件夹中的任何文件。"]
SUBMIT_FOLDERS = "Submit this whole folder. / 提交整个文件夹。"
SUBMIT_NOTEBOOKS = ("Submit with Jupyter's Assignments tab (or `nbgrader submit`): the notebooks and `answers.yaml` "
                    "are handed in together. / 用 Jupyter 的 Assignments 页面（或 `nbgrader submit`）提交："
                    "笔记本和 `answers.yaml` 会一起提交。")


def sizes_table(variant: Variant) -> list[str]:
    """The student's sizes as a markdown table."""
    return ["| size / 尺寸 | value / 值 |", "|---|---|", *(f"| `{name}` | {value} |" for name, value in variant.sizes.items())]


def readme(course: Course, exam: Exam, variant: Variant, entry: RosterEntry, shown: list[ShownQuestion], *,
           notebooks: bool = False) -> str:
    """The exam's README: for the folder, or (``notebooks``) for the nbgrader assignment."""
    question_points = sum(q.points for q in shown)
    lines = [f"# {exam.title.en} · {exam.title.zh}", "",
             f"{course.course.title.en} · {course.course.title.zh}", "",
             f"- student / 学号: `{variant.student}`" + (f" ({entry.name})" if entry.name else ""),
             f"- time / 时间: {deadline_text(exam, entry.extra_time_min)}",
             "", "## Exercises / 编程题", "",
             f"| {'notebook' if notebooks else 'folder'} | points / 分值 | what to write / 内容 |", "|---|---|---|"]
    for item in exam.exercises:
        exercise = course.exercise(item.id)
        where = f"{exercise.folder}.ipynb" if notebooks else f"{exercise.folder}/{exercise.module}"
        lines.append(f"| `{where}` | {item.points:g} | {exercise.title.en} · {exercise.title.zh} |")
    lines += ["", *(HOW_NOTEBOOKS if notebooks else HOW_FOLDERS), "", *sizes_table(variant)]
    if shown:
        lines += ["", f"## Questions / 问答题 ({len(shown)} questions, {question_points:g} points)", "",
                  "Read `questions.md` and write your answers in `answers.yaml`, one per line, after the colon.",
                  "阅读 `questions.md`，把答案写在 `answers.yaml` 中对应题号的冒号后面，每题一行。"]
    lines += ["", SUBMIT_NOTEBOOKS if notebooks else SUBMIT_FOLDERS, ""]
    return "\n".join(lines)


# How a numeric answer may be written (grader/exams/answers.py reads each form).
NUMBER_FORMS = ("number / 数字, e.g. `0.25`, `1/4`, `sqrt(2)/2`; a shape as a list / 形状写成列表, `[2, 3, 4]`. "
                "One number may have thousands separators / 一个数可以带千位分隔符 (`8,000`, `8 000`), "
                "the unit the question names / 题目中的单位 (`12,288 bytes`, `768 B`, `12,288 字节`, "
                "`4,160 parameters`, `4,160 个`), `≈` or `~` in front / 前面的 `≈` 或 `~`, "
                "and a probability may be a percent / 概率可以写成百分数 (`35.99%`)")


def questions_markdown(exam: Exam, shown: list[ShownQuestion]) -> str:
    how = {"choice": "one letter / 一个字母", "numeric": NUMBER_FORMS, "short": "a word or two / 一两个词"}
    lines = [f"# {exam.title.en} · {exam.title.zh}: questions / 问答题", ""]
    for q in shown:
        lines += [f"## {q.number}. `{q.id}` ({q.points:g} points / 分)", "", q.en, "", q.zh, ""]
        lines += [f"- **{c.letter})** {c.en}" + (f"  \n  {c.zh}" if c.zh != c.en else "") for c in q.choices]
        lines += ([""] if q.choices else []) + [f"*Answer / 作答*: {how[q.kind]}", ""]
    return "\n".join(lines)


def answers_template(exam: Exam, variant: Variant, shown: list[ShownQuestion]) -> str:
    lines = [f"# {exam.title.en} · {exam.title.zh} · {variant.student}",
             "# Write each answer after its colon (see questions.md). 在冒号后写答案（见 questions.md）。",
             "# choice 选择: b    numbers 数字: 0.25 or 1/4    shapes 形状: [2, 3, 4]    short 简答: a word 一个词",
             "# a number may have thousands separators, the question's unit, ≈ or ~ in front, % for a probability:",
             "# 数字可以带千位分隔符、题目中的单位、前面的 ≈ 或 ~，概率可以写成百分数:"
             " 8,000  8 000  12,288 bytes  768 B  4,160 个  ≈0.3599  35.99%",
             "# an answer the grader cannot read is read by your instructor. 评分程序读不懂的答案由教师阅读。", ""]
    lines += [f"{q.id}:    # {q.number}" for q in shown]
    return "\n".join(lines) + "\n"


def variant_tests_template(root: Path, exercise: Exercise) -> Path:
    """``exams/public_tests/NN_slug.py``: the exam's tests of the exercise
    (they may not exist: the exercise's own public tests still apply)."""
    return root / "exams" / "public_tests" / f"{exercise.folder}.py"


def _copy_exercise(course: Course, exercise_id: str, root: Path, target: Path) -> None:
    exercise = course.exercise(exercise_id)
    source = root / "exercises" / exercise.folder
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache"))
    template = variant_tests_template(root, exercise)
    if template.is_file():
        shutil.copyfile(template, target / VARIANT_TESTS)


def write_exam_files(folder: Path, course: Course, exam: Exam, variant: Variant, entry: RosterEntry,
                     shown: list[ShownQuestion], *, notebooks: bool = False) -> None:
    """``README.md``, ``variant.json`` and, if the exam has questions,
    ``questions.md`` and the ``answers.yaml`` template."""
    (folder / "variant.json").write_text(json.dumps(variant.public(), indent=1) + "\n", encoding="utf-8")
    (folder / "README.md").write_text(readme(course, exam, variant, entry, shown, notebooks=notebooks), encoding="utf-8")
    if shown:
        (folder / "questions.md").write_text(questions_markdown(exam, shown), encoding="utf-8")
        (folder / "answers.yaml").write_text(answers_template(exam, variant, shown), encoding="utf-8")


def build_student(course: Course, exam: Exam, entry: RosterEntry, secret: bytes, out: Path, root: Path) -> Variant:
    """Write ``out/<student>/`` and return the student's variant."""
    variant = make_variant(course, exam, entry.student, secret)
    shown = shown_questions(course, exam, variant)
    folder = out / entry.student
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    for item in exam.exercises:
        _copy_exercise(course, item.id, root, folder / course.exercise(item.id).folder)
    (folder / "course.yaml").write_text(
        f"# The students' view of the course for {exam.id}, generated by `grader exam build`.\n"
        + yaml.safe_dump(student_course_data(course, exam), allow_unicode=True, sort_keys=False, width=100),
        encoding="utf-8")
    (folder / "conftest.py").write_text(CONFTEST, encoding="utf-8")
    (folder / "pytest.ini").write_text(PYTEST_INI, encoding="utf-8")
    write_exam_files(folder, course, exam, variant, entry, shown)
    return variant
