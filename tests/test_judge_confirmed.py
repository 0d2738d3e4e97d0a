"""'Confirmed' means the variant's outputs are the submission's (issue 31):
uncatalogued mistakes in 12-14 get no confirmed pitfall, and each pitfall
variant is confirmed as itself and as nothing else (grader/matching.py).
Correct submissions in other styles get none either: the accuracy corpus
checks that for every full-marks entry (tests/accuracy/test_accuracy.py)."""
from __future__ import annotations

import pytest

from accuracy.test_accuracy import ENTRIES
from grader.course import REPO_ROOT
from grader.course.pitfalls import load_variants
from grader.intake.submissions import assemble
from grader.failures import resemblance
from grader.sandbox import CallResult, RunResult
from uncatalogued import MISTAKES, source

PART_C = ("12", "13", "14")


def _grade(judge, exercise, text: str, folder):
    return judge.grade(exercise, assemble(exercise, text.encode(), folder / "submission", judge.course), folder / "work")


def _confirmed(result) -> dict[str, list[str]]:
    return {v.check_id: v.confirmed for v in result.verdicts if not v.passed and v.confirmed}


@pytest.mark.parametrize("exercise_id, name", [(e, n) for e in PART_C for n in MISTAKES[e]])
def test_an_uncatalogued_mistake_gets_no_confirmed_pitfall(course, judge, tmp_path, exercise_id, name):
    exercise = course.exercise(exercise_id)
    result = _grade(judge, exercise, source(exercise, MISTAKES[exercise_id][name]), tmp_path)
    assert result.status == "graded" and result.points < result.max_points - 1e-9
    assert not _confirmed(result), _confirmed(result)
    # Guesses stay guesses, a few at most per check.
    assert all(len(v.possible) <= 2 for v in result.verdicts)


@pytest.mark.parametrize("exercise_id", PART_C)
def test_each_variant_is_confirmed_as_itself_only(course, judge, tmp_path, exercise_id):
    exercise = course.exercise(exercise_id)
    wrong = {}
    for pitfall_id, variant in load_variants(exercise, REPO_ROOT).items():
        confirmed = _confirmed(_grade(judge, exercise, variant.source, tmp_path / pitfall_id))
        named = {p for ids in confirmed.values() for p in ids}
        if named != {pitfall_id}:
            wrong[pitfall_id] = confirmed
    assert not wrong, wrong


def test_a_wrong_shape_and_a_shape_error_are_one_mistakes_signature():
    """Which of the two a draw shows depends on its sizes (12's positions
    from arange(context_length) returned a wrong shape on the fixed inputs
    and failed to broadcast on a submission's: its variant, never run on the
    submission's inputs, was confirmed as nothing)."""
    from grader.failures import same_signature

    assert same_signature("wrong shape", "shape error (broadcast)")
    assert same_signature("wrong values", "NaN")
    assert not same_signature("wrong shape", "wrong values")
    assert not same_signature("raised ValueError", "shape error (broadcast)")


def test_one_mistake_is_reported_where_it_is_observed(course, judge, tmp_path):
    """A stable softmax that ignores ``dim`` (issue 31): its unchanged-input
    check is judged on the input (nothing was modified: not "wrong values";
    it pays once the values it rests on are right), and its large-scores
    failure is not taken for overflow, which small random inputs would not show."""
    entry = next(e for e in ENTRIES if e.name == "01/bug_ignores_dim")
    result = _grade(judge, course.exercise("01"), entry.path.read_text(encoding="utf-8"), tmp_path)
    verdicts = {v.check_id: v for v in result.verdicts}
    unchanged = verdicts["01-input-unchanged"]
    assert unchanged.kind == "requires" and "modified" not in unchanged.reason and "wrong" not in unchanged.reason
    assert "softmax-overflow" not in result.pitfalls and not _confirmed(result)


def _run(*values) -> RunResult:
    return RunResult("ok", [CallResult(ok=True, value=v) for v in values], "", "", "", 0.0)


def test_resemblance_tells_the_same_mistake_from_a_nearby_one():
    import torch

    reference = torch.linspace(0, 1, 50)
    variant = reference * 1.1                       # the variant's mistake
    same = variant + 1e-7                           # that mistake, float noise apart
    nearby = reference * 1.1 + 0.02 * torch.cos(reference * 40)  # within a loose tolerance of it, not it
    calls = slice(0, 1)
    assert resemblance(calls, _run({"out": same}), _run({"out": variant}), _run({"out": reference})) < 1e-4
    assert resemblance(calls, _run({"out": nearby}), _run({"out": variant}), _run({"out": reference})) > 0.1
    # Facts only (booleans): no numbers to weigh.
    assert resemblance(calls, _run({"ok": False}), _run({"ok": False}), _run({"ok": True})) is None
    # NaN where the variant has a number, or another shape: unlike.
    nan = variant.clone()
    nan[3] = float("nan")
    assert resemblance(calls, _run(nan), _run(variant), _run(reference)) == float("inf")
    assert resemblance(calls, _run(variant[:-1]), _run(variant), _run(reference)) == float("inf")
