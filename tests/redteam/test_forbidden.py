"""Forbidden calls, end to end: each submission in forbidden/ is a student
of one `grader grade` run of exercise 01 (with the reference as a control),
and each gets the outcome forbidden/expected.yaml gives it. The kernels are
observed in the sandbox and judged in the grader; the names are read from
the collected bytes in the grader. Issue 13, class 5."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from grader.course import REPO_ROOT
from redteam.corpus import assert_outcome, grade_folder

HERE = Path(__file__).parent / "forbidden"
SUBMISSIONS = sorted(p.name for p in HERE.iterdir() if p.is_dir())
EXPECTED = yaml.safe_load((HERE / "expected.yaml").read_text())
CHECK = "01-no-forbidden-calls"


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    root = tmp_path_factory.mktemp("forbidden")
    subs = root / "submissions"
    shutil.copytree(HERE, subs, ignore=shutil.ignore_patterns("*.yaml", "__pycache__"))
    (subs / "control" / "01_softmax").mkdir(parents=True)
    shutil.copy(REPO_ROOT / "solutions" / "01_softmax" / "softmax.py", subs / "control" / "01_softmax")
    graded, _ = grade_folder(subs, root, "--timeout", "20")
    return {student: r for (student, _), r in graded.items()}


def _verdicts(result: dict) -> dict[str, dict]:
    return {check["id"]: check for check in result["checks"]}


def test_every_submission_has_an_expected_outcome():
    assert len([name for name in SUBMISSIONS if name.startswith("f")]) >= 7
    assert sorted(EXPECTED) == SUBMISSIONS


@pytest.mark.parametrize("name", SUBMISSIONS)
def test_submission_gets_its_expected_outcome(graded, name):
    result, expected = graded[name], EXPECTED[name]
    assert result["exercise"] == "01"
    assert_outcome(result, expected)
    verdicts = _verdicts(result)
    if "forbidden" not in expected:
        assert all(v["passed"] for v in verdicts.values()), result
        return
    assert not verdicts[CHECK]["passed"] and expected["forbidden"] in verdicts[CHECK]["reason"], result
    # Right in every value (values are compared before kernels): the
    # built-in is the only thing that cost points, in every check (and,
    # for one that raises where it runs the built-in, that error: ``raises``).
    others = [v for check_id, v in verdicts.items() if check_id != CHECK]
    allowed = (f"counts once {CHECK} passes", verdicts[CHECK]["reason"])
    # A raised error is told with what it ran on (grader/own_errors.py): its reason starts with ``raises``.
    assert all(v["reason"] in allowed or ("raises" in expected and v["reason"].startswith(expected["raises"]))
               for v in others), result


def test_control_gets_full_marks(graded):
    assert graded["control"]["points"] == 10 and graded["control"]["status"] == "graded"
