"""Unit tests of the hidden checks of exercises 09 and 10 (in process, no
sandbox): the plans are deterministic plain data, the property probes hold
for the references (else those checks would compare nothing useful), and
``trees_close`` says why trees differ."""
from __future__ import annotations


import pytest
import torch

from coursekit.loader import load_module
from grader.checks import CheckPlan, checks_for
from grader.checks.forbidden import unwrapped
from grader.checks.stacks import trees_close
from grader.course import REPO_ROOT, load_course
from grader.intake.submissions import assemble
from probecalls import run_probe, same


@pytest.fixture(scope="module")
def course():
    return load_course()


def _plan(course, exercise_id: str) -> CheckPlan:
    return CheckPlan.build(checks_for(course.exercise(exercise_id)))


@pytest.mark.parametrize("exercise_id", ["09", "10"])
def test_plans_are_deterministic(course, exercise_id):
    first, second = _plan(course, exercise_id), _plan(course, exercise_id)
    assert [c.probe for c in first.calls] == [c.probe for c in second.calls]
    assert all(same(a.kwargs, b.kwargs) for a, b in zip(first.calls, second.calls))
    assert 20 <= len(first.calls) <= 60  # a few dozen small calls per submission


@pytest.mark.parametrize("exercise_id", ["09", "10"])
def test_reference_has_every_property(course, exercise_id, tmp_path):
    exercise = course.exercise(exercise_id)
    source = (REPO_ROOT / "solutions" / exercise.folder / exercise.module).read_bytes()
    reference = load_module(assemble(exercise, source, tmp_path, course), exercise.module)
    behaviours = [c for c in map(unwrapped, _plan(course, exercise_id).calls) if c.probe.endswith("_behaviour")]
    assert behaviours
    for call in behaviours:
        result = run_probe(reference, call)
        flags = {k: v for k, v in result.items() if k != "shape"}
        assert all(flags.values()), (call.kwargs["config"], flags)


def test_trees_close_reasons():
    compare = trees_close("parameters")
    ones = {"parameters": {"a": torch.ones(2), "b": torch.ones(3)}}
    assert compare(ones, ones) is None
    assert compare({"parameters": {"a": torch.ones(2)}}, ones) == "the parameter names differ from the contract's"
    assert compare({"parameters": {"a": torch.ones(2), "b": None}}, ones) == "no gradient where one was expected"
    assert compare({"parameters": {"a": torch.ones(2), "b": torch.zeros(3)}}, ones) == "wrong values"
    assert compare({"parameters": {"a": torch.ones(2), "b": torch.ones(3)}},
                   {"parameters": {"a": torch.ones(2), "b": None}}) == "a gradient where none was expected"
    assert compare({}, ones) == "the result is missing a part"
