"""Stored values of exercise 18's public tests (see grader/fixtures.py):
the reference's masks, windowed attention outputs, windowed logits, cached
logits and receptive fields on the public test's own inputs (its case
tables and case functions, read from the test module)."""
from __future__ import annotations

from types import ModuleType

import torch

from coursekit.probes import sliding_window as probes

Values = dict[str, torch.Tensor]


@torch.no_grad()
def sliding_window_18(reference: ModuleType, tests: ModuleType) -> Values:
    """Exercise 18's stored values, keyed as the public tests read them."""
    values: Values = {}
    for case in tests.MASK_CASES:
        values["mask {} {} {} {}".format(*case)] = reference.sliding_window_mask(*case)
    for name in tests.ATTENTION_CASES:
        values[f"attention {name}"] = probes.attention(reference, **tests.attention_case(name))["output"]
    for name in tests.FORWARD_CASES:
        values[f"forward {name}"] = probes.forward(reference, **tests.forward_case(name))["logits"]
    chunks = [2] + [1] * (tests.LENGTH - 2)
    values["steps"] = probes.steps(reference, tests.MODEL, 7, tests.tokens(7, 2, tests.LENGTH), tests.WINDOW,
                                   chunks)["logits"]
    values["fields"] = torch.tensor([reference.receptive_field(*case) for case in tests.FIELD_CASES])
    return values
