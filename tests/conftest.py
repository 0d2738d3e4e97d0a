import sys
from pathlib import Path

import pytest

from grader.course import load_course
from grader.proofs.selftest import check_exercises

# tests/classrun.py (helpers for end-to-end `grader grade` runs) is imported
# as `classrun` from tests in any folder below this one.
sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture(scope="session")
def course():
    return load_course()


@pytest.fixture(scope="session")
def midterm(course):
    """The course's sample exam (course.yaml, exams)."""
    return course.exam("midterm")


@pytest.fixture(scope="session")
def selftest_reports(course, tmp_path_factory):
    """Public tests of every exercise against its reference, its untouched
    stub and each pitfall variant: one run for the whole session."""
    reports = check_exercises(course, course.exercises, tmp_path_factory.mktemp("public-runs"))
    return {report.exercise.id: report for report in reports}


@pytest.fixture(scope="session")
def submissions(course, tmp_path_factory):
    """A class of CLASS_SIZE students for exercise 01: correct, stub, broken,
    each pitfall (tests/test_grading.py, tests/test_dask_executor.py)."""
    from classrun import CLASS_SIZE, write_class

    return write_class(course, tmp_path_factory.mktemp("class"), CLASS_SIZE)
