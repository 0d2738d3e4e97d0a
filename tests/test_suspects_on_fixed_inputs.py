"""Pitfalls are compared on the fixed inputs (grader/suspects.py).

On a submission's own hidden inputs, the judge runs the submission once
more on the fixed inputs, where each pitfall variant has run once for the
class, and compares there. Only a variant confirmed there runs on the
submission's own inputs, where it must be confirmed again; points rest on
those inputs alone. A second run that tampers voids the exercise's grade.
"""
from __future__ import annotations

import pytest
import torch

from grader.checks import CheckPlan, checks_for, figures_for
from grader.checks.forbidden import unwrapped
from grader.checks.inputs import HiddenInputs
from grader.course import REPO_ROOT
from grader.course.pitfalls import load_variants

PITFALL = "softmax-dim0"

# The variant's softmax on the fixed inputs (known here by their sums), a
# mistake of its own elsewhere: on the submission's own inputs.
TWO_FACED = '''
_variant_softmax = softmax
_FIXED = {sums!r}


def _fingerprint(x):
    return round(float(torch.nan_to_num(x.double(), posinf=1e3, neginf=-1e3).sum()), 6)


def softmax(x, dim=-1):
    out = _variant_softmax(x, dim=dim)
    if _fingerprint(x) in _FIXED:
        {on_fixed}
    return out * 1.5
'''
FORGE = 'sys.modules["grader.sandbox.child"]._channel.send({"kind": "imported"})'


@pytest.fixture(scope="module")
def judge(course, course_sandbox):
    from conftest import TEST_GRADING_SECRET
    from grader.judge import Judge

    return Judge(course, course_sandbox, inputs=HiddenInputs(TEST_GRADING_SECRET.encode()))


def _variant(course) -> str:
    return load_variants(course.exercise("01"), REPO_ROOT)[PITFALL].source


def _two_faced(course, on_fixed: str = "return out") -> bytes:
    plan = CheckPlan.build(checks_for(course.exercise("01")), figures=figures_for(course.exercise("01")))
    xs = [unwrapped(call).kwargs.get("x") for call in plan.calls]
    sums = {round(float(torch.nan_to_num(x.double(), posinf=1e3, neginf=-1e3).sum()), 6)
            for x in xs if isinstance(x, torch.Tensor)}
    return (f"import sys\nimport torch\n{_variant(course)}" + TWO_FACED.format(sums=sums, on_fixed=on_fixed)).encode()


def _grade(judge, course, source: bytes, folder):
    from grader.intake.submissions import assemble

    exercise = course.exercise("01")
    return judge.grade(exercise, assemble(exercise, source, folder, course), folder.parent / "work")


def _confirmed(result) -> set[str]:
    return {p for v in result.verdicts for p in v.confirmed}


def test_the_variant_is_confirmed_with_one_second_run_and_one_variant_run(judge, course, tmp_path):
    before = dict(judge.input_sets.runs)
    result = _grade(judge, course, _variant(course).encode() + b"# mine\n", tmp_path / "copy")
    runs = judge.input_sets.runs
    assert result.points < course.exercise("01").points
    assert _confirmed(result) == {PITFALL}
    assert runs["submission"] - before["submission"] == 1      # its run on the fixed inputs
    assert runs["variants"] - before["variants"] == 1          # only the variant confirmed there


def test_a_mistake_made_only_on_the_fixed_inputs_is_a_guess_not_confirmed(judge, course, tmp_path):
    before = dict(judge.input_sets.runs)
    result = _grade(judge, course, _two_faced(course), tmp_path / "two-faced")
    assert judge.input_sets.runs["variants"] - before["variants"] == 1   # confirmed on the fixed inputs...
    assert not _confirmed(result)                                      # ...not on its own
    assert PITFALL in result.pitfalls
    assert result.points < course.exercise("01").points


def test_a_correct_submission_makes_no_second_run(judge, course, tmp_path):
    before = dict(judge.input_sets.runs)
    reference = (REPO_ROOT / "solutions" / "01_softmax" / "softmax.py").read_bytes()
    result = _grade(judge, course, reference + b"# mine\n", tmp_path / "right")
    assert result.points == course.exercise("01").points
    assert judge.input_sets.runs["submission"] == before["submission"]
    assert judge.input_sets.runs["variants"] == before["variants"]


def test_tampering_in_the_second_run_voids_the_grade_and_says_not_where(judge, course, tmp_path):
    """Not at which call: it would tell the student of the fixed inputs
    (a red-team pass forged at call int(|x[0]| * 10) % 20 + 2 and read it off the page)."""
    result = _grade(judge, course, _two_faced(course, on_fixed=FORGE), tmp_path / "forger")
    assert result.status == "tampered" and result.points == 0
    assert all(v.kind == "tampered" and not v.pitfalls for v in result.verdicts)
    assert "did not come from the grader's own probes" in result.reason
    assert "during call" not in result.reason and "次调用" not in result.reason, result.reason


class RecordingSandbox:
    """The course sandbox, keeping each run's wall-clock limit and result."""

    def __init__(self, box) -> None:
        self.box, self.runs = box, []

    def __getattr__(self, name: str):
        return getattr(self.box, name)

    def run(self, folder, module_name, calls, batches=None, timeout_s=None):
        result = self.box.run(folder, module_name, calls, batches, timeout_s=timeout_s)
        self.runs.append((timeout_s, result))
        return result


def test_code_that_hangs_on_the_fixed_inputs_alone_costs_a_bounded_second_run(course, course_sandbox, tmp_path):
    """The second run's wall clock is a few times the first run's, not the
    course's limit; when it ends so, the variants run on the submission's
    own inputs instead, as for a run that broke, and still name the mistake."""
    from conftest import TEST_GRADING_SECRET
    from grader.judge import SECOND_RUN_FLOOR_S, Judge

    box = RecordingSandbox(course_sandbox)
    judge = Judge(course, box, inputs=HiddenInputs(TEST_GRADING_SECRET.encode()))
    hangs = _two_faced(course, on_fixed="import time; time.sleep(3600)").replace(b"return out * 1.5", b"return out")
    result = _grade(judge, course, hangs, tmp_path / "hangs")
    (limit, second), = [(limit, run) for limit, run in box.runs if limit is not None]
    assert SECOND_RUN_FLOOR_S <= limit < course_sandbox.limits.timeout_s
    assert second.status == "timeout"
    assert PITFALL in {p for v in result.verdicts for p in v.confirmed}   # by the variant on its own inputs
