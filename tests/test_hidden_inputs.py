"""Hidden inputs drawn per submission (issue 37, item 2; grader/checks/inputs.py).

The same bytes always get the same inputs and the same grade; a changed
byte gets new inputs; the reference runs on them; and what a feedback page
lets slip about one submission's inputs says nothing about the next one's.
"""
from __future__ import annotations

import os
import re
import stat
from pathlib import Path

import pytest
import torch

from grader.checks import CheckPlan, checks_for, figures_for
from grader.checks.forbidden import unwrapped
from grader.checks.inputs import (SECRET_ENV, GradingSecretError, HiddenInputs, load_grading_secret)
from grader.course import REPO_ROOT

SECRET = b"a-fixed-grading-secret-for-tests"
EX01_SOURCE = (REPO_ROOT / "solutions" / "01_softmax" / "softmax.py").read_bytes()

# A softmax that returns a tensor whose SHAPE spells 8 bits of its input:
# (1, 2, 3, 4, then 4 dimensions of 1 to 4). Shown as letters, the pattern
# of equal sizes still reads them out, on every check that compares a shape
# (the old grader's channel: 16 bits a check, 96 a page).
SHAPE_LEAK = b'''
import torch

def softmax(x, dim=-1):
    bits = int(abs(float(x.flatten()[0])) * 256) % 256
    return torch.zeros(1, 2, 3, 4, *[1 + (bits >> 2 * i & 3) for i in range(4)])
'''


def _first_x_bits(plan: CheckPlan, check_ids) -> dict[str, int]:
    """What the attack encodes, for the first call of each check."""
    xs = {c: unwrapped(plan.calls[plan.slices[c].start]).kwargs["x"] for c in check_ids}
    return {c: int(abs(float(x.flatten()[0])) * 256) % 256 for c, x in xs.items()}


def _bits_read_off(reason: str) -> int:
    """The attacker's decoding of "... yours (p, q, r, s, q, s, ...)"."""
    letters = re.search(r"yours \(([^)]*)\)", reason).group(1).split(", ")
    return sum(letters[:4].index(letter) << 2 * i for i, letter in enumerate(letters[4:8]))


def _plan(exercise, seed):
    return CheckPlan.build(checks_for(exercise), figures=figures_for(exercise), seed=seed)


# --- the seed -------------------------------------------------------------

def test_same_bytes_same_seed_changed_byte_new_seed():
    inputs = HiddenInputs(SECRET)
    seed = inputs.seed("01", EX01_SOURCE)
    assert seed == HiddenInputs(SECRET).seed("01", EX01_SOURCE)
    assert inputs.seed("01", EX01_SOURCE + b"# a comment\n") != seed
    assert inputs.seed("01", EX01_SOURCE.replace(b"softmax", b"softmax ", 1)) != seed
    assert inputs.seed("03", EX01_SOURCE) != seed           # another exercise
    assert HiddenInputs(b"another-secret-of-enough-bytes").seed("01", EX01_SOURCE) != seed
    assert inputs.seed("01", None) is None                   # nothing handed in: no calls
    assert "secret" not in repr(inputs).replace("<secret>", "") and SECRET.decode() not in repr(inputs)


def test_plans_per_seed_are_reproducible_and_differ(course):
    exercise = course.exercise("01")
    inputs = HiddenInputs(SECRET)
    one, again = _plan(exercise, inputs.seed("01", b"a")), _plan(exercise, inputs.seed("01", b"a"))
    other, fixed = _plan(exercise, inputs.seed("01", b"b")), _plan(exercise, None)
    first = unwrapped(one.calls[0]).kwargs["x"]
    assert torch.equal(first, unwrapped(again.calls[0]).kwargs["x"])
    assert not torch.equal(first, unwrapped(fixed.calls[0]).kwargs["x"])
    assert not torch.equal(first, unwrapped(other.calls[0]).kwargs["x"])


def test_fixed_inputs_checks_keep_their_calls(course):
    """11-copy-task (judged by thresholds) trains on the same data for every
    submission, and its figure draws from it; the other checks' inputs move."""
    exercise = course.exercise("11")
    checks = {c.id: c for c in checks_for(exercise)}
    assert [c.id for c in checks.values() if c.fixed_inputs] == ["11-copy-task"]
    seeded, fixed = _plan(exercise, HiddenInputs(SECRET).seed("11", b"x")), _plan(exercise, None)
    mine, theirs = seeded.slices["11-copy-task"], fixed.slices["11-copy-task"]
    assert seeded.calls[mine.start].kwargs == fixed.calls[theirs.start].kwargs
    logits = seeded.slices["11-forward-logits"]
    assert repr(seeded.calls[logits.start].kwargs) != repr(fixed.calls[fixed.slices["11-forward-logits"].start].kwargs)


def test_anchored_check_runs_its_picked_cases_after_the_drawn_ones(course):
    """11-greedy-decode's cases were picked so that rows end at different
    steps and some never end: random draws may miss that (a decoder that
    never stops passed on some of them), so they run beside each submission's."""
    exercise = course.exercise("11")
    (check,) = [c for c in checks_for(exercise) if c.id == "11-greedy-decode"]
    assert check.anchored and not check.fixed_inputs
    own = check.build_calls()
    drawn = check.build_calls(seed=HiddenInputs(SECRET).seed("11", b"x"))
    assert len(drawn) == 2 * len(own)
    assert repr(drawn[len(own):]) == repr(own) and repr(drawn[:len(own)]) != repr(own)


def test_exam_variants_keep_their_per_student_seeds(course):
    """An exam variant's calls are what they were (grader/exams: one per student)."""
    class Variant:
        seed, sizes = 1234, {}

    check = checks_for(course.exercise("01"))[0]
    gen = torch.Generator().manual_seed((1234 * 1_000_003 + check.seed) % 2**62)
    expected = check.calls(gen)
    got = check.build_calls(Variant())
    assert torch.equal(unwrapped(got[0]).kwargs["x"], unwrapped(expected[0]).kwargs["x"])


# --- the secret -----------------------------------------------------------

def test_secret_created_on_first_use_private_and_kept(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv(SECRET_ENV, raising=False)
    first = load_grading_secret(tmp_path)
    path = tmp_path / ".grading-secret"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert "created the grading secret" in capsys.readouterr().err
    assert load_grading_secret(tmp_path) == first and len(first) >= 32
    assert ".grading-secret" in (REPO_ROOT / ".gitignore").read_text()


def test_secret_from_environment_and_refusals(tmp_path, monkeypatch):
    monkeypatch.setenv(SECRET_ENV, "x" * 20)
    assert load_grading_secret(tmp_path) == b"x" * 20
    assert not (tmp_path / ".grading-secret").exists()
    monkeypatch.setenv(SECRET_ENV, "short")
    with pytest.raises(GradingSecretError, match="shorter than"):
        load_grading_secret(tmp_path)
    monkeypatch.delenv(SECRET_ENV)
    with pytest.raises(GradingSecretError, match="no grading secret"):
        load_grading_secret(tmp_path, create=False)


def test_gradescope_zip_carries_the_secret_privately(course, tmp_path, monkeypatch):
    import zipfile

    from grader.scale.gradescope import write_gradescope_zip

    monkeypatch.setenv(SECRET_ENV, "z" * 32)
    out = tmp_path / "autograder.zip"
    write_gradescope_zip(course, REPO_ROOT, out, [course.exercise("01")])
    with zipfile.ZipFile(out) as zf:
        info = zf.getinfo(".grading-secret")
        assert zf.read(info).strip() == b"z" * 32
        assert stat.S_IMODE(info.external_attr >> 16) == 0o600


# --- grading on them ------------------------------------------------------

@pytest.fixture(scope="module")
def judge(course, course_sandbox):
    """A judge that draws every submission's own inputs, as `grader grade`
    does (the session's judge draws one set per exercise: tests/conftest.py)."""
    from conftest import TEST_GRADING_SECRET
    from grader.judge import Judge

    return Judge(course, course_sandbox, inputs=HiddenInputs(TEST_GRADING_SECRET.encode()))


def _grade(judge, exercise, source: bytes, folder: Path):
    """The module as collection prepares it (with the modules the exercise ships), graded."""
    from grader.intake.submissions import assemble

    return judge.grade(exercise, assemble(exercise, source, folder, judge.course), folder.parent / "work")


def test_same_submission_same_inputs_and_grade_reference_on_them(judge, course, tmp_path):
    """Reference verdicts under per-submission inputs: full marks; the same
    bytes twice: one reference run, the same verdicts; a comment more: new
    inputs, a new reference run, still full marks."""
    exercise = course.exercise("01")
    first = _grade(judge, exercise, EX01_SOURCE, tmp_path / "a")
    runs = judge.input_sets.runs["reference"]
    again = _grade(judge, exercise, EX01_SOURCE, tmp_path / "b")
    assert first.points == again.points == exercise.points
    assert [v.to_dict() for v in first.verdicts] == [v.to_dict() for v in again.verdicts]
    assert judge.input_sets.runs["reference"] == runs          # cached per input set
    changed = _grade(judge, exercise, EX01_SOURCE + b"# v2\n", tmp_path / "c")
    assert changed.points == exercise.points
    assert judge.input_sets.runs["reference"] == runs + 1
    stub = _grade(judge, exercise, (REPO_ROOT / "exercises" / exercise.folder / exercise.module).read_bytes(),
                  tmp_path / "stub")
    assert stub.points == 0 and stub.status == "not_started"


def test_pitfall_confirmed_on_the_submissions_own_inputs(judge, course, tmp_path):
    from grader.course.pitfalls import load_variants

    exercise = course.exercise("01")
    (pitfall_id, variant), *_ = load_variants(exercise, REPO_ROOT).items()
    result = _grade(judge, exercise, variant.source.encode() + b"# mine\n", tmp_path / "p")
    assert result.points < exercise.points
    assert pitfall_id in result.pitfalls


def test_shape_leak_says_nothing_about_the_next_submission(judge, course, tmp_path):
    """The shape channel still reads out the inputs of the submission that
    was graded (so this test can see a leak: 8 bits on each of several
    checks), and those bits do not match the next submission's inputs."""
    exercise = course.exercise("01")
    result = _grade(judge, exercise, SHAPE_LEAK, tmp_path / "leak")
    learned = {v.check_id: _bits_read_off(v.reason) for v in result.verdicts if "yours (" in v.reason}
    assert len(learned) >= 3, [v.reason for v in result.verdicts]
    assert learned == _first_x_bits(_plan(exercise, judge.inputs.seed("01", SHAPE_LEAK)), learned)  # real...
    for change in (b"# v2\n", b" ", b"\n# another try\n"):
        following = _plan(exercise, judge.inputs.seed("01", SHAPE_LEAK + change))
        assert _first_x_bits(following, learned) != learned      # ...about inputs never used again
    assert _first_x_bits(_plan(exercise, None), learned) != learned   # nor the fixed ones


def test_a_shape_of_many_dimensions_shows_only_their_number():
    from grader.feedback import MAX_SHOWN_RANK, shape_detail

    wide = torch.zeros([1, 2] * 9)
    text = shape_detail(wide, torch.zeros(3, 4))
    assert text == f"expected shape (a, b), yours has {2 * 9} dimensions" and 2 * 9 > MAX_SHOWN_RANK


def test_fixed_inputs_judge_shows_no_chosen_shape_or_exception(course, course_sandbox, tmp_path):
    """Without per-submission inputs (a judge without a grading secret), a
    page shows no shape or exception class the submission chose."""
    from grader.judge import Judge

    judge = Judge(course, course_sandbox)
    exercise = course.exercise("01")
    shaped = _grade(judge, exercise, SHAPE_LEAK, tmp_path / "shape")
    raising = _grade(judge, exercise, b"def softmax(x, dim=-1):\n    raise (KeyError, ValueError)"
                                      b"[int(abs(float(x.flatten()[0])) * 2) % 2]('x')\n", tmp_path / "raise")
    reasons = [v.reason for r in (shaped, raising) for v in r.verdicts if not v.passed]
    assert reasons and not any("yours" in r or "Error" in r for r in reasons), reasons
    assert any(r == "wrong shape" for r in reasons)


def test_fixed_inputs_check_and_its_figure_on_per_submission_inputs(judge, course, tmp_path):
    """Exercise 11: the copy task (fixed_inputs) and its figure come from the
    fixed run, every other check's calls from the submission's own inputs:
    the reference still gets full marks and its figure equals the expected one."""
    exercise = course.exercise("11")
    source = (REPO_ROOT / "solutions" / exercise.folder / exercise.module).read_bytes() + b"# mine\n"
    result = _grade(judge, exercise, source, tmp_path / "s")
    assert result.points == exercise.points, [(v.check_id, v.reason) for v in result.verdicts if not v.passed]
    figure = result.figures["copy-cross-attention"]
    assert figure["student"] == figure["expected"]


def _class_of(course, root: Path, sources: dict[str, dict[str, bytes]]) -> Path:
    for student, parts in sources.items():
        for exercise_id, source in parts.items():
            exercise = course.exercise(exercise_id)
            (root / student / exercise.folder).mkdir(parents=True)
            (root / student / exercise.folder / exercise.module).write_bytes(source)
    return root


def test_grader_grade_stubs_zero_references_full_regrade_identical(course, tmp_path):
    """`grader grade` on 01 and 03 with per-submission inputs: references get
    full marks and stubs 0; two students with the same bytes get the same
    verdicts (the seed has no student in it: a grade is about the code); a
    forced regrade gives every result again, identical."""
    from classrun import grade_cli, results

    def source(tree: str, exercise_id: str) -> bytes:
        exercise = course.exercise(exercise_id)
        return (REPO_ROOT / tree / exercise.folder / exercise.module).read_bytes()

    refs = {e: source("solutions", e) for e in ("01", "03")}
    stubs = {e: source("exercises", e) for e in ("01", "03")}
    submissions = _class_of(course, tmp_path / "class", {"ann": refs, "bob": stubs, "cyd": refs,
                                                          "dan": {"01": refs["01"] + b"# edited\n"}})
    db = tmp_path / "grades.db"
    run = grade_cli(submissions, db, tmp_path / "out", exercises=("01", "03"))
    assert run.communicate(timeout=600)[0] is not None and run.returncode == 0
    first = results(db)
    points = {(student, exercise): found[0] for (student, exercise, _), found in first.items()}
    for exercise_id in ("01", "03"):
        full = course.exercise(exercise_id).points
        assert points[("ann", exercise_id)] == points[("cyd", exercise_id)] == full
        assert points[("bob", exercise_id)] == 0
    assert points[("dan", "01")] == course.exercise("01").points
    same = {k[1:]: v for k, v in first.items() if k[0] == "ann"}
    assert same == {k[1:]: v for k, v in first.items() if k[0] == "cyd"}
    again = grade_cli(submissions, db, tmp_path / "out", "--force", exercises=("01", "03"))
    assert again.communicate(timeout=600)[0] is not None and again.returncode == 0
    assert results(db) == first


def test_a_draw_the_reference_fails_on_is_redrawn_alike_never_stopping_the_class():
    """A student could search their bytes for a draw where the reference
    fails its own checks (GraderError stops the class): such a draw is
    redrawn, the same way every time; a reference failing every draw is broken."""
    from grader.judge import GraderError
    from grader.references import REDRAWS, passing_seed

    tried: list[int] = []

    def reference(seed):
        tried.append(seed)
        if len(tried) == 1:
            raise GraderError("the reference fails its own hidden checks")

    first = passing_seed(12345, reference, GraderError)
    assert first != 12345 and tried == [12345, first]
    tried.clear()
    assert passing_seed(12345, reference, GraderError) == first      # a regrade redraws alike

    def broken(seed):
        raise GraderError("broken")

    with pytest.raises(GraderError):
        passing_seed(12345, broken, GraderError)
    with pytest.raises(GraderError):
        passing_seed(None, broken, GraderError)                       # fixed inputs: no redraw
    assert REDRAWS >= 2


def test_variants_on_a_submissions_inputs_are_the_checks_own_and_a_few_others():
    from grader.references import MAX_SEEDED_VARIANTS, InputSet

    names = [f"p{i}" for i in range(MAX_SEEDED_VARIANTS + 4)]
    seeded = InputSet("01", 7, plan=None)
    first = seeded.budgeted(names, declared=("p5",))
    assert "p5" in first and len(first) == MAX_SEEDED_VARIANTS + 1
    again = seeded.budgeted(names, declared=("p4",))                   # declared: always; others: spent
    assert set(again) == {*first, "p4"}
    assert InputSet("01", None, plan=None).budgeted(names, ()) == names  # fixed inputs: each ran once per exercise anyway
