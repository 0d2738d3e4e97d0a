"""No answer in the student kit, end to end (issue 36): each submission in
kit_oracle/ is a student of one `grader grade` run of exercise 12 (with the
reference as a control) and gets the outcome kit_oracle/expected.yaml
gives it: a GPT that computes its logits with the oracle the kit used to
ship, with the grader's copy of it, or with PyTorch's own layers scores 0,
and so does a right one that tampers with the result channel."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from grader.course import REPO_ROOT
from redteam.corpus import assert_outcome, grade_folder

HERE = Path(__file__).parent / "kit_oracle"
SUBMISSIONS = sorted(p.name for p in HERE.iterdir() if p.is_dir())
EXPECTED = yaml.safe_load((HERE / "expected.yaml").read_text())
CHECK = "12-no-forbidden-calls"


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    root = tmp_path_factory.mktemp("kit-oracle")
    subs = root / "submissions"
    shutil.copytree(HERE, subs, ignore=shutil.ignore_patterns("*.yaml", "__pycache__"))
    (subs / "control" / "12_gpt").mkdir(parents=True)
    shutil.copy(REPO_ROOT / "solutions" / "12_gpt" / "gpt.py", subs / "control" / "12_gpt")
    graded, _ = grade_folder(subs, root, "--timeout", "120", exercises=("12",), timeout_s=1200)
    return {student: r for (student, _), r in graded.items()}


def test_every_submission_has_an_expected_outcome():
    assert sorted(EXPECTED) == SUBMISSIONS


@pytest.mark.parametrize("name", SUBMISSIONS)
def test_submission_gets_its_expected_outcome(graded, name):
    result, expected = graded[name], EXPECTED[name]
    assert result["exercise"] == "12"
    assert_outcome(result, expected)
    if "forbidden" in expected:
        verdict = next(c for c in result["checks"] if c["id"] == CHECK)
        assert not verdict["passed"] and expected["forbidden"] in verdict["reason"], result


def test_the_reference_gets_full_marks(graded):
    result = graded["control"]
    assert result["status"] == "graded" and result["points"] == result["max_points"], result
