"""Comparisons of nested results: every tensor of the reference's result
close to the submission's at the same place, or named entries equal."""
from __future__ import annotations

import torch

from coursekit.compare import compare_tensors
from grader.checks import _MISMATCH_REASONS, Compare


def deep_close(*, atol: float = 1e-5, rtol: float = 1e-4, ignore: tuple[str, ...] = ()) -> Compare:
    """Every tensor anywhere in the reference's result (nested dicts and
    lists) is close to the one at the same place in the submission's, every
    other leaf equal; keys in ``ignore`` are skipped at any depth. Keys the
    submission has in addition are not looked at. The reason names the
    dict keys on the way (result fields, parameter names), never a value."""

    def walk(mine: object, theirs: object, where: tuple[str, ...]) -> str | None:
        place = f" in {'.'.join(where)}" if where else ""
        if isinstance(theirs, torch.Tensor):
            mismatch = compare_tensors(mine, theirs, atol=atol, rtol=rtol)
            return None if mismatch is None else _MISMATCH_REASONS[mismatch.kind] + place
        if isinstance(theirs, dict):
            if not isinstance(mine, dict):
                return f"the result is missing a part{place}"
            for key, value in theirs.items():
                if key in ignore:
                    continue
                if key not in mine:
                    return f"the result is missing {'.'.join((*where, str(key)))}"
                if (reason := walk(mine[key], value, (*where, str(key)))) is not None:
                    return reason
            return None
        if isinstance(theirs, (list, tuple)):
            if not isinstance(mine, (list, tuple)) or len(mine) != len(theirs):
                return f"the result is missing a part{place}"
            for a, b in zip(mine, theirs):
                if (reason := walk(a, b, where)) is not None:
                    return reason
            return None
        if type(mine) is type(theirs) and mine == theirs:
            return None
        # A probe's fact that an input came back as it was: the input is what differs, not a value.
        return "modified its input in place" if where and where[-1].endswith("_unchanged") and theirs is True \
            else f"wrong result{place}"

    return lambda submitted, expected: walk(submitted, expected, ())


def facts_equal(*keys: str, reason: str) -> Compare:
    """The entries ``keys`` equal in both results (missing counts as None;
    a result that is not a dict has no entries)."""

    def pick(value: object) -> list:
        return [value.get(k) if isinstance(value, dict) else None for k in keys]

    return lambda submitted, expected: None if pick(submitted) == pick(expected) else reason
