"""The numbers of a submission's graded (hidden) inputs, to prove that none
reaches what the student reads."""
from __future__ import annotations

import torch


def graded_values(judge, exercise, folder) -> set[str]:
    """Every number of the graded inputs, as ``tolist()`` writes it, with
    ten digits or more, except half-precision ones (float16's and bfloat16's
    few values recur by chance in any draw: 1.5869140625 is one)."""
    seed = judge.inputs.seed(exercise.id, (folder / exercise.module).read_bytes())
    values: set[str] = set()

    def walk(value: object) -> None:
        if isinstance(value, torch.Tensor) and value.is_floating_point() and value.element_size() > 2:
            values.update(r for r in map(repr, value.flatten().tolist()) if len(r.lstrip("-")) >= 12)
        elif isinstance(value, dict):
            for item in value.values():
                walk(item)
        elif isinstance(value, (list, tuple)):
            for item in value:
                walk(item)

    for call in judge.input_set(exercise, seed).plan.calls:
        walk(call.kwargs)
    assert len(values) > 100
    return values
