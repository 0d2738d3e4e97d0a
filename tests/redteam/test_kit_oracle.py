"""No answer in the student kit, end to end (issue 36): each submission in
kit_oracle/ (``kNN-<exercise>-...``) is a student of one `grader grade` run
of the exercises they name (with the references as a control) and gets the
outcome kit_oracle/expected.yaml gives it: a GPT (12), encoder (09),
decoder (10), Transformer (11) or generate (13) that computes its values
with the oracle the kit used to ship, with the grader's copy of it, or with
PyTorch's own layers scores 0, and so does a right one that tampers with the result
channel."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from grader.course import REPO_ROOT, load_course
from redteam.corpus import assert_outcome, grade_folder

HERE = Path(__file__).parent / "kit_oracle"
SUBMISSIONS = sorted(p.name for p in HERE.iterdir() if p.is_dir())
EXPECTED = yaml.safe_load((HERE / "expected.yaml").read_text())
EXERCISES = tuple(sorted({name.split("-")[1] for name in SUBMISSIONS}))


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    root = tmp_path_factory.mktemp("kit-oracle")
    subs = root / "submissions"
    shutil.copytree(HERE, subs, ignore=shutil.ignore_patterns("*.yaml", "__pycache__"))
    course = load_course(check_files=False)
    for exercise in map(course.exercise, EXERCISES):
        (subs / "control" / exercise.folder).mkdir(parents=True)
        shutil.copy(REPO_ROOT / "solutions" / exercise.folder / exercise.module, subs / "control" / exercise.folder)
    graded, _ = grade_folder(subs, root, "--timeout", "120", exercises=EXERCISES, timeout_s=1800)
    return graded


def test_every_submission_has_an_expected_outcome():
    assert sorted(EXPECTED) == SUBMISSIONS


@pytest.mark.parametrize("name", SUBMISSIONS)
def test_submission_gets_its_expected_outcome(graded, name):
    exercise = name.split("-")[1]
    result, expected = graded[(name, exercise)], EXPECTED[name]
    assert_outcome(result, expected)
    if "forbidden" in expected:
        # Said by the checks whose recorded calls ran it (the no-forbidden-calls
        # check itself may only say that it needs them).
        assert any(expected["forbidden"] in c["reason"] for c in result["checks"] if not c["passed"]), result


@pytest.mark.parametrize("exercise", EXERCISES)
def test_the_reference_gets_full_marks(graded, exercise):
    result = graded[("control", exercise)]
    assert result["status"] == "graded" and result["points"] == result["max_points"], result
