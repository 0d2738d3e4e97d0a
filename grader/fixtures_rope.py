"""Stored values of exercise 16's public tests (see grader/fixtures.py):
the reference's angle tables, rotations, attention outputs and logits on
the inputs the public test module defines (its ``*_CASES`` and case
functions, read from it so both stay in step), and the same values from
the pitfall variants the tests' diagnoses name (the reference with one
known mistake, grader/pitfalls/16_rope.yaml), so that a diagnosis says
"this is that mistake" only when the numbers are that mistake's.
"""
from __future__ import annotations

import tempfile
from pathlib import Path
from types import ModuleType

import torch

from coursekit.loader import load_module
from grader.course import REPO_ROOT, load_course
from grader.course.pitfalls import load_variants
from grader.intake.submissions import assemble

Values = dict[str, torch.Tensor]


def _variants(names: set[str], folder: Path) -> dict[str, ModuleType]:
    """The pitfall variants ``names`` of exercise 16, loaded as modules."""
    course = load_course(check_files=False)
    exercise = course.exercise("16")
    found = {}
    for name, variant in load_variants(exercise, REPO_ROOT).items():
        if name in names:
            where = assemble(exercise, variant.source.encode(), folder / name, course, REPO_ROOT)
            found[name] = load_module(where, exercise.module)
    return found


def _each(modules: dict[str, ModuleType], compute) -> dict[str, torch.Tensor]:
    """``compute(module)`` for each module; a mistake that raises on an input has no value there."""
    values = {}
    for name, module in modules.items():
        try:
            values[name] = compute(module)
        except Exception:  # noqa: BLE001 - that mistake fails the test with its error instead
            continue
    return values


@torch.no_grad()
def rope_16(reference: ModuleType, tests: ModuleType) -> Values:
    """Exercise 16: see the module's docstring."""
    from coursekit.probes import rope as probes

    names = {*tests.ROTATION_MISTAKES, *tests.ATTENTION_MISTAKES}
    values: Values = {}

    def store(key: str, compute) -> None:
        values[key] = compute(reference)
        for name, value in _each(mistaken, compute).items():
            if value.shape != values[key].shape or not torch.allclose(value, values[key], atol=1e-9):
                values[f"{key} {name}"] = value

    with tempfile.TemporaryDirectory(prefix="fixture-rope-") as folder:
        mistaken = _variants(names, Path(folder))
        for key, (context_length, head_dim, base) in tests.ANGLE_CASES.items():
            for part in ("cos", "sin"):
                store(f"angles {key} {part}",
                      lambda m, c=context_length, h=head_dim, b=base, p=part: probes.angles(m, c, h, b)[p])
        example = torch.tensor([1.0, 2.0, 3.0, 4.0], dtype=torch.float64).reshape(1, 1, 1, 4)
        store("worked example", lambda m: probes.rotate(m, example, torch.tensor([1]))["rotated"])
        for key in tests.ROTATE_CASES:
            x, positions = tests.rotate_case(key)
            store(f"rotate {key}", lambda m, x=x, p=positions: probes.rotate(m, x, p)["rotated"])
        for key in tests.ATTENTION_CASES:
            config, seed, x, positions = tests.attention_case(key)
            part = "default" if positions is None else "output"
            store(f"attention {key}",
                  lambda m, c=config, s=seed, x=x, p=positions, part=part: probes.attention(m, c, s, x, p, 5)[part])
        idx = tests.tokens(3, 2, 7)
        store("logits", lambda m: probes.gpt_logits(m, tests.MODEL, 3, idx)["logits"])
    return values
