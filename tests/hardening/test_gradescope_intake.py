"""Gradescope's run (grader/scale/gradescope_run.py) reads the submission
as `grader grade` does: in place, following nothing. A link, a FIFO or a
broken notebook gives a failed "readable" test worth the exercise's points
and a fixed reason, never a crash or a hang; a correct bare module beside
nothing hostile gets full marks."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile

import pytest

from grader.course import REPO_ROOT
from grader.scale.gradescope_run import main

REFERENCE = (REPO_ROOT / "solutions" / "01_softmax" / "softmax.py").read_bytes()


@pytest.fixture(scope="module")
def autograder(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("gradescope-intake")
    out = subprocess.run([sys.executable, "-m", "grader", "export", "gradescope", str(tmp / "ag.zip"), "-e", "01"],
                         cwd=REPO_ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    with zipfile.ZipFile(tmp / "ag.zip") as zf:
        zf.extractall(tmp / "autograder" / "source")
    return tmp / "autograder"


def _results(root, build) -> dict:
    submission = root / "submission"
    if submission.exists() or submission.is_symlink():
        subprocess.run(["rm", "-rf", str(submission), str(root / "results")], check=True)
    build(submission)
    assert main(["run", str(root)]) == 0
    return json.loads((root / "results" / "results.json").read_text())


def _bare(submission):
    submission.mkdir()
    (submission / "softmax.py").write_bytes(REFERENCE)


def _fifo_beside(submission):
    _bare(submission)
    os.mkfifo(submission / "pipe")


def _linked_folder(submission):
    (submission / "01_softmax").parent.mkdir()
    os.symlink(REPO_ROOT / "solutions" / "01_softmax", submission / "01_softmax")


def _broken_notebook(submission):
    submission.mkdir()
    (submission / "01_softmax.ipynb").write_bytes(b'{"cells": ' + b"[" * 20_000)


def test_a_correct_bare_module_gets_full_marks(autograder):
    results = _results(autograder, _bare)
    assert sum(t["score"] for t in results["tests"]) == pytest.approx(10)


@pytest.mark.parametrize("build, reason", [(_fifo_beside, "named pipe"), (_linked_folder, "symbolic link"),
                                           (_broken_notebook, "not a valid notebook")],
                         ids=["fifo", "linked-folder", "broken-notebook"])
def test_a_hostile_submission_is_unreadable_not_a_crash(autograder, build, reason):
    results = _results(autograder, build)
    assert sum(t["score"] for t in results["tests"]) == 0
    assert sum(t["max_score"] for t in results["tests"]) == pytest.approx(10)   # the points still count
    assert "unreadable" in results["output"] and reason in results["output"]
