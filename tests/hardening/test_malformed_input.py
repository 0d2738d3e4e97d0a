"""Malformed input, end to end: every case of malformed.py is one student
of a single `grader grade` run beside a correct control student. Each gets
a clear message (in its result's reason, or in the grader's log when no
result can be keyed to it), the run still exits 0, and every other
submission, the control first, is graded as usual."""
from __future__ import annotations

import json
import shutil

import pytest

from grader.course import REPO_ROOT
from classrun import grade_cli, results
from hardening.malformed import CASES

CONTROL = "control"


@pytest.fixture(scope="module")
def graded(course, tmp_path_factory):
    root = tmp_path_factory.mktemp("malformed")
    subs = root / "submissions"
    (subs / CONTROL / "01_softmax").mkdir(parents=True)
    shutil.copy(REPO_ROOT / "solutions" / "01_softmax" / "softmax.py", subs / CONTROL / "01_softmax")
    for case in CASES:
        case.build(subs / case.student, course.exercise("01"))
    run = grade_cli(subs, root / "grades.db", root / "out", "--timeout", "20")
    output = run.communicate(timeout=600)[0]
    assert run.returncode == 0, output
    by_student = {r["student"]: r for r in json.loads((root / "out" / "results.json").read_text())}
    return by_student, " ".join(output.split()), root  # the log re-joined: rich wraps long lines


def test_table_has_enough_cases():
    assert len(CASES) >= 15 and len({c.student for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[c.student for c in CASES])
def test_malformed_input_gets_a_clear_message(graded, case):
    by_student, log, _ = graded
    if case.where == "log":
        assert case.student not in by_student
        assert case.reason in log
        return
    result = by_student[case.student]
    assert result["points"] == 0, result
    messages = [result["reason"], *(c["reason"] for c in result["checks"])]
    assert any(case.reason.lower() in m.lower() for m in messages), messages


def test_every_other_submission_is_still_graded(graded):
    by_student, _, root = graded
    assert by_student[CONTROL]["points"] == 10 and by_student[CONTROL]["status"] == "graded"
    expected = {CONTROL, *(c.student for c in CASES if c.where == "result")}
    # A folder name that is no student id is recorded under a placeholder id, as unreadable.
    placeholders = {s for s in by_student if s.startswith("unusable-id-")}
    assert len(placeholders) == sum(c.where == "log" for c in CASES)
    assert all(by_student[s]["status"] == "unreadable" for s in placeholders)
    assert set(by_student) - placeholders == expected
    assert len(results(root / "grades.db")) == len(by_student)  # integrity check included


def test_nothing_escaped_from_an_archive(graded):
    _, _, root = graded
    assert not list(root.rglob("escaped.py")) and not (REPO_ROOT / "escaped.py").exists()
    assert not list(REPO_ROOT.parent.glob("escaped.py"))
