"""The sandbox's attack corpus, round two (issue 13), end to end: every
submission in sandbox2/ is a student of one `grader grade` run (with a
correct control student), and each gets exactly the outcome expected.yaml
gives it. The classes: inputs stolen at import time (an error text, a hook
that waits on the call pipe), self-endings dressed up as kills from outside
(SIGKILL, abort, a closed result stream, SIGKILL by F_SETSIG, a timer or a
lowered CPU limit), and system calls no allow list names. How many times
each run ran is tested at the sandbox level (tests/test_sandbox_trust.py)."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from grader.course import REPO_ROOT
from redteam.corpus import assert_outcome, grade_folder

HERE = Path(__file__).parent / "sandbox2"
ATTACKS = sorted(p.name for p in HERE.iterdir() if p.is_dir())
EXPECTED = yaml.safe_load((HERE / "expected.yaml").read_text())
# What the attacks mark stolen text with (only when they stole something).
LEAK_MARKS = ("STOLEN-BY-HOOK", "STOLEN-AT-IMPORT")


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    root = tmp_path_factory.mktemp("redteam-sandbox2")
    subs = root / "submissions"
    shutil.copytree(HERE, subs, ignore=shutil.ignore_patterns("expected.yaml"))
    (subs / "control" / "01_softmax").mkdir(parents=True)
    shutil.copy(REPO_ROOT / "solutions" / "01_softmax" / "softmax.py", subs / "control" / "01_softmax")
    graded, output = grade_folder(subs, root, "--timeout", "5")
    return {student: r for (student, _), r in graded.items()}, root


def test_every_attack_has_an_expected_outcome():
    assert len(ATTACKS) >= 4
    assert sorted(EXPECTED) == ATTACKS


@pytest.mark.parametrize("name", ATTACKS)
def test_attack_gets_its_expected_outcome(graded, name):
    by_student, _ = graded
    result = by_student[name]
    assert result["exercise"] == "01" and result["max_points"] == 10
    assert_outcome(result, EXPECTED[name])


def test_no_hidden_input_or_stolen_text_reaches_the_results_or_the_pages(graded):
    _, root = graded
    texts = [path.read_text(errors="replace") for path in (root / "out").rglob("*") if path.is_file()
             and path.suffix in {".json", ".csv", ".html", ".md", ".txt"}]
    assert texts
    for mark in LEAK_MARKS:
        assert not any(mark in text for text in texts), mark


def test_control_gets_full_marks_and_nothing_else_appears(graded):
    by_student, _ = graded
    assert by_student["control"]["points"] == 10 and by_student["control"]["status"] == "graded"
    assert sorted(by_student) == sorted([*ATTACKS, "control"])
