"""What the checks observe, graded end to end (issue 14): submissions in
tests/observation/, each graded by the judge in the sandbox like a student's.

- dropout is seen at the dispatcher: a correct 06 that imports
  ``dropout`` by name gets full marks;
- a structural fact accepts every structure the README allows: a correct 11
  that loops over ``self.encoder.layers`` gets full marks;
- device placement is checked by a forward pass on the meta device: a fresh
  CPU mask in 05 loses the device check, and only it;
- a shape error is a shape error, not a device failure (11);
- large scores: a softmax without max subtraction loses 08's check;
- contract attributes exist from ``__init__`` (08's ``attn``).
"""
from __future__ import annotations

from pathlib import Path

import pytest

from grader.judge import ExerciseResult, Judge
from grader.sandbox import Limits, Sandbox
from grader.submissions import assemble

SUBMISSIONS = Path(__file__).parent / "observation"


@pytest.fixture(scope="module")
def judge(course):
    with Sandbox(Limits(**course.grading.model_dump())) as box:
        yield Judge(course, box)


def _grade(judge: Judge, exercise_id: str, name: str, tmp_path: Path) -> ExerciseResult:
    exercise = judge.course.exercise(exercise_id)
    source = (SUBMISSIONS / name).read_bytes()
    folder = assemble(exercise, source, tmp_path / "submission", judge.course)
    return judge.grade(exercise, folder, tmp_path / "work")


def _failed(result: ExerciseResult) -> dict[str, tuple[str, list[str]]]:
    return {v.check_id: (v.reason, v.pitfalls) for v in result.verdicts if not v.passed}


@pytest.mark.parametrize("exercise_id,name", [
    ("06", "aliased_dropout_06.py"),
    ("11", "loop_over_layers_11.py"),
], ids=["06-dropout-imported-by-name", "11-loop-over-the-stacks-layers"])
def test_correct_submissions_written_otherwise_get_full_marks(judge, tmp_path, exercise_id, name):
    result = _grade(judge, exercise_id, name, tmp_path)
    assert result.status == "graded" and not _failed(result), _failed(result)
    assert result.points == pytest.approx(result.max_points)


def test_a_fresh_cpu_mask_in_forward_fails_the_device_check_only(judge, tmp_path):
    failed = _failed(_grade(judge, "05", "fresh_cpu_mask_05.py", tmp_path))
    assert set(failed) == {"05-forward-device"}, failed
    reason, hints = failed["05-forward-device"]
    assert "another device" in reason and {"mask-not-buffer", "mask-cpu-loop"} & set(hints)


def test_a_softmax_without_max_subtraction_fails_the_large_scores_check_only(judge, tmp_path):
    failed = _failed(_grade(judge, "08", "softmax_no_max_08.py", tmp_path))
    assert set(failed) == {"08-large-scores"}, failed
    assert "NaN" in failed["08-large-scores"][0] and "softmax-overflow" in failed["08-large-scores"][1]


def test_attn_must_exist_before_the_first_forward(judge, tmp_path):
    failed = _failed(_grade(judge, "08", "attn_missing_08.py", tmp_path))
    assert set(failed) == {"08-attn-before-forward"}, failed
    assert "__init__" in failed["08-attn-before-forward"][0]


def test_a_shape_error_on_the_meta_device_is_no_device_failure(judge, tmp_path):
    failed = _failed(_grade(judge, "11", "shape_error_11.py", tmp_path))
    reason, hints = failed["11-device"]
    assert reason == "raised RuntimeError" and "mask-cpu-loop" not in hints, failed["11-device"]
    assert not any("another device" in why for why, _ in failed.values())
