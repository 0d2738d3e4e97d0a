"""Exams, code part: hidden checks built for each student's variant.

Most tests use a stand-in for the sandbox that calls the probes in this
process (fast, and acceptable only because every module run here is trusted:
references and pitfall variants); one runs the real sandbox."""
import importlib

import pytest

pytest.importorskip("grader.sandbox")

from coursekit.loader import load_module  # noqa: E402
from grader.checks import CheckPlan, checks_for  # noqa: E402
from grader.course import REPO_ROOT, load_course  # noqa: E402
from grader.exams.checks import checks_for_exam  # noqa: E402
from grader.exams.grading import grade_exam  # noqa: E402
from grader.exams.variants import make_variant  # noqa: E402
from grader.gradebook import Gradebook  # noqa: E402
from grader.course.pitfalls import load_variants  # noqa: E402
from grader.sandbox import CallResult, Limits, RunResult, Sandbox  # noqa: E402

SECRET = b"test-secret-not-for-real-exams-0123"


class InProcessSandbox:
    """Sandbox.run's contract, without the sandbox: trusted modules only."""

    def layers(self) -> dict:
        # The Judge refuses sandboxes that cannot hide the instructor's files;
        # this stand-in only ever runs the instructor's own modules.
        return {"filesystem_view": "active"}

    def run(self, folder, module_name, calls, batches=None):  # batches: how the child gets them; all at once here
        module = load_module(folder, module_name)
        results = []
        for call in calls:
            where, name = call.probe.split(":")
            try:
                results.append(CallResult(True, getattr(importlib.import_module(where), name)(module, **call.kwargs)))
            except Exception as exc:  # what the child would report
                results.append(CallResult(False, None, type(exc).__name__, str(exc)))
        return RunResult("ok", results, "", "", "", 0.0)


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
    # 01's calls are recorded (coursekit.probes.dispatch:recorded_call): the probe's own kwargs are inside.
    x_plain = CheckPlan.build(softmax).calls[0].kwargs["kwargs"]["x"]
    x_a, x_b = (CheckPlan.build(softmax, v).calls[0].kwargs["kwargs"]["x"] for v in (a, b))
    assert not (x_a.shape == x_plain.shape and x_a.equal(x_plain)) and not (x_a.shape == x_b.shape and x_a.equal(x_b))
    again = CheckPlan.build(softmax, make_variant(course, midterm, "s001", SECRET)).calls[0].kwargs["kwargs"]["x"]
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


def test_exam_code_is_graded_with_each_students_variant(course, midterm, tmp_path, monkeypatch):
    import grader.judge

    # Confirming a pitfall runs every variant of the exercise on the
    # student's own inputs; one variant is enough to show it here.
    one = {"view-no-transpose": load_variants(course.exercise("06"), REPO_ROOT)["view-no-transpose"]}
    monkeypatch.setattr(grader.judge, "load_variants", lambda exercise, root: one if exercise.id == "06" else {})
    # Exercise 06 only (03 runs in the real sandbox below): fewer in-process runs.
    exam = midterm.model_copy(update={"exercises": [e for e in midterm.exercises if e.id == "06"]})
    subs = tmp_path / "subs"
    reference_06 = (REPO_ROOT / "solutions" / "06_multihead" / "multihead.py").read_text()
    _submit(subs, "right", [("06_multihead", "multihead.py", reference_06)])
    _submit(subs, "wrong", [("06_multihead", "multihead.py", one["view-no-transpose"].source)])
    _submit(subs, "none", [("03_masking", "attention.py", "")])
    run = grade_exam(course, exam, subs, secret=SECRET, root=REPO_ROOT, workdir=tmp_path / "work",
                     sandbox=InProcessSandbox())
    results = {r.student: r for r in run.results}
    assert run.code_graded
    right = results["right"]
    assert right.code_points == right.code_max == right.exercises["06"]["max_points"] == 40   # the exam's points
    wrong = results["wrong"].exercises["06"]
    assert wrong["points"] < 40
    failed = {v["check_id"]: v for v in wrong["verdicts"] if not v["passed"]}
    assert "06-exam-split-merge" in failed and "view-no-transpose" in failed["06-exam-split-merge"]["confirmed"]
    none = results["none"].exercises["06"]
    assert none["points"] == 0 and none["status"] == "not_submitted"
    # The graded code is also compared across the class (grader/exams/copying.py):
    # the mistaken copy of the reference is the reference, but for one line.
    assert [(m.exercise, m.first, m.second) for m in run.copying.code_matches] == [("06", "right", "wrong")]


def test_exam_code_in_the_real_sandbox(course, midterm, tmp_path):
    """The exercise's own hidden checks (grader/checks/masking.py), reseeded for
    the student, and the exam checks: the references pass all of them."""
    subs = tmp_path / "subs"
    _submit(subs, "s042", [("03_masking", "attention.py", (REPO_ROOT / "solutions/03_masking/attention.py").read_text()),
                           ("06_multihead", "multihead.py", (REPO_ROOT / "solutions/06_multihead/multihead.py").read_text())])
    db = tmp_path / "grades.db"
    with Sandbox(Limits(**course.grading.model_dump())) as sandbox, Gradebook(db) as book:
        run = grade_exam(course, midterm, subs, secret=SECRET, root=REPO_ROOT, workdir=tmp_path / "work",
                         sandbox=sandbox, gradebook=book)
        (result,) = run.results
        assert result.code_points == 70, {k: [v for v in e["verdicts"] if not v["passed"]] for k, e in result.exercises.items()}
        check_ids = {v["check_id"] for v in result.exercises["03"]["verdicts"]}
        assert {"03-exam-causal-heads", "03-exam-padded-keys"} <= check_ids
        assert {c.id for c in checks_for(course.exercise("03"))} <= check_ids

        # Grades are never lost: a rerun (after a crash, say) grades only the
        # part the gradebook lacks, and keeps the rest as recorded.
        recorded = {r.key.exercise: r for r in book.records(course.course.version)}
        assert set(recorded) == {"midterm", "midterm/03", "midterm/06"}
        book._db.execute("DELETE FROM results WHERE exercise = 'midterm/06'")
        again = grade_exam(course, midterm, subs, secret=SECRET, root=REPO_ROOT, workdir=tmp_path / "work2",
                           sandbox=sandbox, gradebook=book)
        assert again.resumed == 1 and again.results[0].to_dict() == result.to_dict()
        now = {r.key.exercise: r for r in book.records(course.course.version)}
        assert now["midterm/03"] == recorded["midterm/03"]             # not graded again
        assert now["midterm/06"].graded_at > recorded["midterm/06"].graded_at


def test_grader_grade_exam(tmp_path, monkeypatch):
    """`grader grade --exam`: answers and code (here: answers only submitted)."""
    import json

    from typer.testing import CliRunner

    from grader.cli import app

    monkeypatch.setenv("GRADER_EXAM_SECRET", SECRET.decode())
    (tmp_path / "subs" / "s007").mkdir(parents=True)
    (tmp_path / "subs" / "s007" / "answers.yaml").write_text("qkv-output-values: values\n")
    db = str(tmp_path / "grades.db")
    result = CliRunner().invoke(app, ["grade", str(tmp_path / "subs"), "--exam", "midterm", "--out", str(tmp_path / "out"),
                                      "--db", db])
    assert result.exit_code == 0, result.output
    assert "answers and code" in result.output
    (graded,) = json.loads((tmp_path / "out" / "results.json").read_text())["results"]
    assert graded["code_graded"] and graded["max_points"] == 70 + graded["question_max"]
    assert graded["question_points"] == 2 and graded["code_points"] == 0
    assert {e["status"] for e in graded["exercises"].values()} == {"not_submitted"}
    # In the gradebook; the LMS export counts the exam once, by its total.
    exported = CliRunner().invoke(app, ["export", "csv", str(tmp_path / "wide.csv"), "--wide", "--db", db])
    assert exported.exit_code == 0, exported.output
    header, row = (tmp_path / "wide.csv").read_text().splitlines()
    assert header.endswith(f"midterm ({graded['max_points']:g}),total,max") and "midterm/" not in header
    exercises = load_course().exercises
    homework = sum(e.points for e in exercises)
    assert row == ("s007," + ",".join([""] * len(exercises))
                   + f",{graded['points']:g},{graded['points']:g},{homework + graded['max_points']:g}")
