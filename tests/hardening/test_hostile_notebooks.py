"""Hostile notebooks and nbgrader layouts (issue 18), in one `grader grade`
run beside control students: what the JSON parser cannot take (an unpaired
surrogate, 20,000 nested arrays, a 5,000-digit integer) is that student's
`unreadable`; what is correct but unusual (a `!=` line inside brackets,
IPython magics, a CRLF / BOM stub beside the notebook) is graded in full;
homework is never taken from an exam's or another assignment's folder.
The run finishes and every control student gets full marks."""
from __future__ import annotations

import json
import sys

import pytest

from grader.course import REPO_ROOT
from redteam.corpus import grade_folder

FOLDER, MODULE, GRADE_ID = "01_softmax", "softmax.py", "ex01_answer"
REFERENCE = (REPO_ROOT / "solutions" / FOLDER / MODULE).read_text()
STUB = (REPO_ROOT / "exercises" / FOLDER / MODULE).read_bytes()


def _notebook(source: str, **extra) -> bytes:
    cell = {"cell_type": "code", "source": source, "outputs": [], "execution_count": None,
            "metadata": {"nbgrader": {"grade_id": GRADE_ID, "solution": True, "grade": False}}}
    return json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [cell], **extra}).encode()


def _with_not_equal_line(source: str) -> str:
    """The reference, plus a statement whose second line starts with ``!=``
    inside brackets: Python, not a shell escape."""
    return source + "\n_CHECK = (1\n!= 2)\n"


# student -> {relative path: bytes}; each expectation below.
HOSTILE = {
    "surrogate": {f"{FOLDER}.ipynb": _notebook(REFERENCE + "\nNAME = '\ud800'\n")},
    "deep-nesting": {f"{FOLDER}.ipynb": _notebook(REFERENCE)[:-1] + b', "x": ' + b"[" * 20_000 + b"]" * 20_000 + b"}"},
    "huge-int": {f"{FOLDER}.ipynb": _notebook(REFERENCE)[:-1] + b', "x": ' + b"7" * 5_000 + b"}"},
    "deep-objects": {f"{FOLDER}.ipynb": b'{"a":' * 30_000 + b"1" + b"}" * 30_000},
    "not-utf8": {f"{FOLDER}.ipynb": b'{"cells": ["\xff\xfe"]}'},
    "many-containers": {f"{FOLDER}.ipynb": _notebook(REFERENCE)[:-1] + b', "x": [' + b"[]," * 300_000 + b"[]]}"},
    "homework-in-exam": {f"midterm-homework-in-exam/{FOLDER}.ipynb": _notebook(REFERENCE)},
    "homework-in-other-assignment": {f"layers/{FOLDER}.ipynb": _notebook(REFERENCE)},
}
CONTROLS = {
    "control": {f"{FOLDER}/{MODULE}": REFERENCE.encode()},
    "control-not-equal-line": {f"attention/{FOLDER}.ipynb": _notebook(_with_not_equal_line(REFERENCE))},
    "control-magics": {f"attention/{FOLDER}.ipynb": _notebook(
        "%load_ext autoreload\n%autoreload 2\n!pip list\n" + REFERENCE + "\nif False:\n    !ls\n")},
    "control-crlf-stub": {f"exercises/{FOLDER}/{MODULE}": STUB.replace(b"\n", b"\r\n"),
                          f"exercises/{FOLDER}/{FOLDER}.ipynb": _notebook(REFERENCE)},
    "control-bom-stub": {f"exercises/{FOLDER}/{MODULE}": b"\xef\xbb\xbf" + STUB.replace(b"\n", b"  \n") + b"\n\n",
                         f"exercises/{FOLDER}/{FOLDER}.ipynb": _notebook(REFERENCE)},
    "control-own-assignment": {f"attention/{FOLDER}.ipynb": _notebook(REFERENCE),
                               f"midterm-control-own-assignment/{FOLDER}.ipynb": _notebook("def softmax(x, dim=-1):\n    return x\n")},
}
EXPECTED = {
    "surrogate": ("unreadable", "unpaired surrogate"),
    "deep-nesting": ("unreadable", "nested too deeply"),
    "huge-int": ("unreadable", "number too large"),
    "deep-objects": ("unreadable", "nested too deeply"),
    "not-utf8": ("unreadable", "not UTF-8"),
    "many-containers": ("unreadable", "JSON lists and objects"),
    "homework-in-exam": ("not_submitted", "not submitted"),
    "homework-in-other-assignment": ("not_submitted", "not submitted"),
}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile-notebooks")
    subs = root / "submissions"
    for student, files in {**HOSTILE, **CONTROLS}.items():
        for relative, data in files.items():
            path = subs / student / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
    by_key, output = grade_folder(subs, root, "--timeout", "20")
    return {student: r for (student, _), r in by_key.items()}, output


def test_the_class_finishes_and_every_control_is_graded_in_full(graded):
    by_student, _ = graded
    assert sorted(by_student) == sorted([*HOSTILE, *CONTROLS])
    for student in CONTROLS:
        assert (by_student[student]["status"], by_student[student]["points"]) == ("graded", 10), by_student[student]


@pytest.mark.parametrize("student", sorted(EXPECTED))
def test_hostile_notebook_is_that_students_own_result(graded, student):
    by_student, _ = graded
    status, reason = EXPECTED[student]
    result = by_student[student]
    assert result["status"] == status and result["points"] == 0 and reason in result["reason"], result


def test_no_student_text_in_the_reasons(graded):
    by_student, output = graded
    assert "\ud800" not in output and "7777777" not in output
    assert all("7777777" not in r["reason"] for r in by_student.values())


@pytest.mark.parametrize("source, commented", [
    ("x = (1\n!= 2)\n", []),
    ("!ls\nx = 1\n", [0]),
    ("if x:\n    !ls\n", [1]),
    ("y = f(1,\n  !ls)\n", []),            # not Python, and not IPython's either: left to fail
    ('s = """\n!ls\n"""\n', []),
    ("a = 3 \\\n!= 4\n", []),
    ("%time f()\n%%bash\n", [0, 1]),       # %% below the first line: a line magic
])
@pytest.mark.parametrize("ipython", [True, False], ids=["ipython", "fallback"])
def test_ipython_lines_follow_ipythons_rules(monkeypatch, source, commented, ipython):
    """IPython's transformers decide; without IPython, the fallback rule
    agrees on these (a `%`/`!` line is IPython's only where a statement starts)."""
    from grader.intake.notebooks import IPYTHON_ONLY, _without_ipython_syntax

    if not ipython:
        monkeypatch.setitem(sys.modules, "IPython.core.inputtransformer2", None)
    lines = _without_ipython_syntax(source).split("\n")
    assert [i for i, line in enumerate(lines) if IPYTHON_ONLY in line] == commented
    if not commented and "!ls)" not in source:
        compile(_without_ipython_syntax(source), "cell", "exec")


def test_a_cell_of_many_magics_takes_the_linear_rule_and_agrees():
    """IPython's transformers re-tokenize the cell per magic (cubic in
    practice): a cell with more magics than IPYTHON_MAX_MAGICS gets the
    fallback rule, which marks the same lines."""
    from grader.intake.notebooks import IPYTHON_MAX_MAGICS, IPYTHON_ONLY, _without_ipython_syntax

    source = "!ls\n" * (IPYTHON_MAX_MAGICS * 20) + "x = (1\n!= 2)\nif x:\n    %time f()\n"
    out = _without_ipython_syntax(source)
    assert out.count(IPYTHON_ONLY) == IPYTHON_MAX_MAGICS * 20 + 1
    compile(out, "cell", "exec")
