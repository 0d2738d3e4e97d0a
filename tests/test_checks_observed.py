"""Each check reports the failure it observed (issue 31), swept over every
check of every exercise that sees an inputs-unchanged fact, on the
reference's own results (one sandboxed run per exercise):

* a check about an unchanged input is judged on the input: values made
  wrong (the input left alone) never fail it ("wrong values" are the value
  checks' to report; it waits on them through ``requires``), and a modified
  input always does;
* a check about values that also looks at the input says "modified" only
  when the input was modified, never for wrong values.
"""
from __future__ import annotations

import pytest
import torch

from grader.checks import CheckPlan, checks_for
from grader.course import REPO_ROOT
from grader.intake.submissions import assemble
from grader.references import check_batches

# The facts a probe returns about its inputs being left alone (12's
# "earlier_unchanged" is a causality fact about outputs, not an input).
INPUT_FACTS = ("input_unchanged", "inputs_unchanged", "lengths_unchanged", "buffers_unchanged", "idx_unchanged",
               "state_unchanged", "mask_unchanged")
# Checks named for an unchanged input that also compare values, as their
# messages say: "the registered mask stays as it was and every call gives
# what a fresh module gives".
COMBINED = {"06-mha-mask-unchanged"}
VALUE_REASONS = ("wrong values", "NaN", "wrong shape", "wrong dtype", "wrong result", "returned the wrong type")


def _facts(value: object) -> set[str]:
    if isinstance(value, dict):
        return {key for key in value if key in INPUT_FACTS} | {k for item in value.values() for k in _facts(item)}
    if isinstance(value, (list, tuple)):
        return {k for item in value for k in _facts(item)}
    return set()


def _changed(value: object, *, values: bool, fact: str | None) -> object:
    """The result with every float tensor off by a margin (``values``) or the
    input fact ``fact`` False everywhere (the rest as it was)."""
    if isinstance(value, torch.Tensor):
        return value + 0.5 * (1 + value.abs()) if values and value.is_floating_point() else value
    if isinstance(value, dict):
        return {k: (False if k == fact and v is True else _changed(v, values=values, fact=fact)) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_changed(v, values=values, fact=fact) for v in value)
    return value


def _reference_runs(course, sandbox, tmp_path):
    for exercise in course.exercises:
        checks = [c for c in checks_for(exercise) if not c.fixed_inputs and not c.measured]
        if not checks:
            continue
        plan = CheckPlan.build(checks)
        source = (REPO_ROOT / "solutions" / exercise.folder / exercise.module).read_bytes()
        folder = assemble(exercise, source, tmp_path / exercise.id, course)
        run = sandbox.run(folder, exercise.module_name, plan.calls, check_batches(plan))
        assert run.status == "ok", (exercise.id, run.reason)
        yield exercise, plan, run


def test_each_check_reports_the_failure_it_observed(course, course_sandbox, tmp_path):
    wrong: list[tuple] = []
    swept = 0
    for _, plan, run in _reference_runs(course, course_sandbox, tmp_path):
        for check in plan.checks:
            calls = range(plan.slices[check.id].start, plan.slices[check.id].stop)
            results = [run.calls[i].value for i in calls]
            facts = set().union(*map(_facts, results)) if results else set()
            about_input = "unchanged" in check.id and check.id not in COMBINED
            if not facts:
                assert not about_input, f"{check.id} says 'unchanged' but its probe returns no such fact"
                continue
            swept += 1
            for fact in sorted(facts):
                modified = [check.compare(_changed(r, values=False, fact=fact), r) for r in results]
                reasons = [m for m in modified if m is not None]
                if about_input and not reasons:
                    wrong.append((check.id, fact, "a modified input passes"))
                if any(reason.startswith(VALUE_REASONS) for reason in reasons):
                    wrong.append((check.id, fact, f"a modified input reads as {reasons[0]!r}"))
            for result in results:
                reason = check.compare(_changed(result, values=True, fact=None), result)
                if about_input and reason is not None:
                    wrong.append((check.id, "values", f"wrong values fail an input check as {reason!r}"))
                elif reason is not None and ("modif" in reason or "changed" in reason):
                    wrong.append((check.id, "values", f"wrong values read as {reason!r}"))
    assert swept > 40
    assert not wrong, sorted(set(wrong))


@pytest.mark.parametrize("exercise_id", ["01", "02", "03", "09", "10"])
def test_an_input_check_waits_on_the_values_it_rests_on(course, exercise_id):
    """Judged on the input alone, an unchanged-input check pays only once a
    value check passes (``requires``): a stub that returns its input
    untouched earns nothing there."""
    for check in checks_for(course.exercise(exercise_id)):
        if "unchanged" in check.id:
            assert check.requires, check.id
