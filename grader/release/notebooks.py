"""Build an exercise's notebook from its folder (nbformat, never by hand).

One layout for both uses:

- the nbgrader source notebook (``with_solution=True``): the answer cell is
  the stub followed by the reference between ``### BEGIN SOLUTION`` and
  ``### END SOLUTION``; nbgrader's ``generate_assignment`` removes that
  region, so students get exactly the stub;
- the students' ``NN_slug.ipynb`` beside the stub (``with_solution=False``):
  the answer cell is the stub.

Cells, in order: the README (English), the README (Chinese), a short
how-to, the answer cell (autograded answer), the public tests' definitions
(read-only) and one graded, read-only cell per public test function. The
test cells run the exercise's own ``test_*.py`` through
:mod:`coursekit.notebook` on what the answer cell defined.

Why stub + region rather than a region per function body: the reference
may define helpers, extra methods or imports the stub does not declare;
appending the whole reference keeps it runnable as written (its
definitions replace the stub's), and the student version is the stub,
docstrings and messages included, whatever the exercise looks like. The
course's ``nbgrader_config.py`` makes the region's replacement a comment.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from grader.course import Course, Exercise
from grader.release.common import (
    ReleaseError, answer_cell_id, definitions_cell_id, grade_cell_id, graded_cell_id, named_tests, public_test_files, split_points,
    student_course_data,
)

BEGIN_SOLUTION = "### BEGIN SOLUTION"
END_SOLUTION = "### END SOLUTION"
# What students see where the solution region was (ClearSolutions.code_stub).
CODE_STUB = "# YOUR CODE HERE: replace each `raise NotImplementedError(...)` above with your code."

KERNELSPEC = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}

HOWTO = """\
**How to work in this notebook / 如何使用本笔记本**

Write your code in the answer cell below: replace each `raise NotImplementedError(...)`
and keep every function and class your code needs in that one cell (the grader reads only
the answer cell). Run it, then run the test cells; a failing test says what was checked,
what was expected and what your code gave, with a hint when the mistake is a known one.
Passing the public tests is necessary, not sufficient: the grader runs more checks.

在下面的答案单元格中编写代码：替换每个 `raise NotImplementedError(...)`，并把代码所需的所有函数和类
都放在这一个单元格里（评分程序只读取答案单元格）。先运行它，再运行测试单元格；测试失败时会说明检查了什么、
期望什么、你的代码得到了什么，如果是常见错误还会给出提示。通过公开测试是必要条件而非充分条件：评分程序还会运行更多检查。
"""


def _meta(grade_id: str, *, grade: bool = False, solution: bool = False, locked: bool = False,
          points: float | None = None) -> dict:
    """nbgrader cell metadata (schema version 3; ``points`` only on grade cells)."""
    meta = {"schema_version": 3, "grade": grade, "solution": solution, "locked": locked, "grade_id": grade_id}
    if grade:
        meta["points"] = points
    return {"nbgrader": meta}


def _task_meta(grade_id: str, points: float) -> dict:
    """An nbgrader task cell: graded by hand in nbgrader's eyes, by the
    course grader in fact (``grader push nbgrader``)."""
    return {"nbgrader": {"schema_version": 3, "grade": False, "solution": False, "task": True, "locked": True,
                         "grade_id": grade_id, "points": points}}


GRADE_CELL = """\
**Grade / 成绩: {points} points / 分**

The course grader sets this grade after you submit: it runs the public tests above and
further hidden checks on your answer cell. The public tests earn no points of their own:
passing them is necessary, not sufficient. Your results per check, with hints, appear as
the comment on this cell in your feedback.

提交后由课程评分程序给出此成绩：它对你的答案单元格运行上面的公开测试和更多隐藏检查。公开测试本身不计分：
通过它们是必要条件而非充分条件。每项检查的结果和提示会作为本单元格的评语出现在你的反馈中。
"""


def _readme(exercise: Exercise, root: Path, name: str) -> str:
    path = root / "exercises" / exercise.folder / name
    if not path.is_file():
        raise ReleaseError(f"{path} is missing: the notebook's instructions come from it")
    text = path.read_text(encoding="utf-8")
    # The link between the two READMEs means nothing inside a notebook
    # (both are in it); the rest of that line (the seeds) stays.
    text = re.sub(r"^\[(中文版|English)\]\(README(\.zh)?\.md\)\s*(·\s*)?", "", text, count=1, flags=re.M)
    return _inline_figures(text, root)


def _inline_figures(text: str, root: Path) -> str:
    """The README's figures (docs/figures/*.svg, relative to the exercise
    folder) as data URIs: a notebook travels without the folder they are in."""
    import base64

    def inline(match: re.Match) -> str:
        path = root / "docs" / "figures" / match.group(2)
        if not path.is_file():
            raise ReleaseError(f"{path} is missing: the README shows it")
        data = base64.b64encode(path.read_bytes()).decode("ascii")
        return f"![{match.group(1)}](data:image/svg+xml;base64,{data})"

    return re.sub(r"!\[([^\]]*)\]\(\.\./\.\./docs/figures/([\w.-]+\.svg)\)", inline, text)


def _string_literal(source: str) -> str:
    """A readable Python literal for a test file's source: a raw triple-
    quoted string when that is exact, else ``repr`` (always exact)."""
    for quote in ("'''", '"""'):
        if quote not in source and not source.endswith("\\") and quote[0] not in source[-1:]:
            return f"r{quote}{source}{quote}"
    return repr(source)


def answer_source(exercise: Exercise, root: Path, *, with_solution: bool) -> str:
    """The answer cell: the stub, plus the reference in a solution region."""
    stub = (root / "exercises" / exercise.folder / exercise.module).read_text(encoding="utf-8").rstrip("\n")
    if not with_solution:
        return stub + "\n"
    reference_path = root / "solutions" / exercise.folder / exercise.module
    if not reference_path.is_file():
        raise ReleaseError(f"{reference_path} is missing: the nbgrader source notebook needs the reference")
    reference = reference_path.read_text(encoding="utf-8").rstrip("\n")
    if BEGIN_SOLUTION in reference or END_SOLUTION in reference:
        raise ReleaseError(f"{reference_path} contains nbgrader's solution markers itself")
    return (f"{stub}\n\n{BEGIN_SOLUTION}\n# The reference solution: its definitions replace the stub's above.\n"
            f"{reference}\n{END_SOLUTION}\n")


def exercise_tests(exercise: Exercise, root: Path) -> dict[str, str]:
    """The exercise's public test files, file name -> source, sorted by name."""
    return {p.name: p.read_text(encoding="utf-8") for p in public_test_files(exercise, root)}


def public_tests_source(course: Course, exercise: Exercise, root: Path, *, tests: dict[str, str] | None = None,
                        variant: dict | None = None) -> str:
    """The read-only cell that defines the public tests (``tests_NN``):
    ``tests`` (file name -> source; default: the exercise's ``test_*.py``)
    and, for an exam, the student's public ``variant`` (the tests' ``variant``
    fixture)."""
    tests = exercise_tests(exercise, root) if tests is None else tests
    if not tests:
        raise ReleaseError(f"exercises/{exercise.folder} has no test_*.py: nothing to put in the test cells")
    data = student_course_data(course, [exercise])
    literals = ",\n".join(f"        {name!r}: {_string_literal(source)}" for name, source in tests.items())
    where = "your exam's tests" if variant is not None else f"exercises/{exercise.folder}/"
    return (
        f"# The public tests of exercise {exercise.id} (read-only), exactly as in "
        f"{where}: each test cell below runs one of them on your answer cell.\n"
        "from coursekit.notebook import PublicTests\n\n"
        f"tests_{exercise.id} = PublicTests(\n"
        f"    exercise={exercise.id!r}, module={exercise.module_name!r}, symbols={list(exercise.symbols)!r},\n"
        f"    course={json.dumps(data, ensure_ascii=False)},\n"
        + (f"    variant={variant!r},\n" if variant is not None else "")
        + "    files={\n"
        f"{literals},\n"
        "    },\n)\n"
    )


def public_tests(exercise: Exercise, root: Path, tests: dict[str, str] | None = None) -> list[str]:
    """Test function names across the exercise's test files (or ``tests``), unique."""
    tests = exercise_tests(exercise, root) if tests is None else tests
    names = [name for filename, source in tests.items() for name in named_tests(source, filename)]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ReleaseError(f"exercises/{exercise.folder}: test names used in two files: {', '.join(duplicates)}")
    return names


def build_notebook(course: Course, exercise: Exercise, root: Path, *, with_solution: bool,
                   tests: dict[str, str] | None = None, points: float | None = None, variant: dict | None = None,
                   intro: str | None = None, graded_tests: bool = False) -> nbformat.NotebookNode:
    """The exercise's notebook (see the module docstring for its cells).

    An exam's notebook (grader/exams/nbgrader.py) passes its own ``tests``
    (the exercise's and the exam's ``test_variant.py``), the exam's
    ``points`` for the exercise, the student's public ``variant`` and an
    ``intro`` (markdown) that goes first; ``graded_tests``: the public test
    cells carry the points (an exam's, whose variant tests nbgrader scores)
    instead of one grade cell for the course grader's score."""
    names = public_tests(exercise, root, tests)
    if not names:
        raise ReleaseError(f"exercises/{exercise.folder}: no test functions")
    cells = [new_markdown_cell(intro, metadata=_meta(f"ex{exercise.id}_intro", locked=True))] if intro else []
    cells += [
        new_markdown_cell(_readme(exercise, root, "README.md"), metadata=_meta(f"ex{exercise.id}_readme_en", locked=True)),
        new_markdown_cell(_readme(exercise, root, "README.zh.md"), metadata=_meta(f"ex{exercise.id}_readme_zh", locked=True)),
        new_markdown_cell(HOWTO, metadata=_meta(f"ex{exercise.id}_howto", locked=True)),
        new_code_cell(answer_source(exercise, root, with_solution=with_solution),
                      metadata=_meta(answer_cell_id(exercise), solution=True)),
        new_code_cell(public_tests_source(course, exercise, root, tests=tests, variant=variant),
                      metadata=_meta(definitions_cell_id(exercise), locked=True)),
    ]
    total = exercise.points if points is None else points
    if graded_tests:
        for name, cell_points in zip(names, split_points(total, len(names))):
            cells.append(new_code_cell(
                f"# Public test {name} ({cell_points:g} point{'s' if cell_points != 1 else ''})\n"
                f"tests_{exercise.id}.run({name!r}, globals())",
                metadata=_meta(graded_cell_id(exercise, name), grade=True, locked=True, points=cell_points),
            ))
    else:
        # The grade is the course grader's (hidden checks included): the
        # public tests earn nothing of their own, and the one graded cell
        # says so. `grader push nbgrader` writes its score and comment.
        for name in names:
            cells.append(new_code_cell(
                f"# Public test {name}: a check for you (it earns no points itself; see the grade cell below)\n"
                f"tests_{exercise.id}.run({name!r}, globals())",
                metadata=_meta(graded_cell_id(exercise, name), locked=True),
            ))
        cells.append(new_markdown_cell(GRADE_CELL.format(points=f"{total:g}"),
                                       metadata=_task_meta(grade_cell_id(exercise), total)))
    notebook = new_notebook(cells=cells, metadata={
        "kernelspec": dict(KERNELSPEC),
        "language_info": {"name": "python"},
    })
    # Cell ids (nbformat 4.5) derived from the grade ids: regenerating the
    # same exercise gives the same file, so releases diff cleanly.
    for cell in notebook.cells:
        cell["id"] = cell.metadata["nbgrader"]["grade_id"].replace("_", "-")[:64]
    nbformat.validate(notebook)
    return notebook


def write_notebook(notebook: nbformat.NotebookNode, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(notebook, str(path))
    return path
