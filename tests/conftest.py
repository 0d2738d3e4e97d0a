import pytest

from grader.course import REPO_ROOT
from grader.pitfalls import load_variants

from grader.course import load_course
from grader.selftest import check_exercises


@pytest.fixture(scope="session")
def course():
    return load_course()


@pytest.fixture(scope="session")
def selftest_reports(course, tmp_path_factory):
    """Public tests of every exercise against its reference, its untouched
    stub and each pitfall variant: one run for the whole session."""
    reports = check_exercises(course, course.exercises, tmp_path_factory.mktemp("public-runs"))
    return {report.exercise.id: report for report in reports}


CLASS_SIZE = 14


@pytest.fixture(scope="session")
def submissions(course, tmp_path_factory):
    """A class of CLASS_SIZE students for exercise 01: correct, stub, broken, each pitfall
    (tests/test_grading.py, tests/test_dask_executor.py)."""
    exercise = course.exercise("01")
    sources = [(REPO_ROOT / "solutions" / exercise.folder / exercise.module).read_text(),
               (REPO_ROOT / "exercises" / exercise.folder / exercise.module).read_text(),
               "def softmax(x, dim=-1)\n    return x\n",
               *(v.source for v in load_variants(exercise, REPO_ROOT).values())]
    root = tmp_path_factory.mktemp("class")
    for i in range(CLASS_SIZE):
        folder = root / f"s{i:02d}" / exercise.folder
        folder.mkdir(parents=True)
        (folder / exercise.module).write_text(sources[i % len(sources)])
    return root
