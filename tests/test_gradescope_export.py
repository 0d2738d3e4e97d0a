"""The Gradescope export round trip: ``grader export gradescope`` writes a
zip; unpacked as Gradescope would (``/autograder/source``), its
``run_autograder`` grades a submission folder into ``results/results.json``.
AUTOGRADER_ROOT points it at a temporary layout and AUTOGRADER_PYTHON at this
venv's interpreter (instead of running setup.sh)."""
import json
import os
import shutil
import subprocess
import sys
import zipfile

import pytest

from grader.course import REPO_ROOT
from grader.course.pitfalls import load_variants

TEST_KEYS = {"name", "score", "max_score", "status", "visibility", "output"}


@pytest.fixture(scope="module")
def autograder(tmp_path_factory):
    """The exported zip for exercise 01, unpacked into ROOT/source."""
    tmp = tmp_path_factory.mktemp("gradescope")
    out = subprocess.run([sys.executable, "-m", "grader", "export", "gradescope", str(tmp / "ag.zip"), "-e", "01"],
                         cwd=REPO_ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    with zipfile.ZipFile(tmp / "ag.zip") as zf:
        names = zf.namelist()
        modes = {i.filename: i.external_attr >> 16 for i in zf.infolist()}
        zf.extractall(tmp / "autograder" / "source")
    assert {"setup.sh", "run_autograder", "requirements.txt", "course.yaml"} <= set(names)
    assert modes["run_autograder"] & 0o111 and modes["setup.sh"] & 0o111
    assert "torch==2.13.0" in (tmp / "autograder" / "source" / "requirements.txt").read_text()
    assert not any(n.startswith("exams/") for n in names)     # exam questions stay home
    return tmp / "autograder"


def _run(root, files):
    """Grade a submission made of ``files`` (name -> text); the results."""
    shutil.rmtree(root / "submission", ignore_errors=True)
    shutil.rmtree(root / "results", ignore_errors=True)
    for name, text in files.items():
        (root / "submission" / name).parent.mkdir(parents=True, exist_ok=True)
        (root / "submission" / name).write_text(text)
    env = {**os.environ, "AUTOGRADER_ROOT": str(root), "AUTOGRADER_PYTHON": sys.executable}
    run = subprocess.run(["bash", str(root / "source" / "run_autograder")], env=env, capture_output=True,
                         text=True, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    results = json.loads((root / "results" / "results.json").read_text())
    for test in results["tests"]:
        assert set(test) == TEST_KEYS
        assert 0 <= test["score"] <= test["max_score"]
    return results, run.stdout


def _no_leak(results, root):
    text = json.dumps(results, ensure_ascii=False)
    # No path of the instructor's files, no reference source line.
    assert str(root) not in text and "solutions" not in text
    reference = (REPO_ROOT / "solutions" / "01_softmax" / "softmax.py").read_text()
    body = [line.strip() for line in reference.splitlines() if len(line.strip()) > 25 and not line.strip().startswith("#")]
    assert body and not any(line in text for line in body)


def test_reference_gets_full_marks(autograder, course):
    exercise = course.exercise("01")
    source = (REPO_ROOT / "solutions" / exercise.folder / exercise.module).read_text()
    results, _ = _run(autograder, {exercise.module: source})       # a bare file, as Gradescope uploads it
    assert results["tests"] and all(t["status"] == "passed" for t in results["tests"])
    assert sum(t["score"] for t in results["tests"]) == pytest.approx(exercise.points)
    assert any("在" in t["output"] or "的" in t["output"] for t in results["tests"])    # Chinese too
    _no_leak(results, autograder)


def test_pitfall_variant_is_partial_with_its_hint(autograder, course):
    exercise = course.exercise("01")
    pitfall_id, variant = next(iter(load_variants(exercise, REPO_ROOT).items()))
    results, _ = _run(autograder, {f"{exercise.folder}/{exercise.module}": variant.source})
    failed = [t for t in results["tests"] if t["status"] == "failed"]
    assert failed and sum(t["score"] for t in results["tests"]) < exercise.points
    hint = course.pitfall(pitfall_id).hint
    assert any(hint.en in t["output"] and hint.zh in t["output"] for t in failed)
    _no_leak(results, autograder)


def test_broken_submission_scores_zero_with_reasons(autograder, course):
    exercise = course.exercise("01")
    results, _ = _run(autograder, {exercise.module: "def softmax(x, dim=-1)\n    return x\n"})
    assert results["tests"] and all(t["score"] == 0 for t in results["tests"])
    assert all("Not passed" in t["output"] for t in results["tests"])
    _no_leak(results, autograder)


def test_empty_submission_is_not_submitted(autograder):
    results, _ = _run(autograder, {"notes.txt": "nothing here"})
    assert all(t["score"] == 0 for t in results["tests"]) and "not submitted / 未提交" in results["output"]
