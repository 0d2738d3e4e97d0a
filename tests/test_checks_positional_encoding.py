"""Unit tests of exercise 07's hidden checks and of the compare helpers
they define (no sandbox: `grader check 07` proves the checks end to end)."""
import torch

from grader.checks import CheckPlan
from grader.checks.positional_encoding import CHECKS, buffer_compare, deep_close, error_type_equal, facts_equal


def test_deep_close_walks_nested_results():
    expected = {"output": torch.ones(2), "grads": {"w": torch.zeros(3)}, "flag": True, "parts": [torch.ones(1)]}
    same = {"output": torch.ones(2) + 1e-7, "grads": {"w": torch.zeros(3), "extra": 1}, "flag": True,
            "parts": [torch.ones(1)]}
    compare = deep_close()
    assert compare(same, expected) is None
    assert compare(same | {"grads": {"w": torch.ones(3)}}, expected) == "wrong values in grads.w"
    assert compare(same | {"flag": False}, expected) == "wrong result in flag"
    assert compare({k: v for k, v in same.items() if k != "grads"}, expected) == "the result is missing grads"
    assert compare(same | {"parts": []}, expected) == "the result is missing a part in parts"
    assert compare(same | {"output": torch.ones(2, dtype=torch.float64)}, expected) == "wrong dtype in output"
    assert deep_close(ignore=("output",))(same | {"output": None}, expected) is None


def test_error_type_equal_ignores_messages():
    compare = error_type_equal()
    assert compare({"type": "ValueError", "message": "a"}, {"type": "ValueError", "message": "b"}) is None
    assert compare(None, {"type": "ValueError", "message": "b"}) == "did not raise ValueError"
    assert compare({"type": "IndexError"}, {"type": "ValueError"}) == "raised IndexError instead of ValueError"
    assert compare({"type": "IndexError"}, None) == "raised IndexError"
    assert error_type_equal("inner")({"inner": None}, {"other": 1}) is None


def test_facts_equal_treats_missing_as_none():
    compare = facts_equal("a", reason="no")
    assert compare({"a": [1]}, {"a": [1], "b": 2}) is None
    assert compare({"a": [2]}, {"a": [1]}) == "no"
    assert compare(None, {"a": None}) is None


def test_buffer_compare_looks_at_pe_only():
    reference = {"parameters": {}, "buffers": {"pe": {"shape": [1, 4, 2], "dtype": "torch.float32", "persistent": True}},
                 "tensor_attributes": [], "state_dict_keys": ["pe"], "dtypes_after_to_float64": {"pe": "torch.float64"}}
    extra_buffer = reference | {"buffers": reference["buffers"] | {"freqs": {}}, "state_dict_keys": ["freqs", "pe"]}
    assert buffer_compare(extra_buffer, reference) is None
    plain = reference | {"buffers": {}, "tensor_attributes": ["pe"], "state_dict_keys": [],
                         "dtypes_after_to_float64": {"pe": "torch.float32"}}
    assert buffer_compare(plain, reference) is not None
    assert "parameters" in buffer_compare(reference | {"parameters": {"w": [2]}}, reference)


def test_checks_are_reproducible_and_declare_known_pitfalls(course):
    assert len({c.id for c in CHECKS}) == len(CHECKS) and all(c.id.startswith("07-") for c in CHECKS)
    assert all(course.pitfall(p) for c in CHECKS for p in c.pitfalls)
    first, second = CheckPlan.build(CHECKS), CheckPlan.build(CHECKS)
    for a, b in zip(first.calls, second.calls, strict=True):
        assert a.probe == b.probe and a.kwargs.keys() == b.kwargs.keys()
        assert all(torch.equal(v, b.kwargs[k]) if isinstance(v, torch.Tensor) else v == b.kwargs[k]
                   for k, v in a.kwargs.items())
