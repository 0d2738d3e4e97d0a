"""A student's own exception on a hidden check (issue 31, grader/own_errors.py):
the page says where it was raised (the student's file and line), on what
kind of input (the check's words), and its message, all read from a replay
on ungraded inputs of the same kind; nothing of the graded inputs gets
through, even from code that writes them into its exception."""
from __future__ import annotations

import re

import torch

from grader.course import REPO_ROOT
from hidden_values import graded_values
from grader.gradebook import Key, Record
from grader.intake.submissions import assemble
from grader.own_errors import REPLAY_SALT, describe, replay_call
from grader.report.handback import exercise_markdown
from grader.report.student_page import render_student_page

REFERENCE = (REPO_ROOT / "solutions" / "03_masking" / "attention.py").read_text(encoding="utf-8")
MASKED = '''    if mask is not None:
        # Mask'''
# A real student's guard: masks must have the scores' rank (the README allows fewer: they broadcast).
OWN_ERROR = '''    if mask is not None and mask.dim() != scores.dim():
        raise ValueError(f"mask must have as many dimensions as the scores ({scores.dim()}), got {mask.dim()}")
'''
# A submission that writes the inputs it was given into its exception.
LEAK = '''    if mask is not None and mask.dim() != scores.dim():
        raise ValueError(str(query.tolist()) + " " + str(key.tolist()) + " " + str(mask.int().tolist()))
'''


def _with(guard: str) -> str:
    assert MASKED in REFERENCE
    return REFERENCE.replace(MASKED, guard + MASKED, 1)


def _graded(judge, course, tmp_path, source: str):
    exercise = course.exercise("03")
    folder = assemble(exercise, source.encode(), tmp_path / "submission", course)
    result = judge.grade(exercise, folder, tmp_path / "work")
    return exercise, folder, result


def _pages(course, exercise, result) -> str:
    record = Record(Key("alice", exercise.id, "h", course.course.version), result.points, result.max_points,
                    result.status, result.reason, [v.to_dict() for v in result.verdicts], 0.0)
    html = render_student_page(course, "alice", [exercise], {exercise.id: record}, {})
    return html + exercise_markdown(course, exercise, record) + exercise_markdown(course, exercise, record, for_file=True)


def test_a_students_own_error_shows_its_file_line_input_kind_and_message(judge, course, tmp_path):
    source = _with(OWN_ERROR)
    line = source.splitlines().index(OWN_ERROR.splitlines()[1]) + 1
    exercise, _, result = _graded(judge, course, tmp_path, source)
    verdict = next(v for v in result.verdicts if v.check_id == "03-random-masks")
    assert not verdict.passed and verdict.kind == "raised ValueError"
    assert f"in attention.py, line {line}," in verdict.reason, verdict.reason
    assert "mask that broadcasts to the scores" in verdict.reason
    assert "ValueError: mask must have as many dimensions as the scores" in verdict.reason
    # Nothing from the probe's or the grader's frames.
    assert not re.search(r"coursekit|grader|probes|site-packages", verdict.reason)
    assert "mask must have as many dimensions" in _pages(course, exercise, result)


def test_hidden_values_written_into_an_exception_never_reach_the_feedback(judge, course, tmp_path):
    exercise, folder, result = _graded(judge, course, tmp_path, _with(LEAK))
    raised = [v for v in result.verdicts if v.kind == "raised ValueError"]
    assert raised and any("on an ungraded input of that kind it says: ValueError: [[" in v.reason for v in raised)
    pages = _pages(course, exercise, result)
    shown = set(re.findall(r"-?\d+\.\d{6,}", pages))
    assert shown, "the replay's own numbers are shown (its inputs grade nobody)"
    common = shown & graded_values(judge, exercise, folder)
    assert not common, [(c, [v.check_id for v in raised if c in v.reason]) for c in sorted(common)[:5]]


def test_a_replay_is_of_the_same_kind_and_never_the_graded_input(course):
    from grader.checks import checks_for

    check = next(c for c in checks_for(course.exercise("03")) if c.id == "03-random-masks")
    graded = check.calls(torch.Generator().manual_seed(12345))
    for offset, call in enumerate(graded):
        replay = replay_call(check, offset, call)
        assert replay is not None and describe(check, replay) == describe(check, call)
        assert not torch.equal(replay.kwargs["kwargs"]["query"], call.kwargs["kwargs"]["query"]) \
            if "kwargs" in replay.kwargs else not torch.equal(replay.kwargs["query"], call.kwargs["query"])
    assert REPLAY_SALT  # the replay's generator is its own
