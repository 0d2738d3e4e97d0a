"""The attack corpus, end to end: every submission in attacks/ is a student
of one `grader grade` run (with a correct control student), and each must
get exactly the outcome expected.yaml gives it: no points won by cheating,
a clear status and reason, nothing forged on disk, and a gradebook whose
integrity check passes. The sandbox-level versions of many of these are
in tests/test_sandbox_redteam.py; this is what a grader's user sees."""
from __future__ import annotations

import glob
import hashlib
import shutil
import time
from pathlib import Path

import pytest
import yaml

from grader.course import REPO_ROOT
from classrun import results
from redteam.corpus import assert_outcome, grade_folder

HERE = Path(__file__).parent
ATTACKS = sorted(p.name for p in (HERE / "attacks").iterdir() if p.is_dir())
EXPECTED = yaml.safe_load((HERE / "expected.yaml").read_text())
CANARIES = ["/tmp/redteam-canary-*", str(REPO_ROOT / "fill.bin"), str(REPO_ROOT / "redteam-canary-*")]
# Attacks a15/a16 wait 3-4 s after their import before they rewrite files;
# waiting longer than that after the run shows whether anything survived.
OUTLIVE_WAIT_S = 6


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _remove_canaries() -> None:
    for pattern in CANARIES:
        for path in glob.glob(pattern):
            shutil.rmtree(path, ignore_errors=True) if Path(path).is_dir() else Path(path).unlink()


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """Grade the whole corpus once; return (results by student, the run's folder, its output)."""
    _remove_canaries()
    root = tmp_path_factory.mktemp("redteam")
    subs = root / "submissions"
    shutil.copytree(HERE / "attacks", subs)
    (subs / "control" / "01_softmax").mkdir(parents=True)
    shutil.copy(REPO_ROOT / "solutions" / "01_softmax" / "softmax.py", subs / "control" / "01_softmax")
    reference = _digest(REPO_ROOT / "solutions" / "01_softmax" / "softmax.py")
    graded, output = grade_folder(subs, root, "--timeout", "5")
    snapshot = {p: _digest(p) for p in [root / "grades.db", *(root / "out").glob("*.*")]}
    time.sleep(OUTLIVE_WAIT_S)
    assert {p: _digest(p) for p in snapshot} == snapshot, "a file changed after grading ended"
    assert _digest(REPO_ROOT / "solutions" / "01_softmax" / "softmax.py") == reference
    return {student: r for (student, _), r in graded.items()}, root, output


def test_every_attack_has_an_expected_outcome():
    assert len(ATTACKS) >= 30
    assert sorted(EXPECTED) == ATTACKS


@pytest.mark.parametrize("name", ATTACKS)
def test_attack_gets_its_expected_outcome(graded, name):
    by_student, _, _ = graded
    result, expected = by_student[name], EXPECTED[name]
    assert result["exercise"] == "01" and result["max_points"] == 10
    assert_outcome(result, expected)


def test_control_gets_full_marks_and_nothing_else_appears(graded):
    by_student, root, _ = graded
    assert by_student["control"]["points"] == 10 and by_student["control"]["status"] == "graded"
    assert sorted(by_student) == sorted([*ATTACKS, "control"])  # no forged or ghost rows
    assert len(results(root / "grades.db")) == len(ATTACKS) + 1  # results() asserts integrity


def test_no_attack_left_anything_outside_its_sandbox(graded):
    assert [p for pattern in CANARIES for p in glob.glob(pattern)] == []
