"""Manual adjustments and regrades (issue 15, item 2), end to end through
the CLI: an adjustment is recorded with who, when and why, shows in every
export beside the graded score, survives a regrade of the student, and a
regrade keeps the result it replaces."""
from __future__ import annotations

import csv
import json
import subprocess
import sys

import pytest

from grader.course import REPO_ROOT
from grader.gradebook import Gradebook
from grader.gradebook.adjustments import Adjustment, adjusted_points, chain_dict, in_effect


def _grader(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "grader", *map(str, args)], cwd=REPO_ROOT, capture_output=True,
                          text=True, timeout=600)


def _rows(path) -> dict[tuple[str, str], dict]:
    return {(r["student"], r["exercise"]): r for r in csv.DictReader(open(path, encoding="utf-8"))}


@pytest.fixture(scope="module")
def graded(course, tmp_path_factory):
    root = tmp_path_factory.mktemp("adjust")
    exercise = course.exercise("01")
    for student, side in (("ana", "solutions"), ("ben", "exercises")):      # full marks, and the untouched stub
        (root / "class" / student / exercise.folder).mkdir(parents=True)
        (root / "class" / student / exercise.folder / exercise.module).write_bytes(
            (REPO_ROOT / side / exercise.folder / exercise.module).read_bytes())
    run = _grader("grade", root / "class", "-e", "01", "--db", root / "grades.db", "--out", root / "grading", "-j", "1")
    assert run.returncode == 0, run.stdout + run.stderr
    return root


def test_an_adjustment_shows_beside_the_graded_score_and_survives_a_regrade(graded):
    db = graded / "grades.db"
    run = _grader("adjust", "ben", "01", "--delta", "1.5", "--reason", "explained it in office hours", "--by", "prof",
                  "--db", db)
    assert run.returncode == 0, run.stderr
    assert "now 1.5/" in run.stdout and "graded 0" in run.stdout
    assert _grader("export", "csv", graded / "export.csv", "--db", db).returncode == 0
    ben = _rows(graded / "export.csv")[("ben", "01")]
    assert (ben["points"], ben["graded_points"]) == ("1.5", "0")
    assert "by prof" in ben["adjustment"] and "+1.5 (explained it in office hours)" in ben["adjustment"]

    # Regrade ben alone: a new result is recorded, the old one kept, the adjustment still in effect.
    run = _grader("grade", graded / "class", "-e", "01", "--student", "ben", "--force", "--db", db,
                  "--out", graded / "grading", "-j", "1")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "graded 1 result(s)" in run.stderr
    with Gradebook(db) as book:
        assert [old.key.student for old, _ in book.superseded()] == ["ben"]
    rows = _rows(graded / "grading" / "grades.csv")
    assert set(rows) == {("ana", "01"), ("ben", "01")}           # the report is still the whole class's
    assert rows[("ben", "01")]["points"] == "1.5" and rows[("ana", "01")]["adjustment"] == ""
    results = {(r["student"], r["exercise"]): r for r in json.loads((graded / "grading" / "results.json").read_text())}
    assert results[("ben", "01")]["adjustment"]["by"] == "prof" and results[("ben", "01")]["graded_points"] == 0

    # A resumed run grades nothing and keeps the adjustment.
    run = _grader("grade", graded / "class", "-e", "01", "--db", db, "--out", graded / "grading", "-j", "1")
    assert "graded 0 result(s), 2 already in" in run.stderr
    assert _rows(graded / "grading" / "grades.csv")[("ben", "01")]["points"] == "1.5"

    # The newest adjustment wins; the history keeps every one, and the regrade.
    assert _grader("adjust", "ben", "01", "--points", "0.5", "--reason", "second look", "--db", db).returncode == 0
    history = _grader("adjust", "--list", "ben", "--db", db).stdout.splitlines()
    assert len(history) == 3, history
    assert "+1.5" in history[0] and "regraded" in history[1] and "= 0.5" in history[2]
    assert "[in effect]" in history[2] and "[in effect]" not in history[0]

    # A delta adds to the score now in effect (0.5), not to the judge's (0): issue 34, item 5.
    run = _grader("adjust", "ben", "01", "--delta", "0.25", "--reason", "third look", "--db", db)
    assert run.returncode == 0 and "now 0.75/" in run.stdout, run.stdout + run.stderr
    history = _grader("adjust", "--list", "ben", "--db", db).stdout.splitlines()
    assert "[in effect]" in history[2] and "[in effect]" in history[3] and "+0.25" in history[3]


def test_points_outside_the_range_are_refused(graded):
    run = _grader("adjust", "ana", "01", "--points", "999", "--reason", "x", "--db", graded / "grades.db")
    assert run.returncode == 2 and "--points" in run.stderr and "Traceback" not in run.stderr


def _adjustment(kind: str, value: float, at: float) -> Adjustment:
    return Adjustment("ben", "01", kind, value, "why", "prof", at, "1", "h", id=int(at))


@pytest.mark.parametrize("steps, expected", [
    ([("points", 9.5), ("delta", 0.3)], 9.8),             # the case: = 9.5 then +0.3
    ([("delta", 1.0), ("delta", 2.0)], 7.0),              # deltas add up on the judge's 4
    ([("points", 9.5), ("clear", 0.0), ("delta", 1.0)], 5.0),   # a clear starts again from the judge's score
    ([("delta", 9.0), ("delta", -1.0)], 9.0),             # each step is kept within 0..max (4 + 9 -> 10, then 9)
    ([("delta", 1.0), ("points", 2.0)], 2.0),             # points replace what came before
])
def test_a_delta_adds_to_the_score_in_effect(steps, expected):
    adjustments = [_adjustment(kind, value, at) for at, (kind, value) in enumerate(steps, start=1)]
    chain = in_effect(adjustments)[("ben", "01")]
    assert adjusted_points(4.0, 10.0, chain) == pytest.approx(expected)
    assert chain_dict(chain)["steps"][-1]["change"] == adjustments[-1].change()
