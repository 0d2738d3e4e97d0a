"""Unit tests of exercise 05's hidden-check comparisons, in-process (the
sandboxed promise itself is ``python -m grader check 05``)."""
from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest
import torch

from coursekit.probes import causal_attention as probe
from grader.checks import CheckPlan, tensors_close
from grader.checks import causal_attention as checks
from probecalls import run_probe

REFERENCE = Path(__file__).resolve().parents[1] / "solutions" / "05_causal_attention"


@pytest.fixture(scope="module")
def reference():
    sys.path.insert(0, str(REFERENCE))
    try:
        yield importlib.import_module("causal_attention")
    finally:
        sys.path.remove(str(REFERENCE))
        sys.modules.pop("causal_attention", None)


def test_calls_are_reproducible_and_unique_ids():
    first, second = CheckPlan.build(checks.CHECKS), CheckPlan.build(checks.CHECKS)
    assert len({c.id for c in checks.CHECKS}) == len(checks.CHECKS)
    assert [c.probe for c in first.calls] == [c.probe for c in second.calls]
    x1 = [c.kwargs.get("x") for c in first.calls]
    x2 = [c.kwargs.get("x") for c in second.calls]
    assert all((a is None and b is None) or torch.equal(a, b) for a, b in zip(x1, x2))


def test_reference_agrees_with_itself(reference):
    plan = CheckPlan.build(checks.CHECKS)
    for check in plan.checks:
        for call in plan.calls[plan.slices[check.id]]:
            result = run_probe(reference, call)
            assert check.compare(result, result) is None, check.id


def test_close_handles_missing_tensors():
    # The framework's comparison, as 05's checks use it (also against variants' None).
    compare = tensors_close("mask")
    assert compare({"mask": None}, {"mask": None}) is None
    assert compare({"mask": torch.ones(2)}, {"mask": None}) is not None
    assert compare({}, {"mask": torch.ones(2)}) == "the result is missing a part"
    assert compare({"mask": torch.ones(2, dtype=torch.float64) + 1e-7},
                   {"mask": torch.ones(2, dtype=torch.float64)}) == "wrong values"


def test_train_dropout_sees_a_missing_dropout(reference):
    x, weights = probe.revealing_setup(2, 5, seed=3)
    call = dict(x=x, d_out=5, context_length=5, dropout=0.5, train=True, seeds=[1, 2], weights=weights)
    expected = probe.dropout_runs(reference, **call)
    assert checks._train_dropout(expected, expected) is None
    no_dropout = expected | {"outputs": [expected["clean"], expected["clean"]]}
    assert checks._train_dropout(no_dropout, expected) is not None
    # A wrong scale elsewhere does not fail the dropout check: same ratios.
    scaled = {"clean": expected["clean"] * 0.5, "outputs": [o * 0.5 for o in expected["outputs"]]}
    assert checks._train_dropout(scaled, expected) is None


def test_derived_comparisons_survive_garbage():
    for compare in (checks._derived(checks._repeat_facts, "x"), checks._derived(checks._symptoms, "x"),
                    checks._train_dropout):
        assert compare({"outputs": "nonsense"}, {"outputs": "nonsense"}) is not None
