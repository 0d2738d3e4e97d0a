"""Exams, code part: hidden checks built for each student's variant.

Needs the sandbox's data types (grader.sandbox); the runs themselves use a
stand-in that calls the probes in this process, which is only acceptable
because every module run here is trusted (references and pitfall variants).
The sandboxed path is the same Judge with the real Sandbox."""
import importlib

import pytest

pytest.importorskip("grader.sandbox")

from coursekit.loader import load_module  # noqa: E402
from grader.checks import CheckPlan, checks_for  # noqa: E402
from grader.course import REPO_ROOT, load_course  # noqa: E402
from grader.exams.checks import checks_for_exam  # noqa: E402
from grader.exams.grading import grade_exam  # noqa: E402
from grader.exams.variants import make_variant  # noqa: E402
from grader.pitfalls import load_variants  # noqa: E402
from grader.sandbox import CallResult, RunResult  # noqa: E402

SECRET = b"test-secret-not-for-real-exams-0123"


class InProcessSandbox:
    """Sandbox.run's contract, without the sandbox: trusted modules only."""

    def run(self, folder, module_name, calls):
        module = load_module(folder, module_name)
        results = []
        for call in calls:
            where, name = call.probe.split(":")
            try:
                results.append(CallResult(True, getattr(importlib.import_module(where), name)(module, **call.kwargs)))
            except Exception as exc:  # what the child would report
                results.append(CallResult(False, None, type(exc).__name__, str(exc)))
        return RunResult("ok", results, "", "", "", 0.0)


@pytest.fixture(scope="module")
def course():
    return load_course(check_files=False)


@pytest.fixture(scope="module")
def midterm(course):
    return course.exam("midterm")


def test_checks_without_a_variant_are_unchanged(course):
    softmax = checks_for(course.exercise("01"))
    for check in softmax:
        import torch

        assert [c.kwargs.keys() for c in check.build_calls()] == \
            [c.kwargs.keys() for c in check.calls(torch.Generator().manual_seed(check.seed))]
    plain = CheckPlan.build(softmax)
    assert len(plain.calls) == sum(len(c.build_calls()) for c in softmax)


def test_a_variant_reseeds_every_check_and_sizes_the_exam_checks(course, midterm):
    a, b = (make_variant(course, midterm, s, SECRET) for s in ("s001", "s002"))
    softmax = checks_for(course.exercise("01"))
    x_plain = CheckPlan.build(softmax).calls[0].kwargs["x"]
    x_a, x_b = (CheckPlan.build(softmax, v).calls[0].kwargs["x"] for v in (a, b))
    assert not (x_a.shape == x_plain.shape and x_a.equal(x_plain)) and not (x_a.shape == x_b.shape and x_a.equal(x_b))
    again = CheckPlan.build(softmax, make_variant(course, midterm, "s001", SECRET)).calls[0].kwargs["x"]
    assert again.equal(x_a)
    for v in (a, b):
        plan = CheckPlan.build(checks_for_exam(course.exercise("06")), v)
        calls = plan.calls[plan.slices["06-exam-multihead"]]
        s = v.sizes
        assert calls[0].kwargs["config"]["d_in"] == s["d_model"] and calls[0].kwargs["config"]["num_heads"] == s["heads"]
        assert tuple(calls[0].kwargs["x"].shape) == (s["batch"], s["seq_len"], s["d_model"])


def _submit(tmp_path, student, modules):
    for folder, name, source in modules:
        (tmp_path / student / folder).mkdir(parents=True, exist_ok=True)
        (tmp_path / student / folder / name).write_text(source, encoding="utf-8")


def test_exam_code_is_graded_with_each_students_variant(course, midterm, tmp_path):
    subs = tmp_path / "subs"
    reference_03 = (REPO_ROOT / "solutions" / "03_masking" / "attention.py").read_text()
    reference_06 = (REPO_ROOT / "solutions" / "06_multihead" / "multihead.py").read_text()
    mistaken_06 = load_variants(course.exercise("06"), REPO_ROOT)["view-no-transpose"].source
    mistaken_03 = load_variants(course.exercise("03"), REPO_ROOT)["missing-scale"].source
    _submit(subs, "right", [("03_masking", "attention.py", reference_03), ("06_multihead", "multihead.py", reference_06)])
    _submit(subs, "wrong", [("03_masking", "attention.py", mistaken_03), ("06_multihead", "multihead.py", mistaken_06)])
    _submit(subs, "half", [("03_masking", "attention.py", reference_03)])
    run = grade_exam(course, midterm, subs, secret=SECRET, root=REPO_ROOT, workdir=tmp_path / "work",
                     sandbox=InProcessSandbox())
    results = {r.student: r for r in run.results}
    assert run.code_graded
    right = results["right"]
    assert right.code_points == right.code_max == 70
    assert right.exercises["03"]["max_points"] == 30 and right.exercises["06"]["max_points"] == 40
    wrong = results["wrong"].exercises
    assert wrong["03"]["points"] < 30 and wrong["06"]["points"] < 40
    failed = {v["check_id"]: v for part in wrong.values() for v in part["verdicts"] if not v["passed"]}
    assert "06-exam-split-merge" in failed and "view-no-transpose" in failed["06-exam-split-merge"]["confirmed"]
    assert "03-exam-causal-heads" in failed and "missing-scale" in failed["03-exam-causal-heads"]["pitfalls"]
    half = results["half"].exercises
    assert half["03"]["points"] == 30 and half["06"]["points"] == 0 and half["06"]["status"] == "not_submitted"
