"""`grader similarity`: planted copies are flagged, independent correct
solutions and code every student was given are not."""
from __future__ import annotations

import json
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest

from grader.course import REPO_ROOT
from grader.report.similarity import similar_pairs
from grader.run.similarity import given_code

HERE = Path(__file__).parent


def _reference(folder: str, module: str) -> str:
    return (REPO_ROOT / "solutions" / folder / module).read_text()


def renamed(source: str) -> str:
    """A copy with every local name renamed and the comments stripped."""
    names = sorted(set(re.findall(r"\b([a-z_][a-z0-9_]*)\s*=(?!=)", source)) - {"self", "dim", "bias"})
    for i, name in enumerate(names):
        source = re.sub(rf"\b{name}\b", f"var{i}", source)
    return "\n".join(line.split("#")[0].rstrip() for line in source.splitlines())


def reordered(source: str, seed: int = 1) -> str:
    """A copy with its top-level functions and classes shuffled."""
    head, *definitions = re.split(r"\n(?=(?:def|class) )", source)
    random.Random(seed).shuffle(definitions)
    return head + "\n" + "\n".join(definitions)


@pytest.mark.parametrize("folder, module", [("06_multihead", "multihead.py"), ("11_transformer", "transformer.py"),
                                            ("03_masking", "attention.py")])
def test_planted_copies_are_flagged(course, folder, module):
    exercise = next(e for e in course.exercises if e.folder == folder)
    original = _reference(folder, module)
    report = similar_pairs(exercise.id, {"a": original, "b": renamed(original), "c": reordered(original)},
                           given_code(exercise))
    assert {(p.first, p.second) for p in report.pairs} == {("a", "b"), ("a", "c"), ("b", "c")}, report


def test_independent_correct_solutions_are_not_flagged(course):
    exercise = course.exercise("06")
    report = similar_pairs("06", {"reference": _reference("06_multihead", "multihead.py"),
                                  "independent": (HERE / "similarity" / "independent_multihead.py").read_text()},
                           given_code(exercise))
    assert report.compared == ["independent", "reference"] and report.pairs == []


def test_the_stub_and_shipped_code_are_boilerplate(course):
    exercise = course.exercise("06")
    stub = (REPO_ROOT / "exercises" / "06_multihead" / "multihead.py").read_text()
    report = similar_pairs("06", {"x": stub, "y": stub + "\n# started\n"}, given_code(exercise))
    assert report.pairs == [] and report.too_short == ["x", "y"]


def test_cli_lists_pairs_and_writes_json(tmp_path):
    subs = tmp_path / "class"
    original = _reference("06_multihead", "multihead.py")
    for student, source in [("s1", original), ("s2", renamed(original)),
                            ("s3", (HERE / "similarity" / "independent_multihead.py").read_text()),
                            ("s\x1b[2Jx", original)]:
        (subs / student / "06_multihead").mkdir(parents=True)
        (subs / student / "06_multihead" / "multihead.py").write_text(source)
    done = subprocess.run([sys.executable, "-m", "grader", "similarity", str(subs), "-e", "06",
                           "--json", str(tmp_path / "sim.json")], cwd=REPO_ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "'s1' ~ 's2'" in done.stdout and "s3" not in done.stdout
    assert "\x1b" not in done.stdout  # a folder name never reaches the terminal raw
    reports = json.loads((tmp_path / "sim.json").read_text())
    assert [(p["first"], p["second"]) for p in reports[0]["pairs"]] == [("s1", "s2")]


@pytest.mark.parametrize("args", [["--threshold", "1.5"], ["--threshold", "-1"], ["-e", "99"],
                                  ["--json", "/nonexistent/folder/out.json"]])
def test_cli_refuses_careless_options(tmp_path, args):
    (tmp_path / "class").mkdir()
    done = subprocess.run([sys.executable, "-m", "grader", "similarity", str(tmp_path / "class"), *args],
                          cwd=REPO_ROOT, capture_output=True, text=True)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
