"""Compare a result with an expectation and describe the difference as plain
data. Public tests turn a :class:`Mismatch` into a message that shows values;
the grader turns the same mismatch into one that never does.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch


@dataclass(frozen=True)
class Mismatch:
    """How ``actual`` differs from ``expected``.

    ``kind`` is one of: ``type``, ``shape``, ``dtype``, ``nan``, ``values``.
    """

    kind: str
    expected: str
    actual: str
    # Only for ``values``: where, and by how much. Never shown by the grader.
    index: tuple[int, ...] | None = None
    max_abs_diff: float | None = None
    details: dict = field(default_factory=dict)


def compare_tensors(
    actual: object,
    expected: torch.Tensor,
    *,
    atol: float = 1e-5,
    rtol: float = 1e-4,
    check_dtype: bool = True,
) -> Mismatch | None:
    """None when ``actual`` is a plain tensor equal to ``expected`` within
    tolerance (NaN and inf must sit in the same places); else a Mismatch."""
    if type(actual) is not torch.Tensor:
        # Exact type: a subclass could override comparisons.
        return Mismatch("type", "a torch.Tensor", type(actual).__name__)
    if actual.shape != expected.shape:
        return Mismatch("shape", str(tuple(expected.shape)), str(tuple(actual.shape)))
    if check_dtype and actual.dtype != expected.dtype:
        return Mismatch("dtype", str(expected.dtype), str(actual.dtype))
    if actual.dtype == expected.dtype and torch.equal(actual, expected):
        # Bit-identical (NaN never is: those go the long way): within any
        # tolerance. Most correct results are, and this skips six float64 passes.
        return None
    actual_f = actual.detach().to(torch.float64)
    expected_f = expected.detach().to(torch.float64)
    # Close everywhere (the rule below: NaN where NaN, the same infinities,
    # |a - e| <= atol + rtol * |e|): one pass; the long way only to say where not.
    if bool(torch.isclose(actual_f, expected_f, rtol=rtol, atol=atol, equal_nan=True).all()):
        return None
    nan_actual, nan_expected = actual_f.isnan(), expected_f.isnan()
    if not torch.equal(nan_actual, nan_expected):
        where = (nan_actual != nan_expected).nonzero()[0]
        return Mismatch(
            "nan",
            "no NaN" if nan_actual.any() else "NaN",
            f"{int(nan_actual.sum())} NaN value(s)",
            index=tuple(int(i) for i in where),
        )
    both = ~nan_actual
    a, e = actual_f[both], expected_f[both]
    same_inf = torch.isinf(a) & torch.isinf(e) & (a == e)
    diff = (a - e).abs()
    diff[same_inf] = 0.0
    bad = diff > atol + rtol * e.abs().nan_to_num(posinf=0.0, neginf=0.0)
    if not bad.any():
        return None
    flat_index = both.nonzero()[int(bad.nonzero()[0])]
    index = tuple(int(i) for i in flat_index)
    return Mismatch(
        "values",
        f"{expected_f[index].item():.6g}",
        f"{actual_f[index].item():.6g}",
        index=index,
        max_abs_diff=float(diff.nan_to_num(posinf=float("inf")).max()),
        details={"n_bad": int(bad.sum()), "n_total": int(both.sum())},
    )
