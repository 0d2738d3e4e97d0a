import os
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
def course_sandbox(course):
    """One sandbox (one fork-server) with the course's own limits for the
    whole session: tests that only grade through it share it."""
    from grader.sandbox import Limits, Sandbox

    with Sandbox(Limits(**course.grading.model_dump())) as box:
        yield box


@pytest.fixture(scope="session")
def judge(course, course_sandbox):
    """One judge for the session, as one `grader grade` run has: each
    exercise's reference and pitfall variants run once and are shared by
    every test that grades through it (tests/test_checks.py, tests/accuracy/,
    tests/test_observation.py, tests/test_judge.py, ...). A test that needs
    other limits or a fresh cache builds its own."""
    from grader.judge import Judge

    return Judge(course, course_sandbox)


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


@pytest.fixture(scope="session")
def graded_class(submissions, tmp_path_factory) -> Path:
    """The `submissions` class graded once by a real `grader grade` process
    (--jobs 2, never interrupted): a folder with its grades.db and grading/.
    Read-only for the tests that share it (tests/test_grading.py compares
    reruns and resumed runs with it, tests/test_dask_executor.py a cluster's
    gradebook); a test that grades into it again works on a copy."""
    from classrun import grade_cli

    out = tmp_path_factory.mktemp("clean")
    run = grade_cli(submissions, out / "grades.db", out / "grading")
    output = run.communicate(timeout=600)[0]
    assert run.returncode == 0, output
    return out


LONG_TESTS = os.environ.get("GRADER_LONG_TESTS") == "1"


def pytest_runtest_setup(item: pytest.Item) -> None:
    # Soaks that repeat what a shorter test in CI already proves, by hand.
    if item.get_closest_marker("long") and not LONG_TESTS:
        pytest.skip("a long soak: GRADER_LONG_TESTS=1 runs it")


# Under pytest-xdist (`-n 2 --dist loadgroup`: scripts/test.sh in CI) each
# worker has its own session, so tests sharing a session result above go to
# one worker, which computes it once; every other test keeps its file's
# company, so module fixtures (a graded attack corpus, an nbgrader world) are
# built once too. A test file may still name its own xdist_group.
SHARED_SESSION_RESULTS = {"judge": "judge", "course_sandbox": "judge", "selftest_reports": "selftest",
                          "graded_class": "sample-class", "submissions": "sample-class"}


def _xdist_group(item: pytest.Item) -> str:
    for fixture, group in SHARED_SESSION_RESULTS.items():
        if fixture in getattr(item, "fixturenames", ()):
            return group
    return item.nodeid.split("::", 1)[0]


@pytest.hookimpl(tryfirst=True)  # before xdist's own, which reads the marks
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not getattr(config.option, "loadgroup", False):  # set by xdist for --dist loadgroup
        return
    for item in items:
        if item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(_xdist_group(item)))
