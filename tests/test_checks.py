"""`grader check` for every exercise: through the hidden checks in the
sandbox, the reference scores full marks, the untouched stub scores zero,
and every pitfall variant loses points with a failed check that declares
its pitfall (see grader/proofs/check_matrix.py)."""
import pytest

from grader.proofs.check_matrix import check_exercise
from grader.course import load_course
from grader.judge import Judge
from grader.sandbox import Limits, Sandbox

EXERCISES = load_course().exercises


@pytest.fixture(scope="session")
def judge(course):
    with Sandbox(Limits(**course.grading.model_dump())) as sandbox:
        yield Judge(course, sandbox)


@pytest.fixture(scope="session")
def matrix(judge, tmp_path_factory):
    rows = {}
    for exercise in EXERCISES:
        for row in check_exercise(judge, exercise, tmp_path_factory.mktemp(exercise.folder)):
            rows[(exercise.id, row.case)] = row
    return rows


@pytest.mark.parametrize("exercise", EXERCISES, ids=lambda e: e.folder)
def test_hidden_checks_keep_the_promise(exercise, matrix):
    rows = [row for (exercise_id, _), row in matrix.items() if exercise_id == exercise.id]
    cases = {row.case for row in rows}
    assert {"reference", "stub"} <= cases, f"no hidden checks ran for {exercise.folder}"
    assert {f"variant:{p.id}" for p in exercise.pitfalls} <= cases
    broken = [f"{row.case}: {row.problem} ({row.points:g}/{row.max_points:g}, hints {row.hints})"
              for row in rows if not row.ok]
    assert not broken, "\n".join(broken)
