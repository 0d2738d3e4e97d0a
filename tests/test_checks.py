"""`grader check` for every exercise: through the hidden checks in the
sandbox, the reference scores full marks, the untouched stub scores zero,
and every pitfall variant loses points with a failed check that declares
its pitfall (see grader/proofs/check_matrix.py)."""
from concurrent.futures import ThreadPoolExecutor

import pytest

from grader.proofs.check_matrix import check_exercise
from grader.course import load_course

EXERCISES = load_course().exercises


@pytest.fixture(scope="module")
def fixed_judge(judge):
    """The session judge on each check's own inputs, as `grader check`
    grades: the catalogue is proved on the inputs its variants were written
    against, and the reference's and variants' runs on them are the ones the
    session judge already keeps (its per-submission draws start from them).
    (Per-submission inputs are tested by tests/test_hidden_inputs.py; on a
    random draw two variants can coincide, and the proof would then hinge
    on the draw.)"""
    return judge.on_fixed_inputs()


@pytest.fixture(scope="module")
def matrix(fixed_judge, tmp_path_factory):
    """Every exercise's matrix, through one judge on fixed inputs."""
    judge = fixed_judge
    workdirs = {exercise.id: tmp_path_factory.mktemp(exercise.folder) for exercise in EXERCISES}
    # Two exercises at a time (CI has two cores); the judge is thread-safe,
    # as when `grader grade --jobs 2` shares it.
    with ThreadPoolExecutor(max_workers=2) as pool:
        matrices = list(pool.map(lambda e: check_exercise(judge, e, workdirs[e.id]), EXERCISES))
    return {(exercise.id, row.case): row for exercise, rows in zip(EXERCISES, matrices) for row in rows}


@pytest.mark.parametrize("exercise", EXERCISES, ids=lambda e: e.folder)
def test_hidden_checks_keep_the_promise(exercise, matrix):
    rows = [row for (exercise_id, _), row in matrix.items() if exercise_id == exercise.id]
    cases = {row.case for row in rows}
    assert {"reference", "stub"} <= cases, f"no hidden checks ran for {exercise.folder}"
    assert {f"variant:{p.id}" for p in exercise.pitfalls} <= cases
    broken = [f"{row.case}: {row.problem} ({row.points:g}/{row.max_points:g}, hints {row.hints})"
              for row in rows if not row.ok]
    assert not broken, "\n".join(broken)


def test_a_variant_graded_on_its_kept_run_reads_as_a_fresh_run(fixed_judge, course, tmp_path):
    """`grader check` grades each variant on the run the judge keeps to
    compare against (Judge.grade(variant=...)): the verdicts are those of a
    run of the same code handed in as a submission."""
    from grader.course import REPO_ROOT
    from grader.course.pitfalls import load_variants
    from grader.intake.submissions import assemble

    exercise = course.exercise("01")
    for pitfall_id, variant in sorted(load_variants(exercise, REPO_ROOT).items()):
        folder = assemble(exercise, variant.source.encode(), tmp_path / pitfall_id, course)
        kept, fresh = (fixed_judge.grade(exercise, folder, tmp_path / "work", variant=name)
                       for name in (pitfall_id, None))
        assert [(v.check_id, v.passed, v.reason, v.confirmed) for v in kept.verdicts] == \
            [(v.check_id, v.passed, v.reason, v.confirmed) for v in fresh.verdicts], pitfall_id
