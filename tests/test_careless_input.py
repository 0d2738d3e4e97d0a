"""Careless input gets a clear answer (issue 15, item 8): each mistake an
instructor can make on the command line is refused before any work, with
exit status 2, the option or folder named, and no traceback."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from grader.course import REPO_ROOT
from grader.gradebook import Gradebook

# (case id, argv with {class}/{student}/{empty}/{db}/{tmp} placeholders, text the answer must contain)
CASES = [
    ("timeout-negative", ["grade", "{class}", "--timeout", "-5"], "--timeout"),
    ("timeout-zero", ["grade", "{class}", "--timeout", "0"], "--timeout"),
    ("timeout-nan", ["grade", "{class}", "--timeout", "nan"], "--timeout"),
    ("memory-zero", ["grade", "{class}", "--memory", "0"], "--memory"),
    ("memory-tiny", ["grade", "{class}", "--memory", "16"], "--memory"),
    ("jobs-zero", ["grade", "{class}", "--jobs", "0"], "--jobs"),
    ("grade-missing-folder", ["grade", "{tmp}/no-such-class"], "does not exist"),
    ("grade-one-student", ["grade", "{student}"], "ONE student's folder"),
    ("grade-checkout", ["grade", "{checkout}"], "ONE student's folder"),
    ("grade-the-course-repository", ["grade", "{repository}"], "is the course repository"),
    ("grade-one-nbgrader-student", ["grade", "{nbgrader_student}"], "ONE student's folder"),
    ("grade-empty-class", ["grade", "{empty}"], "holds no submission"),
    ("grade-unknown-exercise", ["grade", "{class}", "-e", "99", "--db", "{tmp}/g.db", "--out", "{tmp}/o"], "99"),
    ("grade-unknown-assignment", ["grade", "{class}", "--assignment", "nope", "--db", "{tmp}/g.db"], "nope"),
    ("grade-unknown-exam", ["grade", "{class}", "--exam", "nope", "--db", "{tmp}/g.db"], "nope"),
    ("grade-unknown-executor", ["grade", "{class}", "--executor", "slurm", "--db", "{tmp}/g.db"], "slurm"),
    ("exam-grade-unknown-exam", ["exam", "grade", "nope", "{class}"], "nope"),
    ("exam-grade-one-student", ["exam", "grade", "midterm", "{student}"], "ONE student's folder"),
    ("exam-grade-empty", ["exam", "grade", "midterm", "{empty}"], "holds no submission"),
    ("exam-variant-unknown", ["exam", "variant", "nope", "s1", "--no-key"], "nope"),
    ("similarity-empty", ["similarity", "{empty}"], "holds no submission"),
    ("similarity-unknown-exercise", ["similarity", "{class}", "-e", "99"], "99"),
    ("similarity-json-missing-folder", ["similarity", "{class}", "--json", "{tmp}/nowhere/s.json"], "--json"),
    ("selftest-unknown-exercise", ["selftest", "99"], "99"),
    ("check-unknown-exercise", ["check", "99"], "99"),
    ("check-json-missing-folder", ["check", "01", "--json", "{tmp}/nowhere/m.json"], "--json"),
    ("push-mistyped-nbgrader-db", ["push", "nbgrader", "attention", "--db", "{db}", "--nbgrader-db",
                                   "{tmp}/gradebok.db"], "--nbgrader-db"),
    ("push-missing-db", ["push", "nbgrader", "attention", "--db", "{tmp}/nope.db"], "--db"),
    ("push-unknown-assignment", ["push", "nbgrader", "nope", "--db", "{db}", "--nbgrader-db", "{db}"], "nope"),
    ("export-csv-missing-folder", ["export", "csv", "{tmp}/no-such-dir/grades.csv", "--db", "{db}"], "does not exist"),
    ("export-csv-missing-db", ["export", "csv", "{tmp}/grades.csv", "--db", "{tmp}/nope.db"], "--db"),
    ("export-gradescope-missing-folder", ["export", "gradescope", "{tmp}/no-such-dir/a.zip"], "does not exist"),
    ("export-gradescope-unknown-assignment", ["export", "gradescope", "{tmp}/a.zip", "--assignment", "nope"], "nope"),
    ("grade-extensions-missing", ["grade", "{class}", "--extensions", "{tmp}/nope.csv"], "--extensions"),
    ("grade-extensions-unknown-assignment", ["grade", "{class}", "--extensions", "{bad_extensions}", "--db",
                                            "{tmp}/g.db"], "no assignment or exercise 'nope'"),
    ("grade-timestamps-not-a-time", ["grade", "{class}", "--timestamps", "{bad_timestamps}", "--db", "{tmp}/g.db"],
     "submitted_at: not an ISO time"),
    ("grade-db-is-a-folder", ["grade", "{class}", "--db", "{tmp}"], "--db"),
    ("grade-unknown-student", ["grade", "{class}", "--student", "nobody"], "--student"),
    ("grade-exam-force", ["grade", "{class}", "--exam", "midterm", "--force"], "--force"),
    ("adjust-no-reason", ["adjust", "s1", "01", "--delta", "1", "--db", "{db}"], "--reason"),
    ("adjust-two-changes", ["adjust", "s1", "01", "--delta", "1", "--points", "2", "--reason", "x", "--db", "{db}"],
     "exactly one of --points, --delta, --clear"),
    ("adjust-unknown-exercise", ["adjust", "s1", "99", "--delta", "1", "--reason", "x", "--db", "{db}"], "EXERCISE"),
    ("adjust-no-result", ["adjust", "s1", "01", "--delta", "1", "--reason", "x", "--db", "{db}"], "STUDENT"),
    ("adjust-missing-db", ["adjust", "s1", "01", "--delta", "1", "--reason", "x", "--db", "{tmp}/no.db"], "--db"),
    ("export-canvas-unknown-id-column", ["export", "canvas", "{tmp}/c.csv", "--db", "{db}", "--id-column", "name"],
     "--id-column"),
    ("export-moodle-missing-folder", ["export", "moodle", "{tmp}/nowhere/m.csv", "--db", "{db}"], "does not exist"),
    ("release-student-unknown-through", ["release", "student", "{tmp}/rel", "--through", "nope"], "--through"),
    ("release-nbgrader-unknown-assignment", ["release", "nbgrader", "{tmp}/nb", "-a", "nope"], "--assignment"),
]


@pytest.fixture(scope="module")
def places(tmp_path_factory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("careless")
    klass = tmp / "class"
    (klass / "s1" / "01_softmax").mkdir(parents=True)
    (klass / "s1" / "01_softmax" / "softmax.py").write_text("def softmax(x, dim=-1):\n    return x\n")
    checkout = tmp / "checkout"
    (checkout / "exercises" / "01_softmax").mkdir(parents=True)
    (checkout / "README.md").write_text("the student's clone\n")
    (tmp / "submitted" / "s1" / "attention").mkdir(parents=True)       # nbgrader's collected layout
    (tmp / "submitted" / "s1" / "attention" / "01_softmax.ipynb").write_text("{}")
    (tmp / "empty").mkdir()
    (tmp / "empty" / ".DS_Store").write_text("")        # hidden files are no submission
    with Gradebook(tmp / "grades.db"):
        pass
    (tmp / "ext.csv").write_text("student_id,assignment,extra_min\ns1,nope,60\n")
    (tmp / "stamps.csv").write_text("student_id,submitted_at\ns1,last tuesday\n")
    return {"nbgrader_student": tmp / "submitted" / "s1", "bad_extensions": tmp / "ext.csv", "bad_timestamps": tmp / "stamps.csv", "class": klass, "student": klass / "s1", "checkout": checkout, "repository": REPO_ROOT, "empty": tmp / "empty",
            "db": tmp / "grades.db", "tmp": tmp}


# These also run as a real `python -m grader` process (exit status, no
# traceback on the terminal): one per kind of refusal (an option's value, a
# missing path, an unknown id from course.yaml, a gradebook that is not
# there, options that exclude each other, a folder that is one student's).
# The rest run in this process through the same typer app (a subprocess each
# cost ~3 s of torch imports, and a grade command a fork-server besides).
REAL_PROCESS = {"timeout-negative", "grade-missing-folder", "check-unknown-exercise", "push-missing-db",
                "adjust-two-changes", "exam-grade-one-student"}


def _answer(argv: list[str], real_process: bool, monkeypatch) -> tuple[int, str, str]:
    """(exit status, what the user sees, an escaped exception or "") of `grader ARGV`."""
    if real_process:
        # A wide terminal: click's error box must not wrap the option's name.
        run = subprocess.run([sys.executable, "-m", "grader", *argv], cwd=REPO_ROOT, capture_output=True,
                             text=True, timeout=120, env={**os.environ, "COLUMNS": "400"})
        return run.returncode, run.stdout + run.stderr, ""
    from typer.testing import CliRunner

    from grader.cli import app

    monkeypatch.setenv("COLUMNS", "400")
    monkeypatch.chdir(REPO_ROOT)
    result = CliRunner().invoke(app, argv)
    # Anything but SystemExit escaping the command is the traceback a user would see.
    escaped = "" if result.exception is None or isinstance(result.exception, SystemExit) else repr(result.exception)
    return result.exit_code, result.output, escaped


@pytest.mark.parametrize("argv, named, real_process",
                         [pytest.param(a, n, i in REAL_PROCESS, id=i + ("-process" if i in REAL_PROCESS else ""))
                          for i, a, n in CASES])
def test_careless_input_is_refused_clearly(places, argv, named, real_process, monkeypatch):
    args = [part.format(**{k: str(v) for k, v in places.items()}) for part in argv]
    status, answer, escaped = _answer(args, real_process, monkeypatch)
    assert not escaped, escaped
    assert status == 2, answer
    assert named in answer, answer
    assert "Traceback" not in answer, answer


def test_every_real_process_case_is_a_case():
    assert REAL_PROCESS <= {case_id for case_id, _, _ in CASES}


def test_a_mistyped_nbgrader_db_is_not_created(places, monkeypatch):
    mistyped = places["tmp"] / "gradebok-typo.db"
    _answer(["push", "nbgrader", "attention", "--db", str(places["db"]), "--nbgrader-db", str(mistyped)], False,
            monkeypatch)
    assert not mistyped.exists()


def test_a_class_folder_is_not_mistaken_for_one_student(places):
    from grader.cli.input_checks import class_folder_problem

    assert class_folder_problem(places["class"]) is None
    assert class_folder_problem(places["tmp"] / "submitted", {"attention"}) is None


def test_grading_into_the_output_of_another_gradebook_is_refused(tmp_path):
    """Issue 34, item 6: --out of another class silently lost its grades.csv and report."""
    student = tmp_path / "class" / "ana" / "01_softmax"
    student.mkdir(parents=True)
    (student / "softmax.py").write_bytes((REPO_ROOT / "exercises" / "01_softmax" / "softmax.py").read_bytes())

    def grade(db: str, out: str = "out") -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "grader", "grade", str(tmp_path / "class"), "-e", "01", "-j", "1",
                               "--db", str(tmp_path / db), "--out", str(tmp_path / out)],
                              cwd=REPO_ROOT, capture_output=True, text=True, timeout=600)

    assert grade("first.db").returncode == 0
    before = (tmp_path / "out" / "grades.csv").read_bytes()
    assert grade("first.db").returncode == 0                        # the same gradebook may write again
    refused = grade("other.db")
    assert refused.returncode == 2 and "first.db" in refused.stderr and "Traceback" not in refused.stderr
    assert (tmp_path / "out" / "grades.csv").read_bytes() == before and not (tmp_path / "other.db").exists()
    shutil.copytree(tmp_path / "out", tmp_path / "moved" / "out")        # a class folder moved: still its own
    shutil.copy(tmp_path / "first.db", tmp_path / "moved" / "first.db")
    assert grade("moved/first.db", out="moved/out").returncode == 0
    (tmp_path / "out" / ".grader-output.json").unlink()              # output that no gradebook claims
    assert grade("first.db").returncode == 2


@pytest.mark.parametrize("missing, argv, extra", [
    ("copydetect", ["similarity", "{class}", "-e", "01"], "[grader]"),
    ("nbgrader", ["push", "nbgrader", "attention", "--db", "{db}", "--nbgrader-db", "{db}"], "[release]"),
])
def test_a_missing_optional_package_gets_an_install_hint(tmp_path, missing, argv, extra):
    """Issue 34, item 10: a traceback or a bare 'No module named...' instead of what to install."""
    (tmp_path / "class" / "ana" / "01_softmax").mkdir(parents=True)
    (tmp_path / "class" / "ana" / "01_softmax" / "softmax.py").write_text("x = 1\n")
    with Gradebook(tmp_path / "g.db"):
        pass
    args = [a.replace("{class}", str(tmp_path / "class")).replace("{db}", str(tmp_path / "g.db")) for a in argv]
    code = (f"import runpy, sys; sys.modules[{missing!r}] = None; sys.argv = ['grader', *{args!r}]; "
            "runpy.run_module('grader', run_name='__main__')")
    run = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert run.returncode == 2, run.stdout + run.stderr
    assert f"needs {missing}" in run.stderr and f"pip install -e '.{extra}'" in run.stderr
    assert "Traceback" not in run.stderr
