"""The public tests' stored values (coursekit/fixtures) are what the
references give now: a change to a reference or to a public test's inputs
without ``python scripts/make_fixtures.py`` fails here, so the stored values
cannot drift (issue 36). And the student kit holds values, not the oracle."""
from __future__ import annotations

import pytest
import torch

from coursekit.fixtures import load
from grader.fixtures import FIXTURES, build


@pytest.mark.parametrize("name", FIXTURES)
def test_the_stored_values_are_what_the_reference_gives_now(name):
    stored, now = load(name), build(name)
    assert sorted(stored) == sorted(now), "regenerate: python scripts/make_fixtures.py"
    drifted = [key for key in now if stored[key].dtype != now[key].dtype
               or not torch.allclose(stored[key], now[key], atol=1e-6, rtol=1e-6)]
    assert not drifted, f"regenerate: python scripts/make_fixtures.py ({drifted[:3]})"


def test_a_mistake_s_stored_values_differ_from_the_right_ones():
    """The diagnoses can tell: each mistake's values are other values."""
    stored = load("gpt_12")
    for key in [k for k in stored if k.endswith((" post-norm", " residual-after-norm", " gelu-tanh"))]:
        right = stored[key.rsplit(" ", 1)[0] + " pre-norm"]
        assert not torch.allclose(stored[key], right, atol=1e-5), key


def test_a_forgotten_zero_grad_s_stored_parameters_differ_from_the_right_ones():
    stored = load("training_13")
    right, wrong = stored["steps parameters 2 head.weight"], stored["steps accumulated parameters 2 head.weight"]
    assert not torch.allclose(right, wrong, atol=1e-6)


def test_the_student_kit_has_no_oracle():
    import importlib.util

    from coursekit.probes import gpt, sampling, training

    for module in (gpt, sampling, training):
        assert not [name for name in vars(module) if "oracle" in name or name == "torch_block"], module.__name__
    assert importlib.util.find_spec("coursekit.probes.torch_oracles") is None
