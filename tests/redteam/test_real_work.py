"""Points only for real work, end to end: each submission in real_work/
is a student of one `grader grade` run over exercises 04, 09, 10, 11, 13 and 14 (with
the references as controls), and each gets the outcome real_work/expected.yaml
gives it: checks that could pay without the core behaviour (decoding,
training, devices, dropout, structure) pay nothing without it, and structure
is what nn.Module registers, not what the module says. Issue 13, class 6."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from grader.course import REPO_ROOT, load_course
from redteam.corpus import assert_outcome, grade_folder

HERE = Path(__file__).parent / "real_work"
SUBMISSIONS = sorted(p.name for p in HERE.iterdir() if p.is_dir())
EXPECTED = yaml.safe_load((HERE / "expected.yaml").read_text())
EXERCISES = ("04", "09", "10", "11", "13", "14")


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    course = load_course()
    root = tmp_path_factory.mktemp("real-work")
    subs = root / "submissions"
    shutil.copytree(HERE, subs, ignore=shutil.ignore_patterns("*.yaml", "__pycache__"))
    for exercise_id in EXERCISES:
        exercise = course.exercise(exercise_id)
        (subs / f"control-{exercise_id}" / exercise.folder).mkdir(parents=True)
        shutil.copy(REPO_ROOT / "solutions" / exercise.folder / exercise.module,
                    subs / f"control-{exercise_id}" / exercise.folder)
    graded, _ = grade_folder(subs, root, "--timeout", "120", exercises=EXERCISES, timeout_s=1800)
    return {student: r for (student, _), r in graded.items() if r["status"] != "not_submitted"}


def test_every_submission_has_an_expected_outcome():
    assert len(SUBMISSIONS) >= 5
    assert sorted(EXPECTED) == SUBMISSIONS


@pytest.mark.parametrize("name", SUBMISSIONS)
def test_submission_gets_its_expected_outcome(graded, name):
    result, expected = graded[name], EXPECTED[name]
    assert result["exercise"] == expected["exercise"]
    assert_outcome(result, expected)
    passed = {check["id"] for check in result["checks"] if check["passed"]}
    assert not passed & set(expected["fails"]), result
    withheld = sum(c["max_points"] for c in result["checks"] if c["reason"].startswith("counts once"))
    assert withheld >= expected.get("withheld", 0), result


@pytest.mark.parametrize("exercise_id", EXERCISES)
def test_references_get_full_marks(graded, exercise_id):
    result = graded[f"control-{exercise_id}"]
    assert result["status"] == "graded" and result["points"] == result["max_points"], result
