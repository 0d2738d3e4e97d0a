import os
import sys
from pathlib import Path

import pytest

from grader.checks.inputs import HiddenInputs
from grader.course import load_course
from grader.proofs.selftest import check_exercises

# Hidden inputs are drawn per submission from the grading secret
# (grader/checks/inputs.py): tests use a fixed one, and every `grader`
# process they start inherits it (none creates .grading-secret in the checkout).
TEST_GRADING_SECRET = "tests-fixed-grading-secret-0123456789abcdef"
os.environ.setdefault("GRADER_GRADING_SECRET", TEST_GRADING_SECRET)

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
    every test that grades through it (tests/accuracy/,
    tests/test_observation.py, tests/test_judge.py, ...). A test that needs
    other limits or a fresh cache builds its own.

    Its hidden inputs are drawn as for a class, through the seeded path,
    but one draw per exercise (not per submission): the references' and
    variants' runs on it are then made once for the whole session instead
    of once per graded submission (this unit: about 800 s, then 235 s).
    ``GRADER_LONG_TESTS=1`` gives every submission its own draw, as
    ``grader grade`` does (tests/test_hidden_inputs.py tests that path)."""
    from grader.judge import Judge

    inputs = HiddenInputs if LONG_TESTS else OneDrawPerExercise
    return Judge(course, course_sandbox, inputs=inputs(TEST_GRADING_SECRET.encode()))


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


class OneDrawPerExercise(HiddenInputs):
    """Every submission of an exercise gets the same draw from the secret
    (still not the checks' own inputs): the session judge's (``judge``)."""

    def seed(self, exercise_id: str, source: bytes | None) -> int | None:
        return None if source is None else super().seed(exercise_id, b"one draw per exercise")


def pytest_runtest_setup(item: pytest.Item) -> None:
    # Soaks that repeat what a shorter test in CI already proves, by hand.
    if item.get_closest_marker("long") and not LONG_TESTS:
        pytest.skip("a long soak: GRADER_LONG_TESTS=1 runs it")


# Under pytest-xdist (`-n 2 --dist loadgroup`, scripts/test.sh) each worker
# has its own session. Scheduling (the controller sees only node ids): a test
# file stays on one worker, so its module fixtures (a graded attack corpus,
# an nbgrader world) are built once; the files that share a session result
# above form one unit, so it is computed once. (xdist's own xdist_group marks
# do not reach the node ids under pytest 9, hence this scheduler.)
SHARED_RESULT_FILES = {
    "judge": ["tests/accuracy/test_accuracy.py", "tests/test_judge.py",
              "tests/test_observation.py", "tests/test_checks_attention_weights.py",
              "tests/test_checks_self_attention.py", "tests/test_judge_confirmed.py", "tests/test_own_errors.py",
              "tests/test_public_subset_hidden.py", "tests/test_checks_observed.py", "tests/test_checks.py",
              "tests/test_hidden_inputs.py", "tests/test_kv_cache_work.py", "tests/test_sandbox_tamper.py",
              "tests/test_cached_steps_work.py", "tests/test_suspects_on_fixed_inputs.py",
              "tests/test_measured_again.py"],
    "sample-class": ["tests/test_grading.py", "tests/test_dask_executor.py"],
    # Not a shared result: the sandbox's own timing-sensitive tests (timeouts,
    # kills near a deadline) run one after another, never beside each other.
    "sandbox": ["tests/test_sandbox.py", "tests/test_sandbox_trust.py", "tests/test_sandbox_seccomp.py",
                "tests/test_sandbox_redteam.py"],
}
UNIT_OF_FILE = {path: unit for unit, paths in SHARED_RESULT_FILES.items() for path in paths}
SHARED_FIXTURES = {"judge": "judge", "course_sandbox": "judge", "graded_class": "sample-class"}
# The longest units first (a quiet 2-core machine, seconds in one process),
# so that neither worker is left with a long one at the end. (An order by a
# CI run's measured units was tried: 1617 s against 1294 s, on a machine
# slower throughout; kept as it was.)
LONGEST_FIRST = ["judge", "tests/test_watch_identity.py", "sample-class", "sandbox", "tests/test_release_nbgrader.py", "tests/test_exercises.py",
                 "tests/test_exam_nbgrader.py", "tests/test_watch.py", "tests/test_student_side.py",
                 "tests/test_term.py", "tests/test_gradescope_export.py",
                 "tests/hardening/test_exam_class_run.py", "tests/hardening/test_faults.py"]


def _unit(nodeid: str) -> str:
    path = nodeid.split("::", 1)[0]
    return UNIT_OF_FILE.get(path, path)


@pytest.hookimpl(tryfirst=True, optionalhook=True)  # optional: xdist may be absent
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class SharedResultScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _unit(nodeid)

    config.option.loadscopereorder = False  # keep LONGEST_FIRST's order
    return SharedResultScheduling(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not hasattr(config, "workerinput"):  # not an xdist worker: the order is pytest's
        return
    rank = {unit: i for i, unit in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(_unit(item.nodeid), len(rank)))  # stable: files stay whole
    for item in items:
        for fixture, unit in SHARED_FIXTURES.items():
            if fixture in getattr(item, "fixturenames", ()) and _unit(item.nodeid) != unit:
                item.warn(pytest.PytestWarning(
                    f"uses the session's {fixture!r} but its file is not in conftest's SHARED_RESULT_FILES"
                    f"[{unit!r}]: under xdist that result may be computed twice"))
                break


@pytest.fixture(scope="module")
def one_thread():
    """torch on one thread for a module's tests (the hidden checks' unit
    tests run probes here, where a second thread costs more than it saves)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
