"""Unit tests for exercise 03's hidden checks, in-process (no sandbox): the
hidden inputs are reproducible, every probe call runs on the reference, and
the device probe tells GPU-ready code from CPU-only code."""
from __future__ import annotations

from types import ModuleType

import pytest
import torch

from coursekit.loader import load_module
from coursekit.probes import masking as probes
from grader.checks import CheckPlan
from grader.checks.masking import CHECKS, _devices_agree
from grader.course import REPO_ROOT
from probecalls import run_probe, same


@pytest.fixture(scope="module")
def reference() -> ModuleType:
    return load_module(REPO_ROOT / "solutions" / "03_masking", "attention.py")


def test_hidden_inputs_are_reproducible_and_few() -> None:
    first, second = CheckPlan.build(CHECKS), CheckPlan.build(CHECKS)
    assert len(first.calls) <= 80  # a few dozen small calls per submission
    assert all(a.probe == b.probe and same(a.kwargs, b.kwargs) for a, b in zip(first.calls, second.calls))


def test_every_call_runs_on_the_reference_and_agrees_with_itself(reference: ModuleType) -> None:
    plan = CheckPlan.build(CHECKS)
    for check in plan.checks:
        for call in plan.calls[plan.slices[check.id]]:
            value = run_probe(reference, call)
            assert check.compare(value, value) is None, check.id


def _module(**functions: object) -> ModuleType:
    module = ModuleType("submission")
    vars(module).update(functions)
    return module


def _causal(seq_len: int, device: object = None) -> torch.Tensor:
    return torch.ones(seq_len, seq_len, dtype=torch.bool, device=device).triu(1)


def test_mask_devices_gives_value_reading_code_the_benefit_of_the_doubt() -> None:
    # A Python loop over the lengths works on a GPU (slowly): not judged on meta.
    loop = _module(causal_mask=_causal, padding_mask=lambda lengths, n: torch.tensor(
        [[p >= int(length) for p in range(n)] for length in lengths]))
    assert probes.mask_devices(loop, 3, [1, 0, 3]) == {"causal": "meta", "padding": "unknown"}


def test_mask_devices_reports_cpu_only_code() -> None:
    cpu_causal = _module(causal_mask=lambda n, device=None: _causal(n), padding_mask=lambda lengths, n: None)
    assert probes.mask_devices(cpu_causal, 3, [1])["causal"] == "cpu"
    cpu_padding = _module(causal_mask=_causal,
                          padding_mask=lambda lengths, n: torch.arange(n) >= torch.as_tensor(lengths)[:, None])
    with pytest.raises(RuntimeError):  # a GPU would raise too: devices do not match
        probes.mask_devices(cpu_padding, 3, [1, 2])


@pytest.mark.parametrize("submitted,agrees", [
    ({"causal": "meta", "padding": "meta"}, True),
    ({"causal": "meta", "padding": "unknown"}, True),
    ({"causal": "cpu", "padding": "meta"}, False),
    ({"causal": "meta", "padding": "cpu"}, False),
    (None, False),
])
def test_devices_compare(submitted: object, agrees: bool) -> None:
    assert (_devices_agree(submitted, {"causal": "meta", "padding": "meta"}) is None) is agrees
